//! MCP over stdio: the protocol on stdout only (logs belong on stderr),
//! and calls still running when stdin closes answered before the end.
//!
//! rmcp stops reading at end of input and gives running calls five
//! seconds before it cancels them, so a longer call's answer was lost.
//! [`Draining`] holds the end of input back until no call is in flight;
//! rmcp then sees it with nothing left to drop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::ServiceExt as _;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use crate::error::McpError;
use crate::server::McpServer;

impl McpServer {
    /// Serves over this process's stdin and stdout until the client closes
    /// stdin, then returns once every call that was running has written its
    /// answer.
    ///
    /// Nothing else may write to stdout meanwhile: send logs to stderr.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves over any byte streams, as [`serve_stdio`](Self::serve_stdio)
    /// does over stdin and stdout (a socket, a pipe, an in-memory duplex).
    pub async fn serve_io<R, W>(self, input: R, output: W) -> Result<(), McpError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let server = self.for_connection();
        let input = Draining::new(input, server.watch_in_flight());
        let running = match server.serve((input, output)).await {
            Ok(running) => running,
            // The client left before the handshake: nothing was asked.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(McpError::Handshake(e.to_string())),
        };
        running
            .waiting()
            .await
            .map_err(|e| McpError::Handshake(format!("the server task failed: {e}")))?;
        Ok(())
    }
}

type Idle = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Input whose end is reported only once no call is in flight.
pub(crate) struct Draining<R> {
    inner: R,
    in_flight: watch::Receiver<usize>,
    /// Set at end of input: resolves when the count is zero.
    idle: Option<Idle>,
}

impl<R> Draining<R> {
    pub(crate) fn new(inner: R, in_flight: watch::Receiver<usize>) -> Self {
        Draining {
            inner,
            in_flight,
            idle: None,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Draining<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.idle.is_none() {
            let before = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) if buf.filled().len() == before => {
                    let mut rx = this.in_flight.clone();
                    this.idle = Some(Box::pin(async move {
                        // The last requests read may not have reached the
                        // handler yet: let them start and be counted.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = rx.wait_for(|n| *n == 0).await;
                    }));
                }
                other => return other,
            }
        }
        if let Some(Poll::Pending) = this.idle.as_mut().map(|f| f.as_mut().poll(cx)) {
            return Poll::Pending;
        }
        // End of input, now that nothing is running; it stays ended however
        // often it is read again.
        this.idle = Some(Box::pin(std::future::ready(())));
        Poll::Ready(Ok(()))
    }
}
