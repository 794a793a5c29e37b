//! Group commit: the calls waiting for the writer's thread, run in one
//! transaction, each in a savepoint of its own.
//!
//! A commit costs `SQLite` a few write calls to its log whatever it
//! holds, so when sessions' writes queue behind one another, committing
//! them together gives each its write for a fraction of a commit. A call
//! that fails undoes only its own savepoint (`sql::Immediate` is a
//! savepoint inside a group), and its error is its own; the others are
//! committed. A result is delivered only once the group's commit is
//! done: should that commit fail, or `SQLite` roll the whole transaction
//! back after an error (a full disk, an I/O error), each call whose
//! writes it held fails with that error, and nothing any of them wrote
//! is kept.

use std::panic::{self, AssertUnwindSafe};

use rusqlite::{Connection, ffi};
use tokio::sync::oneshot;

use crate::error::Failure;

/// A call, run on a connection's thread: what it returns delivers its
/// result once the transaction it ran in is over.
pub(crate) type Job = Box<dyn FnOnce(&mut Connection) -> Deliver + Send>;

/// Delivers a call's result, given why the writes of the transaction it
/// ran in were lost, if they were (a success then becomes that error).
pub(crate) type Deliver = Box<dyn FnOnce(Option<&Lost>) + Send>;

/// Why a group's writes were not committed.
#[derive(Debug, Clone)]
pub(crate) struct Lost {
    code: ffi::Error,
    message: String,
}

impl Lost {
    fn new(error: &rusqlite::Error, context: &str) -> Self {
        Lost {
            code: error
                .sqlite_error()
                .copied()
                .unwrap_or_else(|| ffi::Error::new(ffi::SQLITE_ERROR)),
            message: format!("{context}: {error}"),
        }
    }

    /// `SQLite` ended the group's transaction itself, after an error of
    /// one of its calls.
    fn rolled_back() -> Self {
        Lost {
            code: ffi::Error::new(ffi::SQLITE_ABORT),
            message: "SQLite rolled back the transaction this write shared with other \
                      writes, after one of them failed; nothing of it was kept"
                .into(),
        }
    }

    /// The error a call whose writes were lost reports.
    pub(crate) fn error(&self) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(self.code, Some(self.message.clone()))
    }
}

/// The job of a call: runs `call`, and sends its result to `reply` once
/// the transaction it ran in is over.
pub(crate) fn job<T, F>(call: F, reply: oneshot::Sender<Result<T, Failure>>) -> Job
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<T, Failure> + Send + 'static,
{
    Box::new(move |conn: &mut Connection| {
        let result = call(conn);
        Box::new(move |lost: Option<&Lost>| {
            let result = match (result, lost) {
                (Ok(_), Some(lost)) => Err(Failure::Sql(lost.error())),
                (result, _) => result,
            };
            let _ = reply.send(result);
        }) as Deliver
    })
}

/// The largest group: its calls wait for one another's work before any
/// reply goes out, so a long queue is committed in several.
pub(crate) const MAX_GROUP: usize = 64;

/// Runs `jobs` in order on `conn`: one alone in its own transaction;
/// several in one transaction, committed after the last. Each call's
/// delivery, with why its writes were lost if they were; a call that
/// panicked has none (its caller hears that it was lost).
pub(crate) fn run(conn: &mut Connection, jobs: Vec<Job>) -> Vec<(Deliver, Option<Lost>)> {
    // When the lock cannot be had (another process holds it past the
    // busy timeout), each call runs alone and meets that itself.
    let mut grouped = jobs.len() > 1 && begin(conn).is_ok();
    let mut settled = Vec::with_capacity(jobs.len());
    // Where this group's calls begin in `settled`: those after it await
    // its commit.
    let mut first = 0;
    for job in jobs {
        // In a group, each call runs in a savepoint of the group's own
        // too, so that one that panics, whatever it left open, is undone.
        let scoped = grouped && execute(conn, "SAVEPOINT grouped").is_ok();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| job(conn)));
        let undo = match outcome {
            Ok(deliver) => {
                settled.push((deliver, None));
                false
            }
            Err(_) => true,
        };
        if !conn.is_autocommit() {
            if scoped {
                let end = if undo {
                    "ROLLBACK TO grouped; RELEASE grouped"
                } else {
                    "RELEASE grouped"
                };
                let _ = conn.execute_batch(end);
            } else if undo {
                // A transaction of its own, left open.
                roll_back(conn);
            }
        }
        if grouped && conn.is_autocommit() {
            let lost = Lost::rolled_back();
            for (_, l) in &mut settled[first..] {
                *l = Some(lost.clone());
            }
            // The rest run alone.
            grouped = false;
            first = settled.len();
        }
    }
    if grouped && let Err(e) = commit(conn) {
        roll_back(conn);
        let lost = Lost::new(&e, "the commit of writes grouped with this one failed");
        for (_, l) in &mut settled[first..] {
            *l = Some(lost.clone());
        }
    }
    settled
}

fn begin(conn: &Connection) -> rusqlite::Result<usize> {
    execute(conn, "BEGIN IMMEDIATE")
}

fn commit(conn: &Connection) -> rusqlite::Result<usize> {
    execute(conn, "COMMIT")
}

/// Runs `sql`, a statement kept prepared: parsing one anew costs a few
/// microseconds.
fn execute(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}

/// Rolls back what is left open: by a call that panicked (a transaction
/// guard does as it unwinds, a `BEGIN` of its own does not), or by a
/// commit that failed.
pub(crate) fn roll_back(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}
