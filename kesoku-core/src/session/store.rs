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
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast;

use crate::error_source::ErrorSource;
use crate::session::delta::Delta;
use crate::session::message::{Message, MessageType, Role, Status};

mod memory;
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
/// A store of one's own implements the three (the relay has defaults
/// for a store that does not relay deltas between processes), and passes
/// the conformance suite in `tests/store.rs` and `tests/store_leases.rs`.
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
    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>>;

    /// A session's messages stored after `seq`, in order, each with its
    /// `Seq` (`0`: the whole history): how an agent catches up on a session
    /// it loaded before.
    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>>;

    /// Up to `limit` messages stored after `seq`, of every session, in
    /// order, each with its `Seq`: how a listener catches up.
    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>>;

    /// The messages whose status is `status`, in order, each with its `Seq`.
    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>>;

    /// Sets the status of message `id` to `to` if it is one of `from`, in
    /// one conditional update. `true` if this call changed it.
    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool>;

    /// Every session, the most recently updated first.
    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>>;

    /// The largest `Seq` stored, 0 when empty.
    fn last_seq(&self) -> StoreFuture<'_, Seq>;
}

/// Leases and claims: which worker runs a session's turn, and the posts
/// it makes only while it does. Each call is one conditional write, so of
/// several processes sharing a store exactly one holds a session.
pub trait Leases: MessageLog {
    /// [`insert`](MessageLog::insert), only while `holder` holds the turn lease
    /// of the message's session ([`lease`](Leases::lease)) and it has not
    /// expired, checked in the same transaction: otherwise
    /// [`StoreError::LeaseLost`], and nothing is written. How a turn posts,
    /// so a worker that lost its session (stalled past its lease, say)
    /// cannot answer a turn another worker has resumed.
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq>;

    /// [`transition`](MessageLog::transition), only while `holder` holds the
    /// turn lease of the message's session and it has not expired, checked
    /// in the same transaction: otherwise [`StoreError::LeaseLost`], and
    /// nothing is changed. `false` for an unknown id or a status not in
    /// `from`. How a turn settles its prompt, so a worker that lost the
    /// session cannot mark a turn another worker is running.
    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool>;

    /// Takes the turn lease of `session_id` for `holder`, until `ttl` from
    /// now: `true` if `holder` holds it now (it was free, expired, or
    /// `holder`'s already), `false` if another holder's lease has not
    /// expired. One conditional write, so of several processes exactly
    /// one holds a session's lease: a session runs one turn at a time
    /// across every agent sharing the store.
    ///
    /// This acquires: it takes a lease no one holds. A running turn keeps
    /// its lease with [`renew`](Leases::renew) instead, which never takes
    /// back a lease that was lost.
    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Extends `holder`'s lease of `session_id` to `ttl` from now, only
    /// while `holder` still holds it and it has not expired, in one
    /// conditional write: `true` if it was extended, `false` if it is gone
    /// (expired, released, broken with [`break_lease`](Leases::break_lease),
    /// or another holder's). Unlike [`lease`](Leases::lease) it never
    /// creates a lease, so a holder that lost its lease cannot take it
    /// back while its turn runs on: the turn must stop, since another
    /// worker may have resumed it.
    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Gives up `holder`'s lease of `session_id`; `false` if it did not
    /// hold it (it expired and another took it).
    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool>;

    /// Claims the oldest `pending_agent` user message whose session no one
    /// holds a live lease on (and that has no older one pending, or left
    /// `processing` by a dead worker until it is requeued), leasing
    /// the session to `holder` for `ttl` and setting the message
    /// `processing`, in one transaction; the message, with its `Seq`, or
    /// `None` when there is none to take. How `serve` takes work: each
    /// prompt goes to one worker, and a worker asks only when it has room.
    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>>;

    /// Drops `session_id`'s lease, whoever holds it; whether there was
    /// one. For start-up recovery on a store no other agent uses (the
    /// holder died with the process): a live holder elsewhere would find
    /// its lease gone.
    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool>;

    /// Puts every user message left `processing` in a session whose lease
    /// has expired (or was never taken) back to `pending_agent`, in one
    /// conditional update, and returns them with their `Seq`s: the turns
    /// of a worker that died, for another to take.
    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>>;

    /// Starts a turn on a new prompt: takes `holder`'s lease of
    /// `message`'s session for `ttl`, as [`lease`](Leases::lease) would,
    /// and stores `message` (which the caller has made `processing`, so
    /// no other worker claims it), in one transaction. Its `Seq`, or
    /// `None` when another holder's lease is live, and nothing is written.
    /// How an agent's `send` starts its turn in one write instead of
    /// three (store the prompt, lease the session, claim the prompt).
    ///
    /// The default takes the lease, then stores the message fenced by it
    /// ([`insert_leased`](Leases::insert_leased)): two writes, after
    /// which an error may leave the lease held (the caller releases it).
    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        Box::pin(async move {
            if !self.lease(&message.session_id, holder, ttl).await? {
                return Ok(None);
            }
            self.insert_leased(message, holder).await.map(Some)
        })
    }

    /// [`insert_claimed`](Leases::insert_claimed), then the messages of
    /// `message`'s session stored after `after` (the new prompt among
    /// them), as [`history_after`](MessageLog::history_after) returns
    /// them ([`Claimed`]), or `None` when another holder's lease is live,
    /// and nothing is written or read. How a turn whose agent kept a view
    /// of the session up to `after` starts and brings that view up to
    /// date in one call, instead of a write and a read: `SqliteStore`
    /// and `MemoryStore` read in the write's own transaction,
    /// `PostgresStore` on the same connection right after its commit.
    ///
    /// The default takes the two steps. A read that fails after the
    /// write leaves the prompt stored and the lease held, as a lost answer
    /// would: the caller's next try finds the prompt a duplicate.
    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        Box::pin(async move {
            let Some(seq) = self.insert_claimed(message, holder, ttl).await? else {
                return Ok(None);
            };
            let newer = self.history_after(&message.session_id, after).await?;
            Ok(Some(Claimed::new(seq, newer)))
        })
    }

    /// Ends `holder`'s turn of `session_id`: stores `posts` in order, each
    /// as [`insert_leased`](Leases::insert_leased) would, sets the status
    /// of the turn's prompt `prompt` to `to` if it is one of `from`, as
    /// [`transition_leased`](Leases::transition_leased) would, and
    /// releases the lease; the posts' `Seq`s. How a turn posts its last
    /// messages and settles, in one write instead of three or more. Fails
    /// with [`StoreError::LeaseLost`] unless `holder`'s lease of
    /// `session_id` is live.
    ///
    /// A store that does it in one transaction writes nothing when any
    /// part is refused ([`StoreError::LeaseLost`],
    /// [`StoreError::Duplicate`]). The default does it in steps, so a
    /// failure may leave the first part done: a caller that tries again
    /// takes the steps itself, treating a post found stored as done.
    fn finish_turn<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        posts: &'a [Message],
        prompt: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, Vec<Seq>> {
        Box::pin(async move {
            let mut seqs = Vec::with_capacity(posts.len());
            for message in posts {
                seqs.push(self.insert_leased(message, holder).await?);
            }
            self.transition_leased(prompt, from, to, holder).await?;
            self.release(session_id, holder).await?;
            Ok(seqs)
        })
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

impl<S: Leases + ?Sized> Leases for std::sync::Arc<S> {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        (**self).insert_leased(message, holder)
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        (**self).transition_leased(id, from, to, holder)
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).lease(session_id, holder, ttl)
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).renew(session_id, holder, ttl)
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        (**self).release(session_id, holder)
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        (**self).claim_next(holder, ttl)
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        (**self).break_lease(session_id)
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        (**self).requeue_expired()
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        (**self).insert_claimed(message, holder, ttl)
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        (**self).insert_claimed_after(message, holder, ttl, after)
    }

    fn finish_turn<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        posts: &'a [Message],
        prompt: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, Vec<Seq>> {
        (**self).finish_turn(session_id, holder, posts, prompt, from, to)
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
