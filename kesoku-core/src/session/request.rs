//! [`ToolRequest`]: one call the model asked for.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call from the model: the provider's call id, the tool name and
/// the arguments.
///
/// Deserializes from `{"id", "name", "arguments"}`, where `arguments` is a
/// JSON object or, as `OpenAI` sends it, a string holding JSON. A string is
/// kept as it came and parsed by [`ToolRequest::parse_arguments`], so a
/// malformed one becomes an error result for the model, not a failure to
/// read the whole turn.
///
/// ```
/// use kesoku_core::ToolRequest;
///
/// let openai: ToolRequest = serde_json::from_str(
///     r#"{"id": "call_1", "name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}"#,
/// ).unwrap();
/// assert_eq!(openai.parse_arguments().unwrap()["b"], 2);
///
/// let cut = ToolRequest::new("call_2", "add", r#"{"a": 1, "b"#.into());
/// assert!(cut.parse_arguments().unwrap_err().to_string().contains("cut off"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The provider's id for this call.
    pub id: String,
    /// The tool to call.
    pub name: String,
    /// A JSON object, or a string holding one.
    #[serde(default)]
    pub arguments: Value,
}

/// Why a call's arguments are not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentsParseError {
    /// The JSON ends early: the model's output was cut off.
    #[error(
        "the arguments of `{tool}` were cut off after {len} characters (the JSON ends at line {line}, column {column} before it is complete); the output was probably truncated: send a shorter call, for example by splitting the work into several calls"
    )]
    Truncated {
        /// The tool called.
        tool: String,
        /// How much text came.
        len: usize,
        /// Where it ends.
        line: usize,
        /// Where it ends.
        column: usize,
    },
    /// The JSON is malformed.
    #[error(
        "the arguments of `{tool}` are not valid JSON: {message} at line {line}, column {column}"
    )]
    Invalid {
        /// The tool called.
        tool: String,
        /// The parser's message.
        message: String,
        /// Where it failed.
        line: usize,
        /// Where it failed.
        column: usize,
    },
}

impl ToolRequest {
    /// A request with object (or string) arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolRequest {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    /// The arguments as JSON: parses a string, borrows anything else.
    /// An empty or blank string is an empty object, as some providers send
    /// for tools without parameters.
    pub fn parse_arguments(&self) -> Result<Cow<'_, Value>, ArgumentsParseError> {
        let Value::String(raw) = &self.arguments else {
            return Ok(Cow::Borrowed(&self.arguments));
        };
        if raw.trim().is_empty() {
            return Ok(Cow::Owned(Value::Object(serde_json::Map::new())));
        }
        serde_json::from_str(raw).map(Cow::Owned).map_err(|e| {
            if e.is_eof() {
                ArgumentsParseError::Truncated {
                    tool: self.name.clone(),
                    len: raw.chars().count(),
                    line: e.line(),
                    column: e.column(),
                }
            } else {
                let full = e.to_string();
                // serde_json appends " at line L column C"; we say it our way.
                let message = full
                    .rsplit_once(" at line ")
                    .map_or(full.as_str(), |(m, _)| m)
                    .to_owned();
                ArgumentsParseError::Invalid {
                    tool: self.name.clone(),
                    message,
                    line: e.line(),
                    column: e.column(),
                }
            }
        })
    }
}
