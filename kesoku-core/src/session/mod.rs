//! The session runtime: what a session is made of (messages, the calls
//! in them, deltas) and the parts that keep and relay it (the store, the
//! gateway), with the trait tools report progress through.

pub(crate) mod delta;
pub mod gateway;
pub(crate) mod message;
pub(crate) mod progress;
pub(crate) mod request;
pub(crate) mod session_cache;
pub mod store;
