//! The connections an HTTP server holds: one slot each, what each is doing
//! (sending a request's headers, being served, idle between requests), and
//! which to close when a new connection finds every slot taken.
//!
//! Closing comes before refusing: a client holding a connection it sends
//! nothing on (kept alive, or trickling its headers) would otherwise lock
//! every other client out until a timeout closed it. A connection is
//! closed only while no request of its is being served, so no call is cut
//! off: idle ones first (their clients reconnect when they have something
//! to send), then the one that has been sending its headers longest.

use std::collections::HashMap;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Sending a request's headers, or nothing yet: no request of it has
    /// reached the service.
    Headers,
    /// A request is being served: its body read, its answer written.
    Busy,
    /// Kept alive between requests, its last answer written.
    Idle,
}

/// One connection: its phase, since when, and the signal to close it.
#[derive(Debug)]
pub(super) struct Conn {
    phase: Mutex<(Phase, Instant)>,
    close: CancellationToken,
}

impl Conn {
    fn state(&self) -> MutexGuard<'_, (Phase, Instant)> {
        // A poisoned lock still holds a phase: the worst is a wrong choice
        // of which connection to close.
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The phase it is in.
    pub(super) fn phase(&self) -> Phase {
        self.state().0
    }

    /// Enters `phase` (its time is kept if it is in it already).
    pub(super) fn set(&self, phase: Phase) {
        let mut state = self.state();
        if state.0 != phase {
            *state = (phase, Instant::now());
        }
    }

    /// Resolves when the server wants the connection closed.
    pub(super) async fn closing(&self) {
        self.close.cancelled().await;
    }
}

/// The slots of a server: at most `max` connections at once.
#[derive(Debug)]
pub(super) struct Slots {
    max: usize,
    held: Mutex<Registry>,
    /// Told each time a slot is given back.
    released: Notify,
}

#[derive(Debug, Default)]
struct Registry {
    next: u64,
    conns: HashMap<u64, Arc<Conn>>,
}

/// A connection's slot, given back when dropped.
#[derive(Debug)]
pub(super) struct Held {
    slots: Arc<Slots>,
    id: u64,
    conn: Arc<Conn>,
}

impl Held {
    /// The connection the slot is held for.
    pub(super) fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.slots.registry().conns.remove(&self.id);
        // Stored if the accept loop is not waiting yet: it will not miss it.
        self.slots.released.notify_one();
    }
}

impl Slots {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Slots {
            max,
            held: Mutex::new(Registry::default()),
            released: Notify::new(),
        })
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection: a free one, or one made by closing an
    /// idle connection (idle longest first), else the one that has been
    /// sending its headers longest; waiting up to `wait` for the closed
    /// one to go. `None` if every connection is being served, if one
    /// closed for an earlier connection has not gone yet (it may be
    /// finishing a request that reached the service as it was chosen),
    /// or if none went in time: the accept loop, which waits here, never
    /// waits long, so a flood of connections cannot hold off the next.
    pub(super) async fn admit(self: &Arc<Self>, wait: Duration) -> Option<Held> {
        let deadline = Instant::now() + wait;
        let mut chose = false;
        loop {
            {
                let mut registry = self.registry();
                if registry.conns.len() < self.max {
                    let id = registry.next;
                    registry.next += 1;
                    let conn = Arc::new(Conn {
                        phase: Mutex::new((Phase::Headers, Instant::now())),
                        close: CancellationToken::new(),
                    });
                    registry.conns.insert(id, Arc::clone(&conn));
                    return Some(Held {
                        slots: Arc::clone(self),
                        id,
                        conn,
                    });
                }
                // One connection closed at a time: another is chosen only
                // once it has gone and the slots are still full.
                let closing = registry.conns.values().any(|c| c.close.is_cancelled());
                if closing && !chose {
                    return None;
                }
                if !closing {
                    let victim = registry
                        .conns
                        .values()
                        .filter_map(|c| {
                            let (phase, since) = *c.state();
                            match phase {
                                Phase::Idle => Some(((0, since), c)),
                                Phase::Headers => Some(((1, since), c)),
                                Phase::Busy => None,
                            }
                        })
                        .min_by_key(|(rank, _)| *rank);
                    match victim {
                        Some((_, conn)) => conn.close.cancel(),
                        None => return None,
                    }
                    chose = true;
                }
            }
            if tokio::time::timeout_at(deadline, self.released.notified())
                .await
                .is_err()
            {
                return None;
            }
        }
    }
}

/// A response body that marks its connection idle once it is done with
/// (hyper drops it when it has written it, or the connection ends).
pub(super) struct Tracked<B> {
    pub(super) body: B,
    pub(super) conn: Arc<Conn>,
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.conn.set(Phase::Idle);
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream: what it reads moves an idle connection into
/// its next request's headers, and its writes fail once one has made no
/// progress for `limit`: a client that stops reading (its receive window
/// closed) would otherwise hold its connection, and so a slot, for as long
/// as it likes, since hyper times out only the reading of headers.
pub(super) struct Io {
    stream: TcpStream,
    conn: Arc<Conn>,
    limit: Duration,
    /// Armed when a write waits, disarmed when one makes progress.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Io {
    pub(super) fn new(stream: TcpStream, conn: Arc<Conn>, limit: Duration) -> Self {
        Io {
            stream,
            conn,
            limit,
            stalled: None,
        }
    }

    /// A write's outcome `poll`, or a timeout once writes have waited
    /// `limit` with no progress.
    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took none of its answer for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        // Bytes on an idle connection begin its next request: from now
        // on it is closed for room only as one sending its headers.
        if buf.filled().len() > before && self.conn.phase() == Phase::Idle {
            self.conn.set(Phase::Headers);
        }
        poll
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.progress(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.progress(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    // A flush moves no bytes (a TCP stream's never waits), so it does not
    // count as progress: only a write that took bytes disarms the timer.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
