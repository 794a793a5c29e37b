//! What a tool returns: [`ToolOutput`], and the conversions from the return
//! types `#[tool]` functions may have.

use std::fmt::Display;

use serde::Serialize;
use serde_json::Value;

use crate::error::ToolError;

/// The successful output of a tool call: structured JSON, plus the text the
/// model reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The tool's return value, encoded as JSON (`null` for `()`).
    pub value: Value,
}

impl ToolOutput {
    /// Wraps a JSON value.
    pub fn new(value: Value) -> Self {
        ToolOutput { value }
    }

    /// The text the model reads: a string as is, `()` as nothing, and any
    /// other value as compact JSON.
    ///
    /// ```
    /// # use kesoku_core::ToolOutput;
    /// assert_eq!(ToolOutput::new("hi".into()).text(), "hi");
    /// assert_eq!(ToolOutput::new(serde_json::json!({"a": 1})).text(), r#"{"a":1}"#);
    /// ```
    pub fn text(&self) -> String {
        match &self.value {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
}

/// The result of running a tool.
pub type ToolResult = Result<ToolOutput, ToolError>;

/// Encodes a plain return value (`T: Serialize`, including `()`).
pub fn encode<T: Serialize + ?Sized>(tool: &str, value: &T) -> ToolResult {
    serde_json::to_value(value)
        .map(ToolOutput::new)
        .map_err(|e| ToolError::Encode {
            tool: tool.into(),
            message: e.to_string(),
        })
}

/// A `Result` return type: `Ok` is encoded, `Err` becomes [`ToolError::Failed`]
/// with the error's `Display`, which the model reads.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned from a tool",
    label = "a tool may return `T`, `Result<T, E>` or `()`, with `T: serde::Serialize` and `E: std::fmt::Display`"
)]
pub trait IntoToolResult {
    /// Converts the function's return value.
    fn into_tool_result(self, tool: &str) -> ToolResult;
}

impl<T: Serialize, E: Display> IntoToolResult for Result<T, E> {
    fn into_tool_result(self, tool: &str) -> ToolResult {
        match self {
            Ok(v) => encode(tool, &v),
            Err(e) => Err(ToolError::Failed(e.to_string())),
        }
    }
}
