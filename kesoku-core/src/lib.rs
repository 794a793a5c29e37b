//! The core of kesoku: compile-time tool schemas, the typed argument
//! decoder, the tool registry, the runner, the call context, messages, the
//! session store and the gateway.
//!
//! Most users depend on the `kesoku` facade crate, which re-exports all of
//! this next to the `#[tool]` macro.

// The modules form layers: each uses only modules on lines above its own
// (`python3 tools/layers/check.py` checks there is no cycle, at any depth).
//
// 1. leaves:      hints, schema, content, request, future, delta, suggest,
//                 error_source,
//                 session_cache
// 1b.            tool_schema (schema, hints)
// 2. data:        arg_error (schema), message (request), tool_arg (schema)
// 3. errors:      error (arg_error, schema), validate (arg_error, schema),
//                 dynamic_schema (arg_error, validate)
// 4. results:     output (content, error), store (message, delta), row (store, message)
// 4b. hub:        gateway (store, message, delta)
// 5. context:     progress (message, error_source), context (progress, message)
// 6. a ready call: invocation (output, error, future)
// 7. decoding:    decode (context, error, schema, invocation),
//                 valid_args (decode, validate, arg_error, schema)
// 8. tools:       tool (decode, valid_args, invocation, context, ...)
// 9. registry:    registry (tool, error)
// 10. top:        runner (registry, tool, decode, message, ...), lowering (registry)
mod arg_error;
mod content;
mod context;
mod decode;
mod delta;
mod dynamic_schema;
mod error;
mod error_source;
mod future;
pub mod gateway;
mod hints;
mod invocation;
pub mod lowering;
mod message;
mod output;
mod progress;
mod registry;
mod request;
mod row;
mod runner;
mod schema;
mod session_cache;
pub mod store;
mod suggest;
mod tool;
mod tool_arg;
mod tool_schema;
mod valid_args;
mod validate;

pub use arg_error::{ArgError, ArgErrorKind, ArgsError};
pub use content::ContentBlock;
pub use context::{FromToolContext, InjectError, State, ToolContext};
pub use delta::{Delta, DeltaKind};
pub use error::{RegistryError, ToolError};
pub use error_source::ErrorSource;
pub use future::BoxFuture;
pub use gateway::{Deltas, Gateway, GatewayError};
pub use hints::ToolHints;
pub use invocation::Invocation;
pub use message::{Message, MessageType, Role, Status, keys};
pub use output::{IntoToolOutput, IntoToolResult, ToolOutput, ToolResult};
pub use progress::{Progress, ProgressError, ProgressFuture};
pub use registry::{
    LiveRegistry, ToolRegistry, WeakLiveRegistry, default_registry, try_default_registry,
};
pub use request::{ArgumentsParseError, ToolRequest};
pub use runner::{ErrorKind, RegistryRef, ToolRunner};
pub use schema::{
    ArraySchema, Field, JSON_SCHEMA_DIALECT, NamedSchema, ObjectSchema, Schema, StringSchema,
};
pub use session_cache::{SessionCache, Weigh};
pub use tokio_util::sync::CancellationToken;
pub use tool::{DynamicTool, Tool, ToolDef};
pub use tool_arg::ToolArg;
pub use tool_schema::{Location, ToolSchema};

/// What the macros' expansions and kesoku's own stores use. Not a public
/// API.
#[doc(hidden)]
pub mod __private {
    /// A message as a SQL row: the one encoding the `SQLite` and
    /// PostgreSQL stores share.
    pub mod row {
        pub use crate::row::*;
    }
    pub use crate::decode::{
        Arg, Locate, Parsed, PrepareError, PrepareFn, RawArgs, field, field_or_default, gate,
    };
    pub use crate::registry::ToolEntry;
    pub use crate::tool_arg::all_exact;
    pub use inventory;
    pub use serde;

    use crate::{InjectError, ToolError};

    /// The error of an injected parameter that could not be produced,
    /// naming the tool.
    pub fn inject_error(tool: &str, e: InjectError) -> ToolError {
        ToolError::Inject {
            tool: tool.into(),
            type_name: e.type_name,
            reason: e.reason,
        }
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

    /// A tool's return value, on its way to a [`ToolResult`](crate::ToolResult),
    /// when its type is not spelled `Result` (it may still be an alias of
    /// one). Method resolution on `&&&Returned<T>` picks, by how many
    /// references it takes off (autoderef specialization), [`ReturnsResult`]
    /// or [`ReturnsOutput`], else [`ReturnsValue`], else [`ReturnsOther`].
    /// The value sits in a `Cell` so that each can take it through shared
    /// references.
    pub struct Returned<T>(std::cell::Cell<Option<T>>);

    impl<T> Returned<T> {
        /// Wraps the value.
        pub const fn new(value: T) -> Self {
            Returned(std::cell::Cell::new(Some(value)))
        }

        fn take(&self) -> T {
            self.0
                .take()
                .expect("a tool's return value is converted once")
        }
    }

    /// `Result` returns: `Err` becomes an error result.
    pub trait ReturnsResult {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl<T: crate::IntoToolOutput, E: std::fmt::Display> ReturnsResult for &&&Returned<Result<T, E>> {
        fn kesoku_output(self, tool: &str) -> crate::ToolResult {
            crate::IntoToolResult::into_tool_result(self.take(), tool)
        }
    }

    /// A [`ToolOutput`](crate::ToolOutput) return (with content blocks) is taken as it is.
    pub trait ReturnsOutput {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl ReturnsOutput for &&&Returned<crate::ToolOutput> {
        fn kesoku_output(self, _tool: &str) -> crate::ToolResult {
            Ok(self.take())
        }
    }

    /// Any other `Serialize` return is encoded as it is.
    pub trait ReturnsValue {
        /// Converts the return value.
        fn kesoku_output(self, tool: &str) -> crate::ToolResult;
    }
    impl<T: serde::Serialize> ReturnsValue for &&Returned<T> {
        fn kesoku_output(self, tool: &str) -> crate::ToolResult {
            crate::output::encode(tool, &self.take())
        }
    }

    /// A type a tool cannot return: handed back as it is, so that the
    /// expansion's `IntoToolOutput` call on it, spanned at the user's return
    /// type, is the one error (naming that type, not this module).
    pub trait ReturnsOther<T> {
        /// The value itself.
        fn kesoku_output(self, tool: &str) -> Result<T, crate::ToolError>;
    }
    impl<T> ReturnsOther<T> for &Returned<T> {
        fn kesoku_output(self, _tool: &str) -> Result<T, crate::ToolError> {
            Ok(self.take())
        }
    }

    /// A tool's return type, asked for its schema: method resolution on
    /// `&&&OutputProbe<T>` picks [`OutputOfResult`] for `Result<T, E>` with
    /// `T: ToolArg`, else [`OutputOfValue`] for `T: ToolArg`, else
    /// [`OutputOfOther`], which has none.
    pub struct OutputProbe<T>(std::marker::PhantomData<fn() -> T>);

    impl<T> OutputProbe<T> {
        /// The probe.
        pub const NEW: Self = OutputProbe(std::marker::PhantomData);
    }

    /// `Result<T, E>`: `T`'s schema.
    pub trait OutputOfResult {
        /// The schema.
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema>;
    }
    impl<T: crate::ToolArg, E> OutputOfResult for &&&OutputProbe<Result<T, E>> {
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema> {
            Some(&T::SCHEMA)
        }
    }

    /// A `ToolArg` type: its schema.
    pub trait OutputOfValue {
        /// The schema.
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema>;
    }
    impl<T: crate::ToolArg> OutputOfValue for &&OutputProbe<T> {
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema> {
            Some(&T::SCHEMA)
        }
    }

    /// Any other type: no schema.
    pub trait OutputOfOther {
        /// No schema.
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema>;
    }
    impl<T> OutputOfOther for &OutputProbe<T> {
        fn kesoku_output_schema(self) -> Option<&'static crate::Schema> {
            None
        }
    }

    /// What `foo::SCHEMA` is when `#[tool] fn foo` has an error. The build
    /// stops at that error; this keeps each use of `foo::SCHEMA` or
    /// `foo::TOOL` from being a second one (in an editor too, which goes on
    /// past the first error).
    pub const PLACEHOLDER_SCHEMA: &crate::ToolSchema = &crate::ToolSchema::new(
        "placeholder",
        "",
        crate::ObjectSchema {
            fields: &[],
            flatten: &[],
            description: None,
        },
        crate::Location {
            file: "",
            line: 0,
            module_path: "",
        },
    );

    /// What `foo::TOOL` is when `#[tool] fn foo` has an error; see
    /// [`PLACEHOLDER_SCHEMA`]. Never called: the build fails.
    pub const PLACEHOLDER_TOOL: &crate::ToolDef = &crate::ToolDef::new(
        PLACEHOLDER_SCHEMA,
        |_, _, _| unreachable!("the placeholder of a #[tool] that did not compile"),
        false,
        || {
            static CACHE: OnceLock<Value> = OnceLock::new();
            &CACHE
        },
    );

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
