//! MCP over stdio: the protocol on stdout only (logs belong on stderr),
//! every request with an id answered once, with its id, and calls still
//! running when stdin closes answered before the end.
//!
//! Lines are read here ([`Lines`], a transport of our own) rather than by
//! rmcp's line transport, which drops what `serde_json` refuses without an
//! answer: [`frame::read`] answers those itself and hands rmcp the rest.
//! Before the handshake, rmcp ends the session on any message but a
//! request, so a notification or response sent that early is dropped here.
//!
//! rmcp stops reading at end of input and gives running calls five
//! seconds before it cancels them, so a longer call's answer was lost.
//! [`Draining`] holds the end of input back until no call is in flight;
//! rmcp then sees it with nothing left to drop.

use std::borrow::Cow;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta as _, ProtocolVersion};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServerHandler as _, ServiceExt as _};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader, ReadBuf,
};
use tokio::sync::{Mutex, watch};

use crate::error::McpError;
use crate::frame::{self, Frame};
use crate::server::McpServer;

/// The longest line read (one message), as rmcp's own limit: longer ones
/// are dropped, so a peer that never sends a newline cannot exhaust memory.
const MAX_LINE: usize = 16 << 20;

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
        let lines = Lines::new(input, output, server.supported_protocol_versions());
        let running = match server.serve(lines).await {
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

/// Newline-delimited JSON-RPC, each line read through [`frame::read`].
pub(crate) struct Lines<R, W> {
    read: BufReader<R>,
    /// The line being read; kept across cancelled reads (rmcp polls
    /// `receive` in a `select!`).
    line: Vec<u8>,
    /// Set while skipping the rest of a line over [`MAX_LINE`].
    discarding: bool,
    out: Arc<Mutex<Out<W>>>,
    /// An answer made here, not yet queued for writing.
    answer: Option<Vec<u8>>,
    /// Whether rmcp has left its handshake loop, which ends the session on
    /// anything but a request.
    started: bool,
    versions: Cow<'static, [ProtocolVersion]>,
}

/// The output and the bytes queued for it. Each writer appends whole lines
/// and drains the queue, so a write cancelled halfway is finished by the
/// next one, before anything else, and lines never interleave.
struct Out<W> {
    w: W,
    queue: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> Out<W> {
    async fn drain(&mut self) -> io::Result<()> {
        while !self.queue.is_empty() {
            let n = self.w.write(&self.queue).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.queue.drain(..n);
        }
        self.w.flush().await
    }
}

impl<R: AsyncRead + Send + Unpin, W: AsyncWrite + Send + Unpin + 'static> Lines<R, W> {
    pub(crate) fn new(read: R, write: W, versions: Cow<'static, [ProtocolVersion]>) -> Self {
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            out: Arc::new(Mutex::new(Out {
                w: write,
                queue: Vec::new(),
            })),
            answer: None,
            started: false,
            versions,
        }
    }

    /// Reads up to a newline into `self.line` without letting it grow past
    /// [`MAX_LINE`]: `Some(true)` for a line, `Some(false)` for one too long
    /// (dropped), `None` at the end of input.
    async fn read_line(&mut self) -> io::Result<Option<bool>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(None);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let mut outcome = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + take > MAX_LINE {
                self.line.clear();
                self.discarding = newline.is_none();
                outcome = Some(false);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    outcome = Some(true);
                }
            }
            // No await between the copy and the consume: a cancelled read
            // leaves the partial line in `self.line` for the next call.
            self.read.consume(take);
            if let Some(whole) = outcome {
                return Ok(Some(whole));
            }
        }
    }

    /// Whether rmcp should see `message` now. Before the handshake it ends
    /// the session on a notification or response, so those are dropped; a
    /// request that starts a session (`initialize`, or one carrying the
    /// 2026-07-28 metadata at a supported version) ends that period, as it
    /// does in rmcp.
    fn admit(&mut self, message: &ClientJsonRpcMessage) -> bool {
        if self.started {
            return true;
        }
        let ClientJsonRpcMessage::Request(request) = message else {
            tracing::debug!("a message before the MCP handshake was dropped");
            return false;
        };
        self.started = match &request.request {
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
            ClientRequest::InitializeRequest(_) => true,
            other => {
                let meta = other.get_meta();
                meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
                    && meta
                        .protocol_version()
                        .is_some_and(|v| self.versions.contains(&v))
            }
        };
        true
    }
}

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = Arc::clone(&self.out);
        let line = serde_json::to_vec(&item);
        async move {
            let mut line = line.map_err(io::Error::other)?;
            line.push(b'\n');
            let mut out = out.lock().await;
            out.queue.extend_from_slice(&line);
            out.drain().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.answer.is_some() {
                // Taken only once the lock is held: this future may be
                // dropped while it waits for it.
                let mut out = self.out.lock().await;
                if let Some(answer) = self.answer.take() {
                    out.queue.extend_from_slice(&answer);
                }
                if let Err(e) = out.drain().await {
                    tracing::error!(error = %e, "writing an MCP answer failed");
                    return None;
                }
            }
            match self.read_line().await {
                Ok(Some(true)) => {}
                Ok(Some(false)) => {
                    tracing::error!(
                        max = MAX_LINE,
                        "an MCP message over the line limit was dropped"
                    );
                    continue;
                }
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "reading MCP input failed");
                    return None;
                }
            }
            let frame = frame::read(&self.line);
            self.line.clear();
            match frame {
                Frame::Message { message, .. } => {
                    if self.admit(&message) {
                        return Some(*message);
                    }
                }
                Frame::Answer { text, .. } => {
                    let mut line = text.into_bytes();
                    line.push(b'\n');
                    self.answer = Some(line);
                }
                Frame::Skip(why) => tracing::debug!(?why, "an MCP message was not answered"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut out = self.out.lock().await;
        if let Some(answer) = self.answer.take() {
            out.queue.extend_from_slice(&answer);
        }
        out.drain().await
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
