//! [`Invocation`]: a tool call with its arguments decoded and its injected
//! parameters produced, ready to run.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::future::BoxFuture;
use crate::tool::error::ToolError;
use crate::tool::output::ToolResult;

/// A sync tool's body, ready to run on a thread pool.
type BlockingCall = Box<dyn FnOnce() -> ToolResult + Send + 'static>;

/// How a tool runs once its arguments are decoded.
pub enum Invocation {
    /// An async tool's future.
    Async(BoxFuture<ToolResult>),
    /// A sync tool's body, to run off the async worker threads.
    Blocking(BlockingCall),
}

impl Invocation {
    /// Runs the call: awaits an async tool, and runs a sync one on tokio's
    /// blocking pool; a panic in either becomes [`ToolError::Panicked`].
    pub async fn run(self, tool: &str) -> ToolResult {
        match self {
            Invocation::Async(fut) => match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(result) => result,
                Err(payload) => Err(ToolError::panicked(tool, &*payload)),
            },
            Invocation::Blocking(call) => match tokio::task::spawn_blocking(call).await {
                Ok(result) => result,
                Err(e) if e.is_panic() => Err(ToolError::panicked(tool, &*e.into_panic())),
                Err(e) => Err(ToolError::failed(format!(
                    "tool `{tool}` was cancelled: {e}"
                ))),
            },
        }
    }
}

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invocation::Async(_) => "Invocation::Async(..)",
            Invocation::Blocking(_) => "Invocation::Blocking(..)",
        })
    }
}
