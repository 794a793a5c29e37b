//! Checkpoints: copying the log into the database file, beside the
//! writer, and when a write waits for one.
//!
//! A write does not wait for a whole checkpoint (copying the log into
//! the file, with two fsyncs: milliseconds), as a commit that fills the
//! log would: once the log holds [`CHECKPOINT_FRAMES`], a thread of its
//! own runs one on a connection of its own, beside the writer
//! (`PASSIVE`: it copies what is committed and waits for no one). The log
//! starts over only from a write that finds it wholly copied, which a
//! busy writer never does: it commits while the checkpoint runs. So the
//! first write after that checkpoint waits, on the writer's thread, for
//! a second one that copies only what was committed meanwhile, and the
//! write after it starts the log over. (Queuing a checkpoint after every
//! commit instead kept one running, two fsyncs each, for as long as the
//! log stayed long.) Past [`LOG_CAP`] frames (a reader kept the log from
//! starting over), a write waits for a checkpoint, as with `SQLite`'s
//! own. A commit is as durable as before: `synchronous=NORMAL`, the same
//! connection.

#[cfg(test)]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::connection;

/// How long the log grows before a checkpoint, in frames (pages
/// written): four times what `SQLite` itself waits for. The write that
/// starts the log over after a checkpoint syncs its header (an fsync on
/// the writer, queued behind the checkpoint's own), and a checkpoint
/// copies each page once however many frames hold it, so a longer log
/// pays both for more commits: about 5% of a turn, 12% of the CPU.
const CHECKPOINT_FRAMES: i32 = 4_000;
/// How long the log may grow while checkpoints run beside the writer:
/// past it, a write waits for one (about 32 MiB with 4 KiB pages).
const LOG_CAP: i32 = 2 * CHECKPOINT_FRAMES;

/// What the log needs after a write on this thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Log {
    Short,
    /// A checkpoint, beside the writer.
    Due,
    /// A checkpoint, before the writer and the write's caller go on.
    Full,
}

/// What the log needs after a write on this thread, from how many frames
/// it held after the write's commit (none: no commit).
pub(crate) fn log_after_write(checkpoints: Option<&Checkpoints>) -> Log {
    let frames = connection::take_log_frames();
    checkpoints.map_or(Log::Short, |c| c.after_commit(frames))
}

/// Where a long log is in its checkpoints ([`Checkpoints::cycle`]).
mod cycle {
    /// Shorter than [`CHECKPOINT_FRAMES`](super::CHECKPOINT_FRAMES).
    pub(super) const SHORT: u8 = 0;
    /// Its checkpoint beside the writer is queued or running.
    pub(super) const COPYING: u8 = 1;
    /// That checkpoint copied nearly all of it: the next write waits for
    /// the rest.
    pub(super) const COPIED: u8 = 2;
    /// The rest was copied, and the log starts over at the next write,
    /// unless a reader is still in it: then every commit queues a
    /// checkpoint beside the writer, and no write waits again before
    /// [`LOG_CAP`](super::LOG_CAP) or the log starts over.
    pub(super) const CAUGHT_UP: u8 = 3;
}

/// Copies the log into the file. PASSIVE waits for no one; one that
/// fails (the disk, another process's readers) leaves the log longer
/// until the next. Whether it copied nearly all of the log: not busy
/// (another connection's checkpoint), and not held back much by a
/// reader still in the log.
fn checkpoint(conn: &Connection) -> bool {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })
    .is_ok_and(|(busy, log, copied)| busy == 0 && log - copied < i64::from(CHECKPOINT_FRAMES / 4))
}

/// What the checkpointer's thread is asked.
enum Task {
    /// A checkpoint, then this.
    Then(Box<dyn FnOnce() + Send>),
    /// Close the connection, saying how that went, and end the thread.
    Close(oneshot::Sender<rusqlite::Result<()>>),
}

/// The checkpointer's thread: each job runs after a checkpoint.
#[derive(Clone)]
pub(crate) struct Checkpoints {
    queue: mpsc::Sender<Task>,
    /// A checkpoint is queued and not yet begun: one is enough.
    queued: Arc<AtomicBool>,
    /// Where a long log is in its checkpoints (a [`cycle`] state).
    cycle: Arc<AtomicU8>,
    /// How many checkpoints have run (for tests).
    #[cfg(test)]
    pub(crate) runs: Arc<AtomicUsize>,
}

impl Checkpoints {
    pub(crate) fn start(conn: Connection) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Task>();
        let queued = Arc::new(AtomicBool::new(false));
        let cycle = Arc::new(AtomicU8::new(cycle::SHORT));
        #[cfg(test)]
        let runs = Arc::new(AtomicUsize::new(0));
        #[cfg(test)]
        let count = Arc::clone(&runs);
        let (flag, state) = (Arc::clone(&queued), Arc::clone(&cycle));
        thread::Builder::new()
            .name("kesoku-sqlite-checkpointer".into())
            .spawn(move || {
                while let Ok(task) = rx.recv() {
                    let then = match task {
                        Task::Then(then) => then,
                        Task::Close(reply) => {
                            let _ = reply.send(conn.close().map_err(|(_, e)| e));
                            return;
                        }
                    };
                    // Cleared first: a write that fills the log while this
                    // one runs queues the next.
                    flag.store(false, Ordering::Release);
                    let copied = checkpoint(&conn);
                    #[cfg(test)]
                    count.fetch_add(1, Ordering::Release);
                    // One that copied little (busy, or a reader held it
                    // back) is not waited on after: the next commit
                    // queues another beside the writer.
                    let next = if copied { cycle::COPIED } else { cycle::SHORT };
                    let _ = state.compare_exchange(
                        cycle::COPYING,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    then();
                }
            })?;
        Ok(Checkpoints {
            queue: tx,
            queued,
            cycle,
            #[cfg(test)]
            runs,
        })
    }

    /// What the log needs after a commit that left `frames` in it (0: no
    /// commit), and where its cycle of checkpoints goes.
    pub(crate) fn after_commit(&self, frames: i32) -> Log {
        match frames {
            0 => Log::Short,
            n if n >= LOG_CAP => Log::Full,
            n if n >= CHECKPOINT_FRAMES => {
                let at = |from: u8, to: u8| {
                    self.cycle
                        .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                };
                if at(cycle::SHORT, cycle::COPYING) {
                    Log::Due
                } else if at(cycle::COPIED, cycle::CAUGHT_UP) {
                    Log::Full
                } else if self.cycle.load(Ordering::Acquire) == cycle::CAUGHT_UP {
                    // It did not start over: as before this cycle, copy
                    // beside the writer, so that a write after a pause
                    // finds it copied.
                    Log::Due
                } else {
                    Log::Short
                }
            }
            // Started over (or never long).
            _ => {
                self.cycle.store(cycle::SHORT, Ordering::Release);
                Log::Short
            }
        }
    }

    /// Queues a checkpoint unless one is queued already.
    pub(crate) fn nudge(&self) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            let _ = self.queue.send(Task::Then(Box::new(|| {})));
        }
    }

    /// Runs `then` after a checkpoint (on the checkpointer's thread); once
    /// the checkpointer is closed, drops it.
    pub(crate) fn then(&self, then: Box<dyn FnOnce() + Send>) {
        let _ = self.queue.send(Task::Then(then));
    }

    /// Closes the checkpointer's connection after what is queued, and ends
    /// its thread. The reply is dropped unsent if it was closed already.
    pub(crate) fn close(&self) -> oneshot::Receiver<rusqlite::Result<()>> {
        let (tx, rx) = oneshot::channel();
        let _ = self.queue.send(Task::Close(tx));
        rx
    }
}
