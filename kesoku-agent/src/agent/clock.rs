//! Where the turn's rules get ids and times: given, so that the machine
//! reads no clock and draws no random id (`run.rs` gives version 7 UUIDs
//! and the wall clock; a test, a counter), and a turn fed the same makes
//! the same messages, byte for byte.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use kesoku_core::Message;

/// A new message's id and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) id: String,
    pub(crate) at: DateTime<Utc>,
}

/// The source of the ids and times of the messages the machine makes.
#[derive(Clone)]
pub(crate) struct Clock(Arc<dyn Fn() -> Stamp + Send + Sync>);

impl Clock {
    /// A clock whose every stamp is `next`'s.
    pub(crate) fn new(next: impl Fn() -> Stamp + Send + Sync + 'static) -> Self {
        Clock(Arc::new(next))
    }

    /// The ids and times of a live turn: `Message::new`'s (version 7
    /// UUIDs, the wall clock).
    pub(crate) fn wall() -> Self {
        Clock::new(|| Stamp {
            id: uuid::Uuid::now_v7().to_string(),
            at: Utc::now(),
        })
    }

    /// `m` with the next id and time: those `Message::new` gave it are
    /// not kept.
    pub(crate) fn stamp(&self, mut m: Message) -> Message {
        let Stamp { id, at } = (self.0)();
        m.id = id;
        m.timestamp = at;
        m
    }

    /// The time now (a stamp whose id is not used).
    pub(crate) fn now(&self) -> DateTime<Utc> {
        (self.0)().at
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}
