//! The threads that own a store's connections, and how a call reaches one.
//!
//! Each connection lives on a thread of its own and takes jobs from a
//! channel; a job answers through a oneshot channel the caller awaits. So
//! no `SQLite` call ever runs on an async worker, and none waits in tokio's
//! blocking pool behind unrelated file I/O. One thread owns the only
//! writing connection: `SQLite` admits one writer at a time anyway, so a
//! pool of writers would only contend for its lock, while one writer runs
//! the calls of this process in order with its statement cache warm.
//! Reads go to a few reader threads sharing one queue, which WAL lets run
//! beside the writer and each other. A second process (or a second
//! `SqliteStore` on the same file) has its own writer; `SQLite`'s locks and
//! the busy timeout order the two.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

/// A call, run on a connection's thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Which connection a call needs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lane {
    /// The writer: every call that changes the database.
    Write,
    /// Any reader (the writer when there are none).
    Read,
}

/// The queues of a store's connection threads. The threads end, closing
/// their connections, when the last handle is dropped.
pub(crate) struct Workers {
    writer: mpsc::Sender<Job>,
    readers: Option<mpsc::Sender<Job>>,
}

impl Workers {
    /// Starts one thread for `writer` and one per reader.
    pub(crate) fn start(writer: Connection, readers: Vec<Connection>) -> std::io::Result<Self> {
        let (write_tx, write_rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("kesoku-sqlite-writer".into())
            .spawn(move || serve(writer, || write_rx.recv().ok()))?;
        let readers = if readers.is_empty() {
            None
        } else {
            let (read_tx, read_rx) = mpsc::channel::<Job>();
            // One queue for all readers: whichever is free takes the next
            // job.
            let read_rx = Arc::new(Mutex::new(read_rx));
            for conn in readers {
                let rx = Arc::clone(&read_rx);
                thread::Builder::new()
                    .name("kesoku-sqlite-reader".into())
                    .spawn(move || {
                        serve(conn, || {
                            rx.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .recv()
                                .ok()
                        });
                    })?;
            }
            Some(read_tx)
        };
        Ok(Workers {
            writer: write_tx,
            readers,
        })
    }

    /// Queues `job` on a connection of `lane` now; its result arrives on
    /// the receiver, which reports an error if the thread has stopped. A
    /// caller that drops the receiver does not stop the job: a write that
    /// was queued happens.
    pub(crate) fn run<T, F>(&self, lane: Lane, job: F) -> oneshot::Receiver<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let queue = match (lane, &self.readers) {
            (Lane::Read, Some(readers)) => readers,
            _ => &self.writer,
        };
        // Sending never blocks (the queue is unbounded, and bounded in
        // practice by the callers awaiting replies). If the thread is gone
        // the job is dropped with its reply sender, and `rx` says so.
        let _ = queue.send(Box::new(move |conn: &mut Connection| {
            let _ = tx.send(job(conn));
        }));
        rx
    }
}

/// Runs jobs on `conn` until `next` has no more.
fn serve(mut conn: Connection, next: impl Fn() -> Option<Job>) {
    while let Some(job) = next() {
        // A job that panics loses its reply (its caller gets an error) but
        // not the connection: a transaction it left open rolls back as it
        // unwinds.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
    }
}
