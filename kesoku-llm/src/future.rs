//! [`LlmFuture`]: the boxed future of the crate's object-safe traits.

use std::future::Future;
use std::pin::Pin;

/// A boxed future borrowing its inputs, so [`Llm`](crate::Llm) and
/// [`HttpTransport`](crate::HttpTransport) stay object-safe. It is
/// `Send`: a call can run on a spawned task.
pub type LlmFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
