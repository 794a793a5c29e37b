//! Compile-time schemas: the `'static` tree `#[tool]` builds, a tool's
//! whole schema, and its hints.

pub(crate) mod hints;
pub(crate) mod targets;
pub(crate) mod tool_schema;
pub(crate) mod tree;
