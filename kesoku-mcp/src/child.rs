//! The process of a server spoken to over stdio, and its end: its stdin
//! closed (the connection's end closes it), then a bounded wait for it to
//! exit, as MCP's stdio shutdown says, before it is killed. A server
//! exiting by itself gets to flush what it buffered (its telemetry's
//! batch exporter, say); killed at once, it would lose it.

use std::sync::Mutex;
use std::time::Duration;

use tokio::process::Child;

/// A server process, until it is ended (once).
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Mutex<Option<Child>>,
}

/// How a server process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited within the time it was given.
    Exited,
    /// It was still running when that time passed, and was killed.
    Killed,
    /// It had been ended already.
    Before,
}

impl ServerProcess {
    /// `child`, spawned with `kill_on_drop`: a process whose end is never
    /// waited for (its runtime shut down first) is still killed.
    pub(crate) fn new(child: Child) -> Self {
        ServerProcess {
            child: Mutex::new(Some(child)),
        }
    }

    fn take(&self) -> Option<Child> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Waits up to `grace` for the process to exit, then kills it. The
    /// caller has ended the connection, which closes the process's stdin.
    pub(crate) async fn end(&self, grace: Duration) -> std::io::Result<Ended> {
        match self.take() {
            Some(child) => end(child, grace).await,
            None => Ok(Ended::Before),
        }
    }

    /// Like [`end`](Self::end), on a task of the current runtime, for a
    /// caller that cannot wait (a synchronous close, a drop). With no
    /// runtime, the process is killed at once.
    pub(crate) fn end_in_background(&self, grace: Duration, server: &str) {
        let Some(child) = self.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Dropped: `kill_on_drop` kills it.
            return;
        };
        let server = server.to_owned();
        runtime.spawn(async move {
            if let Err(e) = end(child, grace).await {
                tracing::warn!(server = %server, error = %e, "the MCP server process could not be ended");
            }
        });
    }
}

async fn end(mut child: Child, grace: Duration) -> std::io::Result<Ended> {
    if let Ok(exited) = tokio::time::timeout(grace, child.wait()).await {
        return exited.map(|_| Ended::Exited);
    }
    child.kill().await?;
    Ok(Ended::Killed)
}
