//! The threads that own a store's connections, and how a call reaches one.
//!
//! One connection writes: `SQLite` admits one writer at a time anyway, so
//! a pool of writers would only contend for its lock, while one writer
//! runs the calls of this process in order with its statement cache warm.
//! Reads go to a few readers, which WAL lets run beside the writer and
//! each other; a short read runs on the writer instead when it is free,
//! its page cache being current. A second process (or a second `SqliteStore` on the same
//! file) has its own writer; `SQLite`'s locks and the busy timeout order
//! the two.
//!
//! A short call runs at once on the caller's thread when its connection is
//! free and no call of this process is queued before it. Handing it to
//! another thread and back costs two wake-ups, which on a virtual machine
//! came to about 120 µs a call, several times the commit itself (about
//! 20 µs). Such a call never waits there: it runs with no busy timeout,
//! and a database another connection holds sends it to the connection's
//! own thread, which waits out the busy timeout as before, off the async
//! runtime's workers. So do calls that may read a lot (a whole history).
//! Nor does a write wait for a whole checkpoint (see `checkpoints`).
//!
//! The writes that queue for the writer's thread while it is busy (many
//! sessions writing at once) are committed together, as a group (see
//! `group`).

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};
use tokio::sync::oneshot;

use crate::checkpoints::{Checkpoints, Log, log_after_write};
use crate::connection;
use crate::error::Failure;
use crate::group::{self, Job, MAX_GROUP, roll_back};

/// What a connection's thread is asked.
enum Msg {
    /// A call.
    Run(Job),
    /// Work between calls, outside any transaction (a wait for a
    /// checkpoint, which a write begun before it ends would not let start
    /// the log over).
    Between(Box<dyn FnOnce() + Send>),
    /// Close the connection, saying how that went, and end the thread.
    Close(oneshot::Sender<rusqlite::Result<()>>),
}

/// Which connection a call needs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lane {
    /// The writer: every call that changes the database.
    Write,
    /// Any reader (the writer when there are none).
    Read,
}

/// Whether a call may run on the caller's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Where {
    /// Here when its connection is free (the call is short).
    Here,
    /// Always on the connection's thread (the call may take long).
    Away,
}

/// A connection, shared by its thread and the callers that run here;
/// `None` once closed.
type Shared = Arc<Mutex<Option<Connection>>>;

/// A store's connections, opened.
pub(crate) struct Connections {
    pub(crate) writer: Connection,
    pub(crate) readers: Vec<Connection>,
    /// For a file; a database in memory has no log.
    pub(crate) checkpointer: Option<Connection>,
    pub(crate) busy_timeout: Duration,
}

/// The store's connections and their threads. The threads end, and the
/// connections close, on [`Workers::close`] or when the last handle is
/// dropped.
pub(crate) struct Workers {
    writer: Shared,
    write_queue: mpsc::Sender<Msg>,
    /// Writes queued for the writer's thread and not yet run: a write runs
    /// here only when there is none, so this process's writes keep their
    /// order.
    write_backlog: Arc<AtomicUsize>,
    readers: Vec<Shared>,
    read_queue: Option<mpsc::Sender<Msg>>,
    /// Set by [`Workers::close`]: calls made after it fail.
    closed: AtomicBool,
    /// The connections' busy timeout, restored after a call here.
    busy_timeout: Duration,
    checkpoints: Option<Checkpoints>,
}

/// The result of a call: run here already, or queued on a thread.
pub(crate) enum Reply<T> {
    /// Run here; `None` if it panicked.
    Done(Option<Result<T, Failure>>),
    /// Queued; the receiver says so if the thread stopped.
    Queued(oneshot::Receiver<Result<T, Failure>>),
}

impl<T> Reply<T> {
    /// The call's result; `None` when it was lost (it panicked, or its
    /// thread has stopped).
    pub(crate) async fn wait(self) -> Option<Result<T, Failure>> {
        match self {
            Reply::Done(result) => result,
            Reply::Queued(rx) => rx.await.ok(),
        }
    }
}

impl Workers {
    /// Starts one thread for the writer and one per reader.
    pub(crate) fn start(connections: Connections) -> std::io::Result<Self> {
        let Connections {
            writer,
            readers,
            checkpointer,
            busy_timeout,
        } = connections;
        let checkpoints = checkpointer.map(Checkpoints::start).transpose()?;
        let writer = Arc::new(Mutex::new(Some(writer)));
        let write_backlog = Arc::new(AtomicUsize::new(0));
        let (write_tx, write_rx) = mpsc::channel::<Msg>();
        {
            let conn = Arc::clone(&writer);
            let backlog = Arc::clone(&write_backlog);
            let checkpoints = checkpoints.clone();
            thread::Builder::new()
                .name("kesoku-sqlite-writer".into())
                .spawn(move || write(&conn, &write_rx, &backlog, checkpoints.as_ref()))?;
        }
        let readers: Vec<Shared> = readers
            .into_iter()
            .map(|c| Arc::new(Mutex::new(Some(c))))
            .collect();
        let read_queue = if readers.is_empty() {
            None
        } else {
            let (read_tx, read_rx) = mpsc::channel::<Msg>();
            // One queue for all readers: whichever is free takes the next
            // job.
            let read_rx = Arc::new(Mutex::new(read_rx));
            for reader in &readers {
                let (rx, conn) = (Arc::clone(&read_rx), Arc::clone(reader));
                thread::Builder::new()
                    .name("kesoku-sqlite-reader".into())
                    .spawn(move || {
                        loop {
                            let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                            let Ok(msg) = next else { break };
                            if serve(&conn, msg) {
                                break;
                            }
                        }
                    })?;
            }
            Some(read_tx)
        };
        Ok(Workers {
            writer,
            write_queue: write_tx,
            write_backlog,
            readers,
            read_queue,
            closed: AtomicBool::new(false),
            busy_timeout,
            checkpoints,
        })
    }

    /// Whether [`Workers::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the connections once the calls queued before are done:
    /// the readers' and the checkpointer's, then the writer's, the last,
    /// so that `SQLite` copies the log into the file and removes it (when
    /// no other connection has the file open). Calls made after this fail
    /// with [`Failure::Closed`]; calls already queued run first. The first
    /// error closing a connection that this call closed, if any; another
    /// call, before or at once, waits for the connections and reports
    /// the errors of those it closed.
    pub(crate) async fn close(&self) -> Result<(), rusqlite::Error> {
        self.closed.store(true, Ordering::Release);
        let ask = |queue: &mpsc::Sender<Msg>| {
            let (tx, rx) = oneshot::channel();
            let _ = queue.send(Msg::Close(tx));
            rx
        };
        let mut replies: Vec<_> = self
            .read_queue
            .iter()
            .flat_map(|queue| self.readers.iter().map(|_| ask(queue)))
            .collect();
        replies.extend(self.checkpoints.as_ref().map(Checkpoints::close));
        let mut result = Ok(());
        // A reply dropped unsent: closed already, by another call.
        for reply in replies {
            if let Ok(Err(e)) = reply.await {
                result = result.and(Err(e));
            }
        }
        if let Ok(Err(e)) = ask(&self.write_queue).await {
            result = result.and(Err(e));
        }
        result
    }

    /// Runs `job` on a connection of `lane`: here, now, when `place` and
    /// the connection allow it and the database is not busy; else queued
    /// on the connection's thread now. A caller that drops the reply does
    /// not stop the job: a write that was started or queued happens.
    pub(crate) fn run<T, F>(&self, lane: Lane, place: Where, job: F) -> Reply<T>
    where
        T: Send + 'static,
        F: Fn(&mut Connection) -> Result<T, Failure> + Send + 'static,
    {
        if self.is_closed() {
            return Reply::Done(Some(Err(Failure::Closed)));
        }
        let write = matches!(lane, Lane::Write);
        if place == Where::Here
            && let Some(mut slot) = self.free(lane)
            && let Some(conn) = slot.as_mut()
        {
            // Never wait for another connection's lock here: a busy
            // database sends the call to the thread, which does.
            let _ = conn.busy_timeout(Duration::ZERO);
            let result = panic::catch_unwind(AssertUnwindSafe(|| job(conn)));
            if result.is_err() {
                roll_back(conn);
            }
            let _ = conn.busy_timeout(self.busy_timeout);
            // Taken before another call on this thread commits.
            let frames = if write {
                connection::take_log_frames()
            } else {
                0
            };
            drop(slot);
            match result {
                // Busy before it changed anything (a write takes the lock
                // first), so it can run again.
                Ok(Err(Failure::Sql(e))) if is_busy(&e) => {}
                Ok(result) => {
                    let log = self
                        .checkpoints
                        .as_ref()
                        .map_or(Log::Short, |c| c.after_commit(frames));
                    return self.after_write(log, result);
                }
                // As on a thread: the reply is lost, the connection kept.
                Err(_) => return Reply::Done(None),
            }
        }
        let (tx, rx) = oneshot::channel();
        self.queue(lane, Msg::Run(group::job(job, tx)));
        Reply::Queued(rx)
    }

    /// The reply of a call run here, after what its write left the log
    /// needing: nothing, a checkpoint beside the writer, or one first.
    fn after_write<T: Send + 'static>(&self, log: Log, result: Result<T, Failure>) -> Reply<T> {
        match (log, &self.checkpoints) {
            // The writer's thread waits for it, holding the writer, so
            // that no write comes between and the next starts the log
            // over; the writes queued behind wait too.
            (Log::Full, Some(c)) => {
                let (tx, rx) = oneshot::channel();
                // The write is done: its result is sent even if the job is
                // dropped unrun (the store closed meanwhile).
                let reply = Deliver(Some((tx, result)));
                let c = c.clone();
                self.queue(
                    Lane::Write,
                    Msg::Between(Box::new(move || {
                        wait_for_checkpoint(&c);
                        drop(reply);
                    })),
                );
                Reply::Queued(rx)
            }
            (Log::Due, Some(c)) => {
                c.nudge();
                Reply::Done(Some(result))
            }
            _ => Reply::Done(Some(result)),
        }
    }

    /// Queues `msg` on a thread of `lane`.
    fn queue(&self, lane: Lane, msg: Msg) {
        // Sending never blocks (the queue is unbounded, and bounded in
        // practice by the callers awaiting replies). If the thread is gone
        // (closed) the job is dropped with its reply sender, and the
        // caller's receiver says so.
        if let (Lane::Read, Some(readers)) = (lane, &self.read_queue) {
            let _ = readers.send(msg);
        } else {
            self.write_backlog.fetch_add(1, Ordering::AcqRel);
            let _ = self.write_queue.send(msg);
        }
    }

    /// A free connection of `lane` that may run a call here now (`None`
    /// in it: closed since).
    fn free(&self, lane: Lane) -> Option<MutexGuard<'_, Option<Connection>>> {
        match lane {
            // The writer first, when it is free and no write waits for
            // it: its page cache is current, while `SQLite` empties a
            // reader's whenever the file has changed, so a short read there
            // after a write reads its pages again (about 10 µs a call).
            Lane::Read if !self.readers.is_empty() => {
                let idle = self.write_backlog.load(Ordering::Acquire) == 0;
                idle.then(|| try_lock(&self.writer))
                    .flatten()
                    .or_else(|| self.readers.iter().find_map(|r| try_lock(r)))
            }
            // Writes keep their order; reads on the writer need none.
            Lane::Write if self.write_backlog.load(Ordering::Acquire) > 0 => None,
            Lane::Read | Lane::Write => try_lock(&self.writer),
        }
    }
}

/// A call's result and where it goes.
type Outcome<T> = (oneshot::Sender<Result<T, Failure>>, Result<T, Failure>);

/// The result of a call that was run, sent when dropped.
struct Deliver<T>(Option<Outcome<T>>);

impl<T> Drop for Deliver<T> {
    fn drop(&mut self) {
        if let Some((tx, result)) = self.0.take() {
            let _ = tx.send(result);
        }
    }
}

/// `conn` if no one holds it.
fn try_lock(conn: &Mutex<Option<Connection>>) -> Option<MutexGuard<'_, Option<Connection>>> {
    match conn.try_lock() {
        Ok(guard) => Some(guard),
        // A call that panicked leaves the connection sound (see
        // `group::run`).
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// The writer's thread: runs the calls queued for it, those waiting
/// together as a group (see `group`), until asked to close.
fn write(
    conn: &Mutex<Option<Connection>>,
    queue: &mpsc::Receiver<Msg>,
    backlog: &AtomicUsize,
    checkpoints: Option<&Checkpoints>,
) {
    let mut next = queue.recv().ok();
    while let Some(msg) = next.take() {
        let jobs = match msg {
            Msg::Run(job) => {
                let mut jobs = vec![job];
                // Those queued now join it; anything else comes after.
                while jobs.len() < MAX_GROUP {
                    match queue.try_recv() {
                        Ok(Msg::Run(job)) => jobs.push(job),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                jobs
            }
            Msg::Between(work) => {
                work();
                backlog.fetch_sub(1, Ordering::AcqRel);
                next = queue.recv().ok();
                continue;
            }
            Msg::Close(reply) => {
                close(conn, reply);
                return;
            }
        };
        let count = jobs.len();
        let settled = {
            let mut slot = conn.lock().unwrap_or_else(PoisonError::into_inner);
            // Not closed: this thread closes it, and ends.
            slot.as_mut().map(|conn| group::run(conn, jobs))
        };
        // On the writer's thread, which may wait for a checkpoint: so do
        // the writes queued behind these, and these calls' replies.
        match (log_after_write(checkpoints), checkpoints) {
            (Log::Full, Some(c)) => wait_for_checkpoint(c),
            (Log::Due, Some(c)) => c.nudge(),
            _ => {}
        }
        for (deliver, lost) in settled.into_iter().flatten() {
            deliver(lost.as_ref());
        }
        backlog.fetch_sub(count, Ordering::AcqRel);
        if next.is_none() {
            next = queue.recv().ok();
        }
    }
}

/// Waits, on the writer's thread, for a checkpoint of the checkpointer's.
fn wait_for_checkpoint(checkpoints: &Checkpoints) {
    let (done, checkpointed) = mpsc::channel::<()>();
    checkpoints.then(Box::new(move || {
        let _ = done.send(());
    }));
    let _ = checkpointed.recv();
}

/// Does what a reader's thread is asked; whether it closed the
/// connection (and the thread ends).
fn serve(conn: &Mutex<Option<Connection>>, msg: Msg) -> bool {
    match msg {
        Msg::Run(job) => {
            let mut slot = conn.lock().unwrap_or_else(PoisonError::into_inner);
            // Not closed: a thread closes its connection and ends.
            if let Some(conn) = slot.as_mut() {
                for (deliver, lost) in group::run(conn, vec![job]) {
                    deliver(lost.as_ref());
                }
            }
            false
        }
        Msg::Between(work) => {
            work();
            false
        }
        Msg::Close(reply) => {
            close(conn, reply);
            true
        }
    }
}

/// Closes the connection, saying how that went.
fn close(conn: &Mutex<Option<Connection>>, reply: oneshot::Sender<rusqlite::Result<()>>) {
    let mut slot = conn.lock().unwrap_or_else(PoisonError::into_inner);
    let closed = slot
        .take()
        .map_or(Ok(()), |c| c.close().map_err(|(_, e)| e));
    let _ = reply.send(closed);
}

/// Whether `e` is another connection holding the database.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests;
