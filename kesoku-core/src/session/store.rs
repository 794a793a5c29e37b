//! [`Store`]: where sessions and their messages are kept, and
//! [`MemoryStore`], the in-memory one.
//!
//! A store is the one source of truth of a running agent: the gateway
//! saves every message in it before delivering it, listeners catch up from
//! it, and a claim and a session's turn lease are conditional updates in
//! it. Nothing an agent needs lives only in one process's memory, so
//! several processes can share a store that a server database backs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;

use crate::error_source::ErrorSource;
use crate::session::delta::Delta;
use crate::session::message::{Message, MessageType, Role, Status};

mod leases;
mod local;
mod memory;
pub mod row;
#[cfg(feature = "testing")]
pub mod testing;
pub use leases::Leases;
pub use local::LocalLeases;
pub use memory::MemoryStore;

/// A message's position in its store's single total order: every message
/// gets a larger one than all before it. Listeners resume from the last
/// one they saw.
pub type Seq = i64;

/// The future of a [`Store`] call: `Send`, and borrowing only its inputs.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A message with this id is stored already; nothing was written.
    #[error("a message with id `{id}` is already stored")]
    Duplicate {
        /// The id.
        id: String,
    },
    /// The database failed or is unreachable. The message names the
    /// store and the call; the database's own error is the
    /// [`source`](std::error::Error::source) when the store kept it, else
    /// the message ends with its text (`message`, always set): either way
    /// a chain of errors says it once ([`ErrorChain`](crate::ErrorChain)
    /// prints one). [`StoreError::backend`] makes one.
    #[error("the {store} store failed to {action}{}", backend_note(message, source.as_ref()))]
    Backend {
        /// Which store, such as `SQLite` at a path.
        store: String,
        /// What it was doing, such as "save message `m1`".
        action: String,
        /// The database's error, as text.
        message: String,
        /// The database's error itself.
        #[source]
        source: Option<ErrorSource>,
    },
    /// [`Leases::insert_leased`] or [`Leases::transition_leased`]: the
    /// message's session is not leased to the holder that wrote it (the
    /// lease expired, or another worker took it); nothing was written.
    #[error(
        "message `{id}` was not written: the turn lease of session `{session}` is not held by `{holder}` (it expired, or another worker took it)"
    )]
    LeaseLost {
        /// The message's id.
        id: String,
        /// Its session.
        session: String,
        /// The holder that wrote it.
        holder: String,
    },
    /// A stored row cannot be read back as a [`Message`].
    #[error("the {store} store holds a message that cannot be read ({id}): {message}")]
    Corrupt {
        /// Which store.
        store: String,
        /// The row's id.
        id: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The database's error in a [`StoreError::Backend`]'s message: only
/// when it is not its source, which a chain of errors prints.
fn backend_note(message: &str, source: Option<&ErrorSource>) -> String {
    match source {
        Some(_) => String::new(),
        None => format!(": {message}"),
    }
}

impl StoreError {
    /// The `store` failed to do `action` (such as "save message `m1`")
    /// with `error`, kept as the source.
    pub fn backend(
        store: impl Into<String>,
        action: impl Into<String>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            store: store.into(),
            action: action.into(),
            message: error.to_string(),
            source: Some(ErrorSource::new(error)),
        }
    }
}

/// What a store announces ([`DeltaRelay::changes`]): every message up to `seq`
/// is stored and visible, and, when the store can say, the fields of the
/// message at `seq` that a listener's filter reads, so a listener that
/// does not want it need not read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Announced {
    /// Every message up to this one is stored.
    pub seq: Seq,
    /// The message at `seq`: its session, role and status as stored.
    /// `None` when only `seq` is known (after a reconnect, say).
    pub header: Option<Header>,
}

/// The fields of an [`Announced`] message a listener's filter reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Header {
    /// Its session.
    pub session_id: String,
    /// Its role.
    pub role: Role,
    /// Its status when it was stored.
    pub status: Status,
}

impl Announced {
    /// Every message up to `seq` is stored; nothing more is known.
    pub fn upto(seq: Seq) -> Self {
        Announced { seq, header: None }
    }

    /// The message at `seq` is stored (and every one before it), with
    /// these fields.
    pub fn message(seq: Seq, session_id: impl Into<String>, role: Role, status: Status) -> Self {
        Announced {
            seq,
            header: Some(Header {
                session_id: session_id.into(),
                role,
                status,
            }),
        }
    }
}

/// A prompt stored by [`Leases::insert_claimed_after`], with what its
/// session holds after the `Seq` the caller gave.
///
/// ```
/// use kesoku_core::store::Claimed;
///
/// let claimed = Claimed::new(7, Vec::new());
/// assert_eq!((claimed.seq, claimed.newer.len()), (7, 0));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Claimed {
    /// The prompt's `Seq`.
    pub seq: Seq,
    /// The session's messages after the given `Seq`, in order (as
    /// [`MessageLog::history_after`] returns them): the prompt, and any
    /// stored before it since that `Seq`, or after it before the read.
    pub newer: Vec<(Seq, Message)>,
}

impl Claimed {
    /// The prompt stored at `seq`, and `newer`.
    #[must_use]
    pub fn new(seq: Seq, newer: Vec<(Seq, Message)>) -> Self {
        Claimed { seq, newer }
    }
}

/// A session as a store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// The start of its first user message, if it has one.
    pub title: Option<String>,
    /// When its first message was stored.
    pub created: DateTime<Utc>,
    /// When its last message was stored.
    pub updated: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: u64,
}

impl SessionInfo {
    /// A session first written at `created`.
    pub fn new(id: impl Into<String>, created: DateTime<Utc>) -> Self {
        SessionInfo {
            id: id.into(),
            title: None,
            created,
            updated: created,
            messages: 0,
        }
    }
}

/// How long a session title is: the start of its first user message.
pub const TITLE_CHARS: usize = 80;

/// A session's title from its first user message: the first line, cut at
/// [`TITLE_CHARS`] characters, control characters made spaces (a title is
/// one line of display text, and some databases cannot hold a NUL).
pub fn title_of(message: &Message) -> Option<String> {
    if message.role != Role::User || message.kind != MessageType::Text {
        return None;
    }
    let line = message.content.lines().find(|l| !l.trim().is_empty())?;
    Some(
        line.trim()
            .chars()
            .take(TITLE_CHARS)
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
    )
}

/// Where sessions and their messages are kept: the three parts of a
/// store, [`MessageLog`], [`Leases`] and [`DeltaRelay`], together. It is
/// implemented for every type that implements them; agents and gateways
/// take an `Arc<dyn Store>`.
///
/// A store of one's own writes the six required methods of
/// [`MessageLog`]; every other method has a default built on them. For a
/// store that serves one process, [`LocalLeases`] adds leases kept in
/// memory and the relay's defaults, which makes it a `Store`; a store
/// shared by several processes implements [`Leases`] itself, as
/// conditional writes in its database. Either proves itself with
/// [`testing::conformance`] (feature `testing`), the suite the built-in
/// stores pass.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kesoku_core::store::{MemoryStore, Store};
/// use kesoku_core::{Message, MessageType, Role};
///
/// let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
/// let seq = store.insert(&Message::new("s", Role::User, MessageType::Text, "hi")).await.unwrap();
/// assert_eq!(store.last_seq().await.unwrap(), seq);
/// # });
/// ```
pub trait Store: MessageLog + Leases + DeltaRelay {}

impl<T: MessageLog + Leases + DeltaRelay> Store for T {}

/// The message log: messages appended and read back in order, by
/// session, by status, or after a [`Seq`].
///
/// Six methods are required: [`insert`](MessageLog::insert),
/// [`get`](MessageLog::get), [`history_after`](MessageLog::history_after),
/// [`after`](MessageLog::after), [`transition`](MessageLog::transition) and
/// [`last_seq`](MessageLog::last_seq). The others have defaults built on
/// them, which read the whole log ([`with_status`](MessageLog::with_status),
/// [`sessions`](MessageLog::sessions)) or a whole session
/// ([`history`](MessageLog::history)); a store with indexes overrides them.
///
/// Every call is one transaction. Messages are immutable once stored but
/// for their status, which changes only through
/// [`transition`](MessageLog::transition), a conditional update: of several
/// processes that try the same transition, exactly one succeeds.
pub trait MessageLog: Send + Sync + 'static {
    /// Saves a new message, creating its session on first use (titled after
    /// its first user message), and returns the message's [`Seq`]. An id
    /// that is stored already is [`StoreError::Duplicate`], and nothing is
    /// written. Messages become visible to [`after`](MessageLog::after) and
    /// [`last_seq`](MessageLog::last_seq) in `Seq` order: once one is, every
    /// smaller `Seq` is too (listeners rely on it to catch up).
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq>;

    /// The message with this id.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>>;

    /// A session's messages, in the order they were stored.
    ///
    /// The default is [`history_after`](MessageLog::history_after) from 0.
    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        Box::pin(async move {
            let all = self.history_after(session_id, 0).await?;
            Ok(all.into_iter().map(|(_, m)| m).collect())
        })
    }

    /// A session's messages stored after `seq`, in order, each with its
    /// `Seq` (`0`: the whole history): how an agent catches up on a session
    /// it loaded before.
    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>>;

    /// A page of a session's messages, in order, each with its `Seq`:
    /// those stored after `page.after` and before `page.before`, at most
    /// `page.limit` of them, the oldest ([`Page::first`]) or the newest
    /// ([`Page::last`]). How an agent that kept no view of a session reads
    /// only the end the model will be shown, however long the session.
    ///
    /// The default reads the session after `page.after`
    /// ([`history_after`](MessageLog::history_after)) and keeps the page; a
    /// store with an index of sessions' messages reads the page alone.
    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        Box::pin(async move {
            let mut all = self.history_after(session_id, page.after).await?;
            all.retain(|(seq, _)| *seq < page.before);
            let kept = page.within(all.len());
            all.truncate(kept.end);
            all.drain(..kept.start);
            Ok(all)
        })
    }

    /// Up to `limit` messages stored after `seq`, of every session, in
    /// order, each with its `Seq`: how a listener catches up.
    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>>;

    /// The messages whose status is `status`, in order, each with its `Seq`.
    ///
    /// The default reads the whole log, a page at a time.
    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        Box::pin(async move {
            let mut found = Vec::new();
            scan(self, |seq, m| {
                if m.status == status {
                    found.push((seq, m));
                }
            })
            .await?;
            Ok(found)
        })
    }

    /// Sets the status of message `id` to `to` if it is one of `from`, in
    /// one conditional update. `true` if this call changed it.
    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool>;

    /// Every session, the most recently updated first (then by id).
    ///
    /// The default reads the whole log, a page at a time: a session was
    /// created at the time of its first message stored, updated at the
    /// latest time of any, and is titled after its first user text
    /// ([`title_of`]).
    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        Box::pin(async move {
            let mut sessions: std::collections::HashMap<String, SessionInfo> =
                std::collections::HashMap::new();
            scan(self, |_, m| {
                let info = sessions
                    .entry(m.session_id.clone())
                    .or_insert_with(|| SessionInfo::new(m.session_id.clone(), m.timestamp));
                info.messages += 1;
                info.updated = info.updated.max(m.timestamp);
                if info.title.is_none() {
                    info.title = title_of(&m);
                }
            })
            .await?;
            let mut sessions: Vec<SessionInfo> = sessions.into_values().collect();
            sessions.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
            Ok(sessions)
        })
    }

    /// The largest `Seq` stored, 0 when empty.
    fn last_seq(&self) -> StoreFuture<'_, Seq>;
}

/// Which of a session's messages [`MessageLog::history_page`] reads: those
/// stored after `after` and before `before`, at most `limit`, the oldest
/// of them or the newest.
///
/// ```
/// use kesoku_core::store::Page;
///
/// // The newest 100 messages stored before seq 5,000.
/// let page = Page::last(100).before(5_000);
/// assert_eq!((page.limit, page.before, page.newest), (100, 5_000, true));
/// assert_eq!(Page::first(10).after(7).after, 7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// Only messages stored after this `Seq` (0: from the first).
    pub after: Seq,
    /// Only messages stored before this `Seq` ([`Seq::MAX`]: to the last).
    pub before: Seq,
    /// At most this many.
    pub limit: usize,
    /// The newest of them, else the oldest (in order either way).
    pub newest: bool,
}

impl Page {
    /// The session's oldest `limit` messages.
    #[must_use]
    pub fn first(limit: usize) -> Self {
        Page {
            after: 0,
            before: Seq::MAX,
            limit,
            newest: false,
        }
    }

    /// The session's newest `limit` messages.
    #[must_use]
    pub fn last(limit: usize) -> Self {
        Page {
            newest: true,
            ..Page::first(limit)
        }
    }

    /// Only those stored before `seq`.
    #[must_use]
    pub fn before(mut self, seq: Seq) -> Self {
        self.before = seq;
        self
    }

    /// Only those stored after `seq`.
    #[must_use]
    pub fn after(mut self, seq: Seq) -> Self {
        self.after = seq;
        self
    }

    /// Which of `len` messages within the bounds, in order, the page
    /// holds: the first `limit` of them, or the last.
    ///
    /// ```
    /// use kesoku_core::store::Page;
    ///
    /// assert_eq!(Page::first(3).within(10), 0..3);
    /// assert_eq!(Page::last(3).within(10), 7..10);
    /// assert_eq!(Page::last(30).within(10), 0..10);
    /// ```
    #[must_use]
    pub fn within(&self, len: usize) -> std::ops::Range<usize> {
        let kept = len.min(self.limit);
        if self.newest {
            len - kept..len
        } else {
            0..kept
        }
    }
}

/// How many messages a default method reads at a time.
const PAGE: usize = 1_000;

/// Reads `log`'s every message in order, a page at a time, giving each
/// to `each`.
async fn scan<L: MessageLog + ?Sized>(
    log: &L,
    mut each: impl FnMut(Seq, Message) + Send,
) -> Result<(), StoreError> {
    let mut from = 0;
    loop {
        let page = log.after(from, PAGE).await?;
        let full = page.len() == PAGE;
        for (seq, m) in page {
            from = seq;
            each(seq, m);
        }
        if !full {
            return Ok(());
        }
    }
}

/// The delta relay: pieces of replies being written, passed between the
/// processes sharing a store, and the store's announcements of what it
/// stored. Optional: the defaults relay nothing (a gateway then relays in
/// its own process, and listeners poll for other processes' messages).
pub trait DeltaRelay: Send + Sync + 'static {
    /// Relays `delta` to the gateways on this store (at once) and on
    /// every other store sharing its database, through
    /// [`delta_feed`](DeltaRelay::delta_feed); `false` when it was dropped, or
    /// (the default) when the store does not relay deltas. Never blocks
    /// and never stores: the finished message is stored as always.
    fn publish_delta(&self, delta: &Delta) -> bool {
        let _ = delta;
        false
    }

    /// The deltas published through this store and every other sharing
    /// its database, from now on, each once, in the order each store
    /// published them; `None` (the default) when the store does not relay
    /// deltas (a [`Gateway`](crate::Gateway) then keeps its own in its
    /// process).
    fn delta_feed(&self) -> Option<broadcast::Receiver<Arc<Delta>>> {
        None
    }

    /// Where the store announces the messages stored, by this process or
    /// any other, as they are. `None` (the default) when the store cannot
    /// tell; listeners then read the store now and then for other
    /// processes' messages. A listener that falls behind the channel
    /// reads what it missed from the store.
    fn changes(&self) -> Option<broadcast::Receiver<Announced>> {
        None
    }
}

impl<S: MessageLog + ?Sized> MessageLog for std::sync::Arc<S> {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        (**self).insert(message)
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        (**self).get(id)
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        (**self).history(session_id)
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        (**self).history_after(session_id, seq)
    }

    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        (**self).history_page(session_id, page)
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        (**self).after(seq, limit)
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        (**self).with_status(status)
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        (**self).transition(id, from, to)
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        (**self).sessions()
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        (**self).last_seq()
    }
}

impl<S: DeltaRelay + ?Sized> DeltaRelay for std::sync::Arc<S> {
    fn publish_delta(&self, delta: &Delta) -> bool {
        (**self).publish_delta(delta)
    }

    fn delta_feed(&self) -> Option<broadcast::Receiver<Arc<Delta>>> {
        (**self).delta_feed()
    }

    fn changes(&self) -> Option<broadcast::Receiver<Announced>> {
        (**self).changes()
    }
}
