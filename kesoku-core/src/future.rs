//! [`BoxFuture`]: the boxed future of object-safe async traits and dynamic
//! tools.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future, as dynamic tools return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
