//! [`ToolError`]: why a tool call produced no result, and
//! [`RegistryError`]: why a tool could not be registered.

use crate::args::arg_error::ArgsError;
use crate::schema::tool_schema::Location;

/// Why a tool call failed. Its `Display` is what the model reads.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments did not fit the tool's schema.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// The tool returned `Err`; this is the error's `Display`.
    #[error("{0}")]
    Failed(String),
    /// An injected parameter could not be produced from the context.
    #[error("cannot inject `{type_name}` into tool `{tool}`: {reason}")]
    Inject {
        /// The tool being called.
        tool: String,
        /// The Rust type of the injected parameter.
        type_name: &'static str,
        /// What was missing.
        reason: String,
    },
    /// The tool panicked; this is the panic message.
    #[error("tool `{tool}` panicked: {message}")]
    Panicked {
        /// The tool being called.
        tool: String,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// The tool ran past its time limit.
    #[error("tool `{tool}` timed out after {} (its time limit); it may still be running in the background", humanize(*.limit))]
    Timeout {
        /// The tool being called.
        tool: String,
        /// The limit that fired.
        limit: std::time::Duration,
    },
    /// The context was cancelled while the tool was waiting.
    #[error("tool `{tool}` was cancelled")]
    Cancelled {
        /// The tool being called.
        tool: String,
    },
    /// The tool's output could not be encoded as JSON.
    #[error("tool `{tool}` returned a value that cannot be encoded as JSON: {message}")]
    Encode {
        /// The tool being called.
        tool: String,
        /// The serializer's message.
        message: String,
    },
}

impl ToolError {
    /// A tool failure with this message, as a tool's own `Err` produces.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// The message of a caught panic payload.
    pub fn panicked(tool: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".into());
        ToolError::Panicked {
            tool: tool.into(),
            message,
        }
    }
}

/// `1.5s`, `250ms`, `2m`: a duration the way a person writes it.
fn humanize(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms > 0 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools share a name.
    #[error(
        "two tools are named `{name}`: one defined at {}, the other at {}; rename one with #[tool(name = \"...\")]",
        where_(.first.as_ref()), where_(.second.as_ref())
    )]
    Duplicate {
        /// The shared name.
        name: String,
        /// The tool registered first.
        first: Option<Location>,
        /// The tool that clashed with it.
        second: Option<Location>,
    },
    /// A name providers would reject.
    #[error(
        "invalid tool name `{name}`: names must match ^[A-Za-z_][A-Za-z0-9_-]{{0,63}}$, which every provider accepts"
    )]
    BadName {
        /// The rejected name.
        name: String,
    },
    /// A dynamic tool's schema is not an object schema.
    #[error("invalid schema for tool `{name}`: {reason}")]
    BadSchema {
        /// The tool.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

fn where_(l: Option<&Location>) -> String {
    l.map_or_else(|| "run time (a dynamic tool)".into(), ToString::to_string)
}
