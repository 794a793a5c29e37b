//! What a tool returns: [`ToolOutput`], and the conversions from the return
//! types `#[tool]` functions may have.

use std::fmt::Display;

use serde::Serialize;
use serde_json::Value;

use crate::content::ContentBlock;
use crate::tool::error::ToolError;

/// The successful output of a tool call: structured JSON, content blocks
/// (images, documents, media) for the model to look at, and the text the
/// model reads.
///
/// A `#[tool]` may return it (or `Result<ToolOutput, E>`) to attach blocks:
///
/// ```
/// use kesoku_core::{ContentBlock, ToolOutput};
///
/// let out = ToolOutput::new("a red square".into())
///     .with_block(ContentBlock::image("image/png", vec![0x89, b'P', b'N', b'G']));
/// assert_eq!(out.blocks.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The tool's return value, encoded as JSON (`null` for `()`).
    pub value: Value,
    /// Content blocks for the model, sent with the result.
    pub blocks: Vec<ContentBlock>,
}

impl ToolOutput {
    /// Wraps a JSON value.
    pub fn new(value: Value) -> Self {
        ToolOutput {
            value,
            blocks: Vec::new(),
        }
    }

    /// Adds a content block.
    #[must_use]
    pub fn with_block(mut self, block: ContentBlock) -> Self {
        self.blocks.push(block);
        self
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
            other => crate::json_text::json_text(other),
        }
    }
}

/// The result of running a tool.
pub type ToolResult = Result<ToolOutput, ToolError>;

/// Encodes a plain return value (`T: Serialize`, including `()`).
pub(crate) fn encode<T: Serialize + ?Sized>(tool: &str, value: &T) -> ToolResult {
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

impl<T: IntoToolOutput, E: Display> IntoToolResult for Result<T, E> {
    fn into_tool_result(self, tool: &str) -> ToolResult {
        match self {
            Ok(v) => v.into_tool_output(tool),
            Err(e) => Err(ToolError::Failed(e.to_string())),
        }
    }
}

/// A successful value: any `T: Serialize` is encoded; a [`ToolOutput`] is
/// taken as it is.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's output",
    label = "a tool returns `T: serde::Serialize`, `Result<T, E>` with `E: std::fmt::Display`, `()` or `kesoku::ToolOutput`",
    note = "derive or implement `serde::Serialize` for `{Self}`, or return a `kesoku::ToolOutput` built from it"
)]
pub trait IntoToolOutput {
    /// Converts the value.
    fn into_tool_output(self, tool: &str) -> ToolResult;
}

impl<T: Serialize> IntoToolOutput for T {
    fn into_tool_output(self, tool: &str) -> ToolResult {
        encode(tool, &self)
    }
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self, _tool: &str) -> ToolResult {
        Ok(self)
    }
}
