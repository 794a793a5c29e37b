//! The core of kesoku: compile-time tool schemas, the typed argument
//! decoder, the tool registry and the call context.
//!
//! Most users depend on the `kesoku` facade crate, which re-exports all of
//! this next to the `#[tool]` macro.

mod args;
mod content;
mod context;
mod decode;
mod error;
mod gateway;
pub mod lowering;
mod message;
mod output;
mod registry;
mod request;
mod runner;
mod schema;
mod tool;
mod tool_arg;
mod validate;

pub use args::{ArgError, ArgErrorKind, Args, ArgsError};
pub use content::ContentBlock;
pub use context::{FromToolContext, InjectError, State, ToolContext};
pub use error::ToolError;
pub use gateway::{Gateway, GatewayError, InMemoryGateway};
pub use message::{Message, MessageType, Role, Status, keys};
pub use output::{IntoToolOutput, IntoToolResult, ToolOutput, ToolResult, encode};
pub use registry::{RegistryError, ToolRegistry, default_registry, try_default_registry};
pub use request::{ArgumentsParseError, ToolRequest};
pub use runner::{ErrorKind, IsInterrupted, RegistryRef, ToolRunner};
pub use schema::{
    ArraySchema, Field, JSON_SCHEMA_DIALECT, Location, NamedSchema, ObjectSchema, Schema,
    StringSchema, ToolSchema,
};
pub use tokio_util::sync::CancellationToken;
pub use tool::{BlockingCall, BoxFuture, CacheFn, DynamicTool, Invocation, Tool, ToolDef};
pub use tool_arg::ToolArg;

/// What the macros' expansions use. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::decode::{
        Arg, Failed, Locate, Parsed, PrepareFn, RawArgs, Rejected, Step, all_exact, field,
        field_or_default, gate,
    };
    pub use crate::registry::ToolEntry;
    pub use inventory;
    pub use serde;

    use crate::{FromToolContext, ToolContext, ToolError};

    /// Produces an injected parameter, naming the tool on failure.
    pub fn inject<T: FromToolContext>(tool: &str, ctx: &ToolContext) -> Result<T, ToolError> {
        T::from_tool_context(ctx).map_err(|e| ToolError::Inject {
            tool: tool.into(),
            type_name: e.type_name,
            reason: e.reason,
        })
    }

    pub use serde_json::Value;
    pub use std::sync::OnceLock;

    /// Whether a parameter of this schema may be absent (`Option<T>`).
    pub const fn is_nullable(schema: &crate::Schema) -> bool {
        matches!(schema, crate::Schema::Nullable(_))
    }

    /// Holds a parameter's default value while the schema renders it; see
    /// [`DefaultJson`] and [`NoDefaultJson`].
    pub struct DefaultValue<T>(pub T);

    /// Renders a `Serialize` default. Method resolution picks this over
    /// [`NoDefaultJson`] when it applies (autoref specialization).
    pub trait DefaultJson {
        /// The default as JSON.
        fn kesoku_default_json(&self) -> Option<Value>;
    }
    impl<T: serde::Serialize> DefaultJson for DefaultValue<T> {
        fn kesoku_default_json(&self) -> Option<Value> {
            serde_json::to_value(&self.0).ok()
        }
    }

    /// A tool's return value, on its way to a [`ToolResult`](crate::ToolResult).
    /// Method resolution picks [`ReturnsResult`] when it is a `Result`
    /// (also through an alias), else [`ReturnsValue`] (autoref specialization).
    pub struct Returned<T>(pub T);

    /// `Result` returns: `Err` becomes an error result.
    pub trait ReturnsResult {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl<T: crate::IntoToolOutput, E: std::fmt::Display> ReturnsResult for Returned<Result<T, E>> {
        fn kesoku_output(self, tool: &str) -> crate::ToolResult {
            crate::IntoToolResult::into_tool_result(self.0, tool)
        }
    }

    /// A [`ToolOutput`](crate::ToolOutput) return (with content blocks) is taken as it is.
    pub trait ReturnsOutput {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl ReturnsOutput for Returned<crate::ToolOutput> {
        fn kesoku_output(self, _tool: &str) -> crate::ToolResult {
            Ok(self.0)
        }
    }

    /// Any other `Serialize` return is encoded as it is.
    pub trait ReturnsValue {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl<T: serde::Serialize> ReturnsValue for &Returned<T> {
        fn kesoku_output(self, tool: &str) -> crate::ToolResult {
            crate::encode(tool, &self.0)
        }
    }

    /// The fallback for defaults that are not `Serialize`: not shown.
    pub trait NoDefaultJson {
        /// Always `None`.
        fn kesoku_default_json(&self) -> Option<Value>;
    }
    impl<T> NoDefaultJson for &DefaultValue<T> {
        fn kesoku_default_json(&self) -> Option<Value> {
            None
        }
    }
}

/// The closest of `candidates` to `word`, if one is close enough to be a
/// likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .map(|c| (strsim::normalized_damerau_levenshtein(word, c), c))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
