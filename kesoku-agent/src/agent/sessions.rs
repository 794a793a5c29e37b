//! The agent's per-session state in this process: the newest user message
//! seen (which is what interrupts a running turn), and the session's
//! [`View`] kept between turns, and one a turn's claim brought up to
//! date ([`ViewAtClaim`]). (One turn at a time is the store's turn
//! lease, in this process as across processes.)
//!
//! A kept view is a cache, never the truth: a turn brings it up to date
//! from the store (only the messages stored since), so turns other agents
//! ran on the session, in this process or another, are in it. The views
//! of the sessions used least recently are dropped when they hold more
//! than a budget of messages.
//!
//! A slot lives only while a turn of its session holds it: the map keeps
//! it weakly, and dead entries are swept as the map grows, so a `serve()`
//! that sees sessions without end keeps memory flat. A user message seen
//! while no turn of its session is here needs no mark: a turn that starts
//! later reads the session's stored history after taking its slot, and
//! finds the newer message there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use kesoku_core::Message;
use kesoku_core::store::Seq;
use tokio::sync::watch;

use super::view::View;

use kesoku_core::{SessionCache, Weigh};

/// A session's view kept here, brought up to date by the claim that
/// started the turn (in the same call to the store): what the turn
/// would otherwise read first.
pub(crate) struct ViewAtClaim {
    pub(crate) view: View,
    /// The session's messages stored after the view's `seq`, the prompt
    /// among them.
    pub(crate) newer: Vec<(Seq, Message)>,
}

/// How many messages the kept views of one agent may hold in all, unless
/// [`AgentBuilder::view_budget`](super::AgentBuilder::view_budget) says
/// otherwise: about 50 MB of messages, and a few long sessions' worth.
pub(crate) const VIEW_BUDGET: usize = 50_000;

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

/// The fewest entries the slot map sweeps its dead ones at.
const SWEEP_AT: usize = 1_024;

/// The [`Slot`] of every session a turn holds here.
#[derive(Debug)]
pub(crate) struct Sessions {
    slots: Mutex<Slots>,
    views: SessionCache<View>,
}

/// Slots by session, weakly: a slot is dropped with the last turn holding
/// it, its entry when the map is next swept.
#[derive(Debug)]
struct Slots {
    by_session: HashMap<String, Weak<Slot>>,
    /// The map's size at which dead entries are next swept: twice the
    /// live ones after a sweep, so sweeping costs O(1) per insert.
    sweep_at: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(VIEW_BUDGET)
    }
}

impl Sessions {
    /// No sessions yet; kept views may hold `view_budget` messages in all.
    pub(crate) fn new(view_budget: usize) -> Self {
        Sessions {
            slots: Mutex::new(Slots {
                by_session: HashMap::new(),
                sweep_at: SWEEP_AT,
            }),
            views: SessionCache::new(view_budget),
        }
    }
}

impl Weigh for View {
    /// How many messages it holds, and one for the entry itself, so that
    /// empty views count against the budget too.
    fn weight(&self) -> usize {
        self.messages.len() + 1
    }
}

impl Sessions {
    /// The slot of `session`, made if no turn holds one; held by the
    /// caller for as long as its turn runs (or waits to).
    pub(crate) fn slot(&self, session: &str) -> Arc<Slot> {
        let mut slots = self.lock();
        if let Some(slot) = slots.by_session.get(session).and_then(Weak::upgrade) {
            return slot;
        }
        let slot = Arc::new(Slot {
            marks: watch::Sender::new(Marks::default()),
            running: AtomicI64::new(0),
        });
        // The entry of the session's last turn, if not swept yet, keeps
        // its key.
        if let Some(gone) = slots.by_session.get_mut(session) {
            *gone = Arc::downgrade(&slot);
        } else {
            slots
                .by_session
                .insert(session.to_owned(), Arc::downgrade(&slot));
        }
        if slots.by_session.len() >= slots.sweep_at {
            slots.by_session.retain(|_, slot| slot.strong_count() > 0);
            slots.sweep_at = (slots.by_session.len() * 2).max(SWEEP_AT);
        }
        slot
    }

    /// The slot of `session` if a turn holds one.
    fn live(&self, session: &str) -> Option<Arc<Slot>> {
        self.lock().by_session.get(session).and_then(Weak::upgrade)
    }

    /// Notes a user message of `session` at `seq`; a running (or waiting)
    /// turn of an older one sees itself interrupted at once.
    pub(crate) fn saw_user_message(&self, session: &str, seq: Seq) {
        let Some(slot) = self.live(session) else {
            return;
        };
        slot.marks.send_if_modified(|marks| {
            let newer = seq > marks.newest;
            if newer {
                marks.newest = seq;
            }
            newer
        });
    }

    /// Stops the turn running for `session` in this agent, if any.
    pub(crate) fn stop(&self, session: &str) -> bool {
        self.live(session).is_some_and(|slot| slot.stop())
    }

    /// How many sessions have an entry in the slot map (live or awaiting
    /// a sweep).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.lock().by_session.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // Each change is one insert or one sweep: valid after any panic.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes out the kept view of `session`, if any, for a turn (which
    /// puts it back as it ends) or its claim (which hands it to the turn,
    /// or puts it back when the turn does not start).
    pub(crate) fn take_view(&self, session: &str) -> Option<View> {
        self.views.take(session)
    }

    /// Keeps `view` as `session`'s, dropping the least recently used
    /// views while they hold more than the budget.
    pub(crate) fn put_view(&self, session: &str, view: View) {
        self.views.put(session, view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_live_as_long_as_a_turn_holds_them() {
        let sessions = Sessions::default();
        let held = sessions.slot("a");
        assert!(Arc::ptr_eq(&held, &sessions.slot("a")));
        sessions.saw_user_message("a", 7);
        assert!(held.is_newer_than(6));
        drop(held);
        // No turn holds it: a message seen now marks nothing, and the next
        // turn starts from a fresh slot (it reads newer prompts from the
        // store).
        sessions.saw_user_message("a", 9);
        assert!(!sessions.slot("a").is_newer_than(8));
    }

    #[test]
    fn a_server_that_sees_sessions_without_end_keeps_few_entries() {
        let sessions = Sessions::default();
        let held: Vec<_> = (0..10)
            .map(|i| sessions.slot(&format!("held-{i}")))
            .collect();
        for i in 0..100_000 {
            let slot = sessions.slot(&format!("s-{i}"));
            sessions.saw_user_message(&format!("s-{i}"), 1);
            drop(slot);
            sessions.saw_user_message(&format!("gone-{i}"), 1);
        }
        assert!(
            sessions.entries() <= SWEEP_AT,
            "{} entries",
            sessions.entries()
        );
        // The held ones survived every sweep.
        for (i, slot) in held.iter().enumerate() {
            assert!(Arc::ptr_eq(slot, &sessions.slot(&format!("held-{i}"))));
        }
    }
}
