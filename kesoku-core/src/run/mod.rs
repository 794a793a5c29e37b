//! The runner: one call's lifecycle, from a request to its result
//! message.

pub(crate) mod runner;
mod span;
