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

/// A call, run on a connection's thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// What a connection's thread is asked.
enum Msg {
    Run(Job),
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
            thread::Builder::new()
                .name("kesoku-sqlite-writer".into())
                .spawn(move || {
                    while let Ok(msg) = write_rx.recv() {
                        let closed = serve(&conn, msg);
                        if closed {
                            break;
                        }
                        backlog.fetch_sub(1, Ordering::AcqRel);
                    }
                })?;
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
        let checkpoints = self.checkpoints.clone();
        self.queue(
            lane,
            Box::new(move |conn: &mut Connection| {
                let result = job(conn);
                if write {
                    match (log_after_write(checkpoints.as_ref()), &checkpoints) {
                        // On the writer's thread, which may wait: so do
                        // the writes queued behind this one.
                        (Log::Full, Some(c)) => {
                            let (done, checkpointed) = mpsc::channel::<()>();
                            c.then(Box::new(move || {
                                let _ = done.send(());
                            }));
                            let _ = checkpointed.recv();
                        }
                        (Log::Due, Some(c)) => c.nudge(),
                        _ => {}
                    }
                }
                let _ = tx.send(result);
            }),
        );
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
                    Box::new(move |_: &mut Connection| {
                        let (done, checkpointed) = mpsc::channel::<()>();
                        c.then(Box::new(move || {
                            let _ = done.send(());
                        }));
                        let _ = checkpointed.recv();
                        drop(reply);
                    }),
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

    /// Queues `job` on a thread of `lane`.
    fn queue(&self, lane: Lane, job: Job) {
        // Sending never blocks (the queue is unbounded, and bounded in
        // practice by the callers awaiting replies). If the thread is gone
        // (closed) the job is dropped with its reply sender, and the
        // caller's receiver says so.
        if let (Lane::Read, Some(readers)) = (lane, &self.read_queue) {
            let _ = readers.send(Msg::Run(job));
        } else {
            self.write_backlog.fetch_add(1, Ordering::AcqRel);
            let _ = self.write_queue.send(Msg::Run(job));
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
        // `run_guarded`).
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Does what a connection's thread is asked; whether it closed the
/// connection (and the thread ends).
fn serve(conn: &Mutex<Option<Connection>>, msg: Msg) -> bool {
    let mut slot = conn.lock().unwrap_or_else(PoisonError::into_inner);
    match msg {
        Msg::Run(job) => {
            // Not closed: a thread closes its connection and ends.
            if let Some(conn) = slot.as_mut() {
                run_guarded(conn, job);
            }
            false
        }
        Msg::Close(reply) => {
            let closed = slot
                .take()
                .map_or(Ok(()), |c| c.close().map_err(|(_, e)| e));
            let _ = reply.send(closed);
            true
        }
    }
}

/// Runs `job` on `conn`, on a connection's thread.
fn run_guarded(conn: &mut Connection, job: Job) {
    // A job that panics loses its reply (its caller gets an error) but
    // not the connection.
    if panic::catch_unwind(AssertUnwindSafe(|| job(conn))).is_err() {
        roll_back(conn);
    }
}

/// Rolls back what a call that panicked left open: a transaction guard
/// does as it unwinds, a `BEGIN` of its own does not.
fn roll_back(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// Whether `e` is another connection holding the database.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread::{self, ThreadId};

    use rusqlite::{Connection, TransactionBehavior};

    use super::{Connections, Lane, Reply, Where, Workers};
    use crate::checkpoints::Log;
    use crate::connection;
    use crate::error::Failure;
    use crate::options::SqliteOptions;

    /// A store's workers on a new file (no readers), and the file.
    fn workers(dir: &tempfile::TempDir) -> (Workers, std::path::PathBuf) {
        let path = dir.path().join("w.sqlite");
        let options = SqliteOptions::default();
        let writer = connection::writer(&path, &options).unwrap();
        let connections = Connections {
            writer,
            readers: Vec::new(),
            checkpointer: Some(connection::checkpointer(&path, &options).unwrap()),
            busy_timeout: options.busy_timeout,
        };
        (Workers::start(connections).unwrap(), path)
    }

    fn wait<T>(reply: Reply<T>) -> Option<Result<T, Failure>> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(reply.wait())
    }

    fn thread_of(workers: &Workers, place: Where) -> (bool, ThreadId) {
        let reply = workers.run(Lane::Write, place, |_| Ok(thread::current().id()));
        let here = matches!(reply, Reply::Done(_));
        (here, wait(reply).unwrap().unwrap())
    }

    #[test]
    fn a_short_call_runs_on_the_callers_thread_and_a_long_one_on_the_writers() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, _) = workers(&dir);
        let me = thread::current().id();
        assert_eq!(thread_of(&workers, Where::Here), (true, me));
        let (here, away) = thread_of(&workers, Where::Away);
        assert!(!here);
        assert_ne!(away, me);
    }

    #[test]
    fn a_write_behind_a_queued_one_waits_its_turn() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, _) = workers(&dir);
        let (go, gate) = mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let first = {
            let order = std::sync::Arc::clone(&order);
            workers.run(Lane::Write, Where::Away, move |_| {
                gate.lock().unwrap().recv().unwrap();
                order.lock().unwrap().push(1);
                Ok(())
            })
        };
        let second = {
            let order = std::sync::Arc::clone(&order);
            workers.run(Lane::Write, Where::Here, move |_| {
                order.lock().unwrap().push(2);
                Ok(())
            })
        };
        // Not run here, ahead of the first.
        assert!(matches!(second, Reply::Queued(_)));
        go.send(()).unwrap();
        wait(first).unwrap().unwrap();
        wait(second).unwrap().unwrap();
        assert_eq!(*order.lock().unwrap(), [1, 2]);
    }

    #[test]
    fn a_write_that_finds_the_database_busy_waits_on_the_writers_thread() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, path) = workers(&dir);
        // Another connection (another process) holds the write lock.
        let mut other = Connection::open(&path).unwrap();
        let tx = other
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let reply = workers.run(Lane::Write, Where::Here, |conn| {
            conn.execute_batch("BEGIN IMMEDIATE; CREATE TABLE t (n INTEGER); COMMIT")?;
            Ok(thread::current().id())
        });
        // Busy here, so queued; it waits out the lock on the thread.
        assert!(matches!(reply, Reply::Queued(_)));
        tx.commit().unwrap();
        let ran_on = wait(reply).unwrap().unwrap();
        assert_ne!(ran_on, thread::current().id());
        // It ran once, after the other connection's commit.
        let n: i64 = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }

    /// Writes that fill the log past a checkpoint's due return at once on
    /// the caller's thread while the checkpointer's thread copies the log
    /// into the file; the first write after that checkpoint waits for a
    /// second one, of what was written meanwhile, and the log starts
    /// over. Each time the log grows long, two checkpoints run, not one
    /// after every commit while the writer keeps writing.
    #[test]
    fn a_long_log_is_copied_beside_the_writer_then_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, _) = workers(&dir);
        let setup = workers.run(Lane::Write, Where::Here, |conn| {
            Ok(conn.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")?)
        });
        wait(setup).unwrap().unwrap();
        // A frame or two each: the log is due (4,000 frames) a few times.
        let mut waited = Vec::new();
        for i in 0..12_000 {
            let reply = workers.run(Lane::Write, Where::Here, move |conn| {
                Ok(conn.execute("INSERT INTO t (n) VALUES (?1)", [i])?)
            });
            if matches!(reply, Reply::Queued(_)) {
                waited.push(i);
            }
            wait(reply).unwrap().unwrap();
        }
        let runs = workers
            .checkpoints
            .as_ref()
            .unwrap()
            .runs
            .load(std::sync::atomic::Ordering::Acquire);
        // No write waits before the first due, which is 2,000 writes in
        // at the soonest; then one write waits a time the log grew long.
        assert!(waited.first().is_some_and(|&i| i > 2_000), "{waited:?}");
        assert!(
            runs <= 2 * waited.len() + 1,
            "{runs} checkpoints; writes {waited:?} waited"
        );
    }

    /// A short read runs here on the writer when it is free, and on a
    /// reader, here still, while the writer is taken.
    #[test]
    fn a_short_read_takes_the_free_writer_else_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, path) = workers(&dir);
        let setup = workers.run(Lane::Write, Where::Here, |conn| {
            Ok(conn.execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (7)")?)
        });
        wait(setup).unwrap().unwrap();
        drop(workers);
        let options = SqliteOptions::default();
        let connections = Connections {
            writer: connection::writer(&path, &options).unwrap(),
            readers: vec![connection::reader(&path, &options).unwrap()],
            checkpointer: None,
            busy_timeout: options.busy_timeout,
        };
        let workers = Workers::start(connections).unwrap();
        // A read-only connection refuses to write: which one ran a read
        // shows in whether it could have.
        let read = |workers: &Workers| {
            workers.run(Lane::Read, Where::Here, |conn| {
                let n: i64 = conn.query_row("SELECT n FROM t", [], |r| r.get(0))?;
                Ok((n, conn.is_readonly(rusqlite::MAIN_DB)?))
            })
        };
        let reply = read(&workers);
        assert!(matches!(reply, Reply::Done(_)));
        assert_eq!(
            wait(reply).unwrap().unwrap(),
            (7, false),
            "not on the writer"
        );
        // The writer busy with a write on its thread: the read goes on.
        let (go, gate) = mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        let (started, running) = mpsc::channel::<()>();
        let write = workers.run(Lane::Write, Where::Away, move |_| {
            started.send(()).unwrap();
            gate.lock().unwrap().recv().unwrap();
            Ok(())
        });
        running.recv().unwrap();
        let reply = read(&workers);
        assert!(
            matches!(reply, Reply::Done(_)),
            "the read waited for the writer"
        );
        assert_eq!(wait(reply).unwrap().unwrap(), (7, true), "not on a reader");
        go.send(()).unwrap();
        wait(write).unwrap().unwrap();
    }

    /// A write made here that leaves the log full queues its wait for a
    /// checkpoint on the writer's thread; should the store close first,
    /// the write still replies with its result (it was made).
    #[test]
    fn a_write_whose_wait_is_dropped_by_a_close_still_replies() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, _) = workers(&dir);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(workers.close())
            .unwrap();
        let reply = workers.after_write(Log::Full, Ok(7));
        assert!(matches!(reply, Reply::Queued(_)));
        assert!(matches!(wait(reply), Some(Ok(7))));
        // A call made after the close is refused.
        let refused = workers.run(Lane::Write, Where::Here, |_| Ok(()));
        assert!(matches!(wait(refused), Some(Err(Failure::Closed))));
    }

    #[test]
    fn a_call_that_panics_here_loses_its_reply_not_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (workers, _) = workers(&dir);
        let reply = workers.run(Lane::Write, Where::Here, |conn| -> Result<(), Failure> {
            conn.execute_batch("BEGIN IMMEDIATE; CREATE TABLE t (n INTEGER)")?;
            panic!("a bug in a call");
        });
        assert!(wait(reply).is_none());
        // The transaction it left open rolled back; the next call runs.
        let reply = workers.run(Lane::Write, Where::Here, |conn| {
            Ok(conn.execute_batch("CREATE TABLE t (n INTEGER)")?)
        });
        wait(reply).unwrap().unwrap();
    }
}
