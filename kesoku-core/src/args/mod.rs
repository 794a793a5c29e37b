//! Arguments checked: typed errors with JSON paths, validation against
//! a schema tree or a JSON Schema, and the `ToolArg` trait (`foreign`:
//! for other crates' types).

pub(crate) mod arg_error;
pub(crate) mod dynamic_schema;
#[cfg(any(
    feature = "uuid",
    feature = "chrono",
    feature = "url",
    feature = "duration"
))]
mod foreign;
pub(crate) mod tool_arg;
pub(crate) mod validate;
