//! The tool system: a tool's definition and its call, from arguments
//! decoded and injected to its output, and the registry.

pub(crate) mod call;
pub(crate) mod context;
pub(crate) mod decode;
pub(crate) mod def;
pub(crate) mod error;
pub(crate) mod invocation;
pub(crate) mod output;
pub(crate) mod registry;
pub(crate) mod valid_args;
