//! The agent's per-session state in this process: one turn at a time, the
//! newest user message seen (which is what interrupts a running turn), and
//! the session's [`View`] kept between turns.
//!
//! A kept view is a cache, never the truth: a turn brings it up to date
//! from the store (only the messages stored since), so turns other agents
//! ran on the session, in this process or another, are in it. The views
//! of the sessions used least recently are dropped when they hold more
//! than a budget of messages.

use std::collections::HashMap;
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
    /// Held for the length of a turn: a session runs one turn at a time.
    pub(crate) turn: tokio::sync::Mutex<()>,
    /// The `Seq` of the newest user message seen for the session. A turn
    /// started for an older one is interrupted.
    newest: watch::Sender<Seq>,
}

impl Slot {
    /// Whether a user message newer than `seq` arrived.
    pub(crate) fn is_newer_than(&self, seq: Seq) -> bool {
        *self.newest.borrow() > seq
    }

    /// Resolves once a user message newer than `seq` arrives.
    pub(crate) async fn newer_than(&self, seq: Seq) {
        let mut rx = self.newest.subscribe();
        if rx.wait_for(|&newest| newest > seq).await.is_err() {
            // The sender lives as long as the slot, which the caller holds.
            std::future::pending::<()>().await;
        }
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
            turn: tokio::sync::Mutex::new(()),
            newest: watch::Sender::new(0),
        });
        slots.insert(session.to_owned(), Arc::clone(&slot));
        slot
    }

    /// Notes a user message of `session` at `seq`; a running turn of an
    /// older one sees itself interrupted at once.
    pub(crate) fn saw_user_message(&self, session: &str, seq: Seq) {
        self.slot(session).newest.send_if_modified(|newest| {
            let newer = seq > *newest;
            if newer {
                *newest = seq;
            }
            newer
        });
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
