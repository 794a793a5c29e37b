//! The threads' unit tests: where a call runs, the order of writes, the
//! checkpoint cycle, and writes committed as a group.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, ThreadId};

use rusqlite::{Connection, TransactionBehavior};

use super::{Connections, Lane, Reply, Where, Workers};
use crate::checkpoints::Log;
use crate::error::Failure;
use crate::options::SqliteOptions;
use crate::{codec, connection, sql};

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

/// Workers whose writer counts its commits, on a new file; the gate a
/// call holds the writer's thread with until `go` is sent.
struct Grouped {
    workers: Workers,
    commits: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl Grouped {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions::default();
        let writer = connection::writer(&dir.path().join("g.sqlite"), &options).unwrap();
        let commits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&commits);
        writer.commit_hook(Some(move || {
            counted.fetch_add(1, Ordering::AcqRel);
            false
        }));
        let connections = Connections {
            writer,
            readers: Vec::new(),
            checkpointer: None,
            busy_timeout: options.busy_timeout,
        };
        Grouped {
            workers: Workers::start(connections).unwrap(),
            commits,
            _dir: dir,
        }
    }

    /// Holds the writer's thread until the returned sender sends (or is
    /// dropped): the writes made meanwhile queue behind.
    fn hold(&self) -> (mpsc::Sender<()>, Reply<()>) {
        let (go, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let (started, running) = mpsc::channel::<()>();
        let held = self.workers.run(Lane::Write, Where::Away, move |_| {
            started.send(()).unwrap();
            let _ = gate.lock().unwrap().recv();
            Ok(())
        });
        running.recv().unwrap();
        (go, held)
    }

    fn insert(&self, id: &str) -> Reply<i64> {
        let mut m = kesoku_core::Message::new(
            "s",
            kesoku_core::Role::User,
            kesoku_core::MessageType::Text,
            id,
        );
        m.id = id.into();
        let row = codec::encode(&m);
        self.workers.run(Lane::Write, Where::Here, move |conn| {
            sql::insert(conn, &row, None)
        })
    }

    fn stored(&self) -> Vec<String> {
        let reply = self.workers.run(Lane::Read, Where::Away, |conn| {
            Ok(sql::history(conn, "s")?.into_iter().map(|m| m.id).collect())
        });
        wait(reply).unwrap().unwrap()
    }
}

/// Writes that queue while the writer is busy are committed in one
/// transaction, each with its own result: the one that fails (a
/// duplicate id) undoes only its own savepoint, and the others, before
/// and after it, are kept.
#[test]
fn writes_queued_together_commit_once_and_a_failure_undoes_only_its_own() {
    let grouped = Grouped::new();
    let (go, held) = grouped.hold();
    let before = grouped.commits.load(Ordering::Acquire);
    let replies: Vec<_> = ["a", "b", "a", "c"]
        .iter()
        .map(|id| grouped.insert(id))
        .collect();
    assert!(replies.iter().all(|r| matches!(r, Reply::Queued(_))));
    go.send(()).unwrap();
    wait(held).unwrap().unwrap();
    let results: Vec<_> = replies.into_iter().map(|r| wait(r).unwrap()).collect();
    assert!(matches!(results[0], Ok(1)), "{results:?}");
    assert!(matches!(results[1], Ok(2)), "{results:?}");
    assert!(
        matches!(&results[2], Err(Failure::Duplicate(id)) if id == "a"),
        "{results:?}"
    );
    assert!(matches!(results[3], Ok(3)), "{results:?}");
    assert_eq!(grouped.commits.load(Ordering::Acquire) - before, 1);
    assert_eq!(grouped.stored(), ["a", "b", "c"]);
}

/// A call that panics in a group loses its reply; what it wrote in its
/// savepoint is undone, and the calls beside it are committed.
#[test]
fn a_call_that_panics_in_a_group_takes_only_its_own_writes() {
    let grouped = Grouped::new();
    let (go, held) = grouped.hold();
    let first = grouped.insert("a");
    let panics = grouped
        .workers
        .run(Lane::Write, Where::Here, |conn| -> Result<(), Failure> {
            conn.execute_batch(
                "SAVEPOINT call; INSERT INTO sessions (id, created, updated) VALUES ('x', '', '')",
            )?;
            panic!("a bug in a call");
        });
    let last = grouped.insert("b");
    go.send(()).unwrap();
    wait(held).unwrap().unwrap();
    assert!(wait(panics).is_none());
    assert!(matches!(wait(first), Some(Ok(1))));
    assert!(matches!(wait(last), Some(Ok(2))));
    assert_eq!(grouped.stored(), ["a", "b"]);
    let sessions = grouped.workers.run(Lane::Read, Where::Away, |conn| {
        Ok(
            conn.query_row("SELECT count(*) FROM sessions WHERE id = 'x'", [], |r| {
                r.get::<_, i64>(0)
            })?,
        )
    });
    assert_eq!(wait(sessions).unwrap().unwrap(), 0);
}
