//! The agent's per-session state in this process: the newest user message
//! seen (which is what interrupts a running turn), and the session's
//! [`View`] kept between turns. (One turn at a time is the store's turn
//! lease, in this process as across processes.)
//!
//! A kept view is a cache, never the truth: a turn brings it up to date
//! from the store (only the messages stored since), so turns other agents
//! ran on the session, in this process or another, are in it. The views
//! of the sessions used least recently are dropped when they hold more
//! than a budget of messages.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kesoku_core::store::Seq;
use tokio::sync::watch;

use super::view::View;
use crate::lru::{Lru, Weigh};

/// How many messages the kept views of one agent may hold in all.
const VIEW_BUDGET: usize = 200_000;

/// One session's state.
#[derive(Debug)]
pub(crate) struct Slot {
    /// What ends the session's turns.
    marks: watch::Sender<Marks>,
    /// The `Seq` of the user message whose turn runs; 0 when none does.
    running: AtomicI64,
}

/// The turns of a session that are over: a turn for the message at `seq`
/// is interrupted once a newer user message is seen, or once it was
/// stopped.
#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    /// The newest user message seen for the session.
    newest: Seq,
    /// Turns of messages up to this one were stopped
    /// ([`Agent::interrupt`](super::Agent::interrupt)).
    stopped: Seq,
}

impl Marks {
    fn ends(self, seq: Seq) -> bool {
        self.newest > seq || (seq > 0 && self.stopped >= seq)
    }
}

impl Slot {
    /// Whether the turn of the message at `seq` is interrupted.
    pub(crate) fn is_newer_than(&self, seq: Seq) -> bool {
        self.marks.borrow().ends(seq)
    }

    /// Resolves once the turn of the message at `seq` is interrupted.
    pub(crate) async fn newer_than(&self, seq: Seq) {
        let mut rx = self.marks.subscribe();
        if rx.wait_for(|marks| marks.ends(seq)).await.is_err() {
            // The sender lives as long as the slot, which the caller holds.
            std::future::pending::<()>().await;
        }
    }

    /// Notes that the turn of the message at `seq` runs (0: none does).
    pub(crate) fn set_running(&self, seq: Seq) {
        self.running.store(seq, Ordering::Release);
    }

    /// Stops the running turn, if any; whether there was one.
    pub(crate) fn stop(&self) -> bool {
        let running = self.running.load(Ordering::Acquire);
        running > 0
            && self.marks.send_if_modified(|marks| {
                let later = running > marks.stopped;
                if later {
                    marks.stopped = running;
                }
                later
            })
    }
}

/// Every session's [`Slot`].
#[derive(Debug)]
pub(crate) struct Sessions {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    views: Lru<View>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            slots: Mutex::default(),
            views: Lru::new(VIEW_BUDGET),
        }
    }
}

impl Weigh for View {
    /// How many messages it holds.
    fn weight(&self) -> usize {
        self.messages.len()
    }
}

impl Sessions {
    /// The slot of `session`, made on first use.
    pub(crate) fn slot(&self, session: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(session) {
            return Arc::clone(slot);
        }
        let slot = Arc::new(Slot {
            marks: watch::Sender::new(Marks::default()),
            running: AtomicI64::new(0),
        });
        slots.insert(session.to_owned(), Arc::clone(&slot));
        slot
    }

    /// Notes a user message of `session` at `seq`; a running turn of an
    /// older one sees itself interrupted at once.
    pub(crate) fn saw_user_message(&self, session: &str, seq: Seq) {
        self.slot(session).marks.send_if_modified(|marks| {
            let newer = seq > marks.newest;
            if newer {
                marks.newest = seq;
            }
            newer
        });
    }

    /// Stops the turn running for `session` in this agent, if any.
    pub(crate) fn stop(&self, session: &str) -> bool {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(session).is_some_and(|slot| slot.stop())
    }

    /// Takes out the kept view of `session`, if any; the turn puts it
    /// back when it ends.
    pub(crate) fn take_view(&self, session: &str) -> Option<View> {
        self.views.take(session)
    }

    /// Keeps `view` as `session`'s, dropping the least recently used
    /// views while they hold more than the budget.
    pub(crate) fn put_view(&self, session: &str, view: View) {
        self.views.put(session, view);
    }
}
