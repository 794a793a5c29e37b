//! The core of kesoku: compile-time tool schemas, the typed argument
//! decoder, the tool registry, the runner, the call context, messages, the
//! session store and the gateway.
//!
//! Most users depend on the `kesoku` facade crate, which re-exports all of
//! this next to the `#[tool]` macro.

// The modules form layers, by folder: each uses only folders on lines
// above its own (`python3 tools/layers/check.py` checks there is no
// cycle, at any depth, file by file).
//
// | folder     | holds |
// | ---------- | ----- |
// | leaves     | `backoff`, `content`, `future`, `suggest`, `error_source` |
// | `session/` | the session runtime's data and parts: `request` (a call), `message`, `delta`, `progress` (the trait tools report through), `store` (+ `leases`, `LocalLeases`, `MemoryStore`, `row`, `testing`), `gateway` (+ `filter`, `listener`, `error`), `session_cache` |
// | `schema/`  | compile-time schemas: `tree`, `hints`, `tool_schema`, `targets` (what each provider refuses, for the compile-time check) |
// | `args/`    | arguments checked: `arg_error`, `validate`, `dynamic_schema`, `tool_arg` |
// | `tool/`    | the tool system: `error`, `output`, `invocation`, `context`, `decode` (the strict fast path), `call` (a call prepared, shared per signature), `valid_args` (the slow path), `def` (`Tool`, `ToolDef`, `DynamicTool`), `registry` |
// | `run/`     | `runner`: the call lifecycle; `span`: its span |
// | `lowering/`| schemas lowered per provider, over a registry |
// | `output`   | the shape of a typed answer, lowered and checked |
mod args;
mod backoff;
mod content;
mod error_source;
mod future;
mod json_text;
pub mod lowering;
mod output;
mod run;
mod schema;
mod session;
mod suggest;
mod tool;

pub use session::{gateway, store};

pub use args::arg_error::{ArgError, ArgErrorKind, ArgsError};
pub use args::tool_arg::ToolArg;
pub use backoff::{Backoff, Jitter};
pub use content::ContentBlock;
pub use error_source::{ErrorChain, ErrorSource};
pub use future::BoxFuture;
pub use output::{OutputError, OutputSchema, OutputSchemaError};
pub use run::runner::{ErrorKind, RegistryRef, ToolRunner};
pub use schema::hints::ToolHints;
pub use schema::targets::Target;
#[doc(hidden)]
pub use schema::targets::{Constructs, Refusals};
pub use schema::tool_schema::{Location, ToolSchema};
pub use schema::tree::{
    ArraySchema, Field, JSON_SCHEMA_DIALECT, NamedSchema, ObjectSchema, Schema, StringSchema,
};
pub use session::delta::{Delta, DeltaKind, Via};
pub use session::gateway::{Deltas, Gateway, GatewayError};
pub use session::message::{Message, MessageType, Role, Status, keys};
pub use session::progress::{Progress, ProgressError, ProgressFuture};
pub use session::request::{ArgumentsParseError, ToolRequest};
pub use session::session_cache::{SessionCache, Weigh};
pub use tokio_util::sync::CancellationToken;
pub use tool::context::{FromToolContext, InjectError, State, ToolContext};
pub use tool::def::{DynamicTool, Tool, ToolDef};
pub use tool::error::{RegistryError, ToolError};
pub use tool::invocation::Invocation;
pub use tool::output::{IntoToolOutput, IntoToolResult, ToolOutput, ToolResult};
pub use tool::registry::{
    LiveRegistry, ToolRegistry, WeakLiveRegistry, default_registry, try_default_registry,
};

/// What the macros' expansions use. Not a public
/// API.
#[doc(hidden)]
pub mod __private {
    pub use crate::args::tool_arg::all_exact;
    pub use crate::tool::call::{
        Context, ConvertFn, DecodeFn, Defaulted, Injected, Model, Param, Params, Prepare, SyncCall,
        inject_error, unit_result,
    };
    pub use crate::tool::decode::{
        Arg, Locate, Parsed, PrepareError, PrepareFn, RawArgs, field, field_or_default, gate,
    };
    pub use crate::tool::registry::ToolEntry;
    pub use inventory;
    pub use serde;

    pub use serde_json::Value;

    /// `T`'s constructs, through a call rather than a constant operand, so
    /// that building a derived type's constant does not evaluate its
    /// fields' (two types that contain each other would be a cycle).
    pub const fn constructs<T: crate::ToolArg + ?Sized>() -> crate::Constructs {
        T::__CONSTRUCTS
    }

    /// `#[tool(targets(...))]`'s check of one parameter: fails the build
    /// with the first refusal among `refusals` (the parameter's, from its
    /// type's `ToolArg::__REFUSALS`) of a target in `targets` (bit `i` is
    /// `Target::ALL[i]`), reported where the call is written (at the
    /// parameter), not here.
    #[track_caller]
    pub const fn refuse(targets: u8, refusals: &crate::schema::targets::Refusals) {
        if let Some(why) = crate::schema::targets::first_refusal(targets, refusals) {
            panic!("{}", why);
        }
    }

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
            crate::tool::output::encode(tool, &self.take())
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
        &((|_, _, _| unreachable!("the placeholder of a #[tool] that did not compile"))
            as crate::__private::PrepareFn),
        false,
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
