//! [`Gateway`]: the hub between chat front ends, the agent and tools.
//!
//! [`post`](Gateway::post) saves a message in the [`Store`] first, then
//! delivers it to every listener whose [`Filter`] matches.
//! [`listen`](Gateway::listen) replays the stored matches, then yields live
//! ones, with no gap and no duplicate between the two: it subscribes before
//! it replays, and a message's [`Seq`] says which side it belongs to. A
//! listener that falls behind catches up from the store rather than losing
//! messages. Messages that another process posted to the same store
//! arrive when the store announces them ([`DeltaRelay::changes`](crate::store::DeltaRelay::changes), such as
//! PostgreSQL's `NOTIFY`), else through a periodic read of the store.

// error < filter < listener < this module.
mod error;
mod filter;
mod listener;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::broadcast;

use crate::session::delta::Delta;
use crate::session::message::{Message, Status};
use crate::session::progress::{Progress, ProgressError, ProgressFuture};
use crate::session::store::{Claimed, MemoryStore, Seq, Store};

pub use error::GatewayError;
pub use filter::Filter;
pub use listener::{Delivery, Listener};

/// The hub: saves each message, then delivers it to the listeners.
///
/// Cheap to clone (one `Arc`); clones share the store and the listeners.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use futures_util::StreamExt;
/// use kesoku_core::gateway::{Filter, Gateway};
/// use kesoku_core::{Message, MessageType, Role, Status};
///
/// let gateway = Gateway::in_memory();
/// let first = Message::new("s", Role::User, MessageType::Text, "one").with_status(Status::PendingAgent);
/// gateway.post(first).await.unwrap();
///
/// // Stored matches first, then live ones.
/// let mut waiting = gateway.listen(Filter::new().status(Status::PendingAgent)).await.unwrap();
/// let second = Message::new("s", Role::User, MessageType::Text, "two").with_status(Status::PendingAgent);
/// gateway.post(second).await.unwrap();
/// assert_eq!(waiting.next().await.unwrap().unwrap().message.content, "one");
/// assert_eq!(waiting.next().await.unwrap().unwrap().message.content, "two");
/// # });
/// ```
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    live: broadcast::Sender<(Seq, Arc<Message>)>,
    /// Pieces of replies being written: live only, never stored.
    deltas: broadcast::Sender<Arc<Delta>>,
    /// Whether the store relays deltas to other processes (and theirs
    /// here).
    relays: bool,
    poll: Duration,
}

impl fmt::Debug for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateway")
            .field("listeners", &self.inner.live.receiver_count())
            .field("poll", &self.inner.poll)
            .finish_non_exhaustive()
    }
}

/// How many live messages a listener may fall behind before it catches up
/// from the store instead.
const LIVE_CAPACITY: usize = 1024;
/// How many deltas a listener may fall behind before the oldest are
/// dropped for it (the finished message is stored; deltas are only a view
/// of it being written).
const DELTA_CAPACITY: usize = 4096;

impl Gateway {
    /// How often a listener reads the store for messages posted by other
    /// processes, unless [`with_poll_interval`](Self::with_poll_interval)
    /// says otherwise.
    pub const DEFAULT_POLL: Duration = Duration::from_millis(250);

    /// A gateway over `store`.
    pub fn new(store: impl Store) -> Self {
        Self::from_arc(Arc::new(store))
    }

    /// A gateway over a shared store.
    pub fn from_arc(store: Arc<dyn Store>) -> Self {
        let relays = store.delta_feed().is_some();
        Gateway {
            inner: Arc::new(Inner {
                store,
                live: broadcast::channel(LIVE_CAPACITY).0,
                deltas: broadcast::channel(DELTA_CAPACITY).0,
                relays,
                poll: Self::DEFAULT_POLL,
            }),
        }
    }

    /// A gateway over a new [`MemoryStore`].
    pub fn in_memory() -> Self {
        Self::new(MemoryStore::new())
    }

    /// Sets how often listeners read the store for messages other
    /// processes posted. Call it before the gateway is cloned or listened
    /// to.
    #[must_use]
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.poll = every.max(Duration::from_millis(1));
        }
        self
    }

    /// The store messages are saved in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Saves `message`, then delivers it to the matching listeners.
    /// Returns its [`Seq`].
    pub async fn post(&self, message: Message) -> Result<Seq, GatewayError> {
        let seq = self.inner.store.insert(&message).await?;
        self.deliver(seq, || message);
        Ok(seq)
    }

    /// Delivers the message stored at `seq` to the listeners, made (by
    /// `message`) only when there are any. No listener is fine: the
    /// message is stored either way, and one that subscribes after this
    /// reads it from the store (it subscribes before it reads).
    fn deliver(&self, seq: Seq, message: impl FnOnce() -> Message) {
        if self.inner.live.receiver_count() > 0 {
            let _ = self.inner.live.send((seq, Arc::new(message())));
        }
    }

    /// [`post`](Self::post), only while `holder` holds the lease of the
    /// message's session ([`Leases::insert_leased`](crate::store::Leases::insert_leased)): otherwise
    /// [`StoreError::LeaseLost`](crate::store::StoreError::LeaseLost) and nothing is stored or delivered. How
    /// an agent's turn posts.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use kesoku_core::{Gateway, GatewayError, Message, MessageType, Role, store::StoreError};
    ///
    /// let gateway = Gateway::in_memory();
    /// let answer = || Message::new("s", Role::Assistant, MessageType::Text, "4");
    /// gateway.store().lease("s", "worker-1", Duration::from_secs(10)).await.unwrap();
    /// assert!(gateway.post_leased(answer(), "worker-1").await.is_ok());
    /// let lost = gateway.post_leased(answer(), "worker-2").await.unwrap_err();
    /// assert!(matches!(lost, GatewayError::Store(StoreError::LeaseLost { .. })));
    /// # });
    /// ```
    pub async fn post_leased(&self, message: Message, holder: &str) -> Result<Seq, GatewayError> {
        let seq = self.inner.store.insert_leased(&message, holder).await?;
        self.deliver(seq, || message);
        Ok(seq)
    }

    /// [`post_leased`](Self::post_leased) for a caller that keeps
    /// `message`: it is copied only for the listeners, when there are
    /// any (the store keeps its own copy, as it does of any post).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use kesoku_core::{Gateway, Message, MessageType, Role};
    ///
    /// let gateway = Gateway::in_memory();
    /// gateway.store().lease("s", "worker-1", Duration::from_secs(10)).await.unwrap();
    /// let answer = Message::new("s", Role::Assistant, MessageType::Text, "4");
    /// gateway.post_leased_ref(&answer, "worker-1").await.unwrap();
    /// assert_eq!(gateway.history("s").await.unwrap(), [answer]);
    /// # });
    /// ```
    pub async fn post_leased_ref(
        &self,
        message: &Message,
        holder: &str,
    ) -> Result<Seq, GatewayError> {
        let seq = self.inner.store.insert_leased(message, holder).await?;
        self.deliver(seq, || message.clone());
        Ok(seq)
    }

    /// Starts a turn on the prompt `message` (which the caller has made
    /// `processing`) in one write: stores it with its session leased to
    /// `holder` for `ttl` ([`Leases::insert_claimed`](crate::store::Leases::insert_claimed)),
    /// then delivers it. `None` when another holder's lease is live:
    /// nothing is stored or delivered, and the caller posts the prompt
    /// `pending_agent` for whoever holds the session.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use kesoku_core::{Gateway, Message, MessageType, Role, Status};
    ///
    /// let gateway = Gateway::in_memory();
    /// let prompt = || {
    ///     Message::new("s", Role::User, MessageType::Text, "Add 2 and 2")
    ///         .with_status(Status::Processing)
    /// };
    /// let ttl = Duration::from_secs(10);
    /// assert!(gateway.post_claimed(prompt(), "worker-1", ttl).await.unwrap().is_some());
    /// // The session's turn is worker-1's: worker-2 stores nothing.
    /// assert_eq!(gateway.post_claimed(prompt(), "worker-2", ttl).await.unwrap(), None);
    /// assert_eq!(gateway.history("s").await.unwrap().len(), 1);
    /// # });
    /// ```
    pub async fn post_claimed(
        &self,
        message: Message,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Seq>, GatewayError> {
        let seq = self
            .inner
            .store
            .insert_claimed(&message, holder, ttl)
            .await?;
        if let Some(seq) = seq {
            self.deliver(seq, || message);
        }
        Ok(seq)
    }

    /// [`post_claimed`](Self::post_claimed) for a caller that keeps
    /// `message`: it is copied only for the listeners, when there are any.
    pub async fn post_claimed_ref(
        &self,
        message: &Message,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Seq>, GatewayError> {
        let seq = self
            .inner
            .store
            .insert_claimed(message, holder, ttl)
            .await?;
        if let Some(seq) = seq {
            self.deliver(seq, || message.clone());
        }
        Ok(seq)
    }

    /// [`post_claimed`](Gateway::post_claimed), also reading what the
    /// session holds after `after`, the prompt among it
    /// ([`Leases::insert_claimed_after`](crate::store::Leases::insert_claimed_after)):
    /// how a turn starts from a view of its session kept up to `after`
    /// and brings it up to date in the same call to the store. The
    /// prompt's `Seq` and the messages, or `None` when another holder's
    /// lease is live: nothing is stored, read or delivered.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use kesoku_core::{Gateway, Message, MessageType, Role, Status};
    ///
    /// let gateway = Gateway::in_memory();
    /// let first = gateway.post(Message::new("s", Role::User, MessageType::Text, "Hi")).await.unwrap();
    /// // Stored since the view kept up to `first` (by another worker, say).
    /// gateway.post(Message::new("s", Role::Assistant, MessageType::Text, "Hello")).await.unwrap();
    /// let prompt = Message::new("s", Role::User, MessageType::Text, "Add 2 and 2")
    ///     .with_status(Status::Processing);
    /// let ttl = Duration::from_secs(10);
    /// let claimed = gateway
    ///     .post_claimed_after(prompt, "worker-1", ttl, first)
    ///     .await
    ///     .unwrap()
    ///     .expect("the session's lease was free");
    /// let texts: Vec<&str> = claimed.newer.iter().map(|(_, m)| m.content.as_str()).collect();
    /// assert_eq!(texts, ["Hello", "Add 2 and 2"]);
    /// assert_eq!(claimed.newer.last().unwrap().0, claimed.seq);
    /// # });
    /// ```
    pub async fn post_claimed_after(
        &self,
        message: Message,
        holder: &str,
        ttl: Duration,
        after: Seq,
    ) -> Result<Option<Claimed>, GatewayError> {
        let claimed = self
            .inner
            .store
            .insert_claimed_after(&message, holder, ttl, after)
            .await?;
        if let Some(claimed) = &claimed {
            self.deliver(claimed.seq, || message);
        }
        Ok(claimed)
    }

    /// [`post_claimed_after`](Self::post_claimed_after) for a caller that
    /// keeps `message`: it is copied only for the listeners, when there
    /// are any.
    pub async fn post_claimed_after_ref(
        &self,
        message: &Message,
        holder: &str,
        ttl: Duration,
        after: Seq,
    ) -> Result<Option<Claimed>, GatewayError> {
        let claimed = self
            .inner
            .store
            .insert_claimed_after(message, holder, ttl, after)
            .await?;
        if let Some(claimed) = &claimed {
            self.deliver(claimed.seq, || message.clone());
        }
        Ok(claimed)
    }

    /// Ends `holder`'s turn of `session_id` in one write: stores `posts`,
    /// sets the prompt's status to `to` if it is one of `from`, and
    /// releases the lease ([`Leases::finish_turn`](crate::store::Leases::finish_turn)),
    /// then delivers the posts. Only while `holder` holds the session:
    /// otherwise [`StoreError::LeaseLost`](crate::store::StoreError::LeaseLost) and nothing is delivered.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use kesoku_core::{Gateway, Message, MessageType, Role, Status};
    ///
    /// let gateway = Gateway::in_memory();
    /// let prompt = Message::new("s", Role::User, MessageType::Text, "Add 2 and 2")
    ///     .with_status(Status::Processing);
    /// gateway.post_claimed(prompt.clone(), "w1", Duration::from_secs(10)).await.unwrap();
    /// let answer = Message::new("s", Role::Assistant, MessageType::Text, "4");
    /// let from = [Status::Processing];
    /// gateway
    ///     .finish_turn("s", "w1", &[answer], &prompt.id, &from, Status::Processed)
    ///     .await
    ///     .unwrap();
    /// let history = gateway.history("s").await.unwrap();
    /// assert_eq!((history[0].status, history[1].content.as_str()), (Status::Processed, "4"));
    /// // The lease was released: another worker may take the session.
    /// assert!(gateway.store().lease("s", "w2", Duration::from_secs(10)).await.unwrap());
    /// # });
    /// ```
    pub async fn finish_turn(
        &self,
        session_id: &str,
        holder: &str,
        posts: &[Message],
        prompt: &str,
        from: &[Status],
        to: Status,
    ) -> Result<Vec<Seq>, GatewayError> {
        let seqs = self
            .inner
            .store
            .finish_turn(session_id, holder, posts, prompt, from, to)
            .await?;
        for (seq, message) in seqs.iter().zip(posts) {
            self.deliver(*seq, || message.clone());
        }
        Ok(seqs)
    }

    /// Delivers `delta` to the listeners of its session, now, without
    /// storing it, and through a store that relays deltas
    /// ([`DeltaRelay::publish_delta`](crate::store::DeltaRelay::publish_delta)) to other processes' listeners. Nobody
    /// listening is fine: the finished message is stored when it is done.
    pub fn publish(&self, delta: Delta) {
        if self.inner.relays {
            // The store hands it to this process's listeners too, on every
            // gateway over it.
            self.inner.store.publish_delta(&delta);
        } else if self.inner.deltas.receiver_count() > 0 {
            let _ = self.inner.deltas.send(Arc::new(delta));
        }
    }

    /// Whether anyone may listen to deltas (so a producer can skip making
    /// them): a listener here, or any process when the store relays them.
    pub fn has_delta_listeners(&self) -> bool {
        self.inner.relays || self.inner.deltas.receiver_count() > 0
    }

    /// The deltas published from now on, of `session` (every session when
    /// `None`), in the order each was published: through this gateway,
    /// or, when the store relays them ([`DeltaRelay::delta_feed`](crate::store::DeltaRelay::delta_feed)), through any
    /// gateway in any process sharing the database. A listener that falls
    /// far behind loses the oldest (the finished message is stored
    /// whatever happens to its deltas).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use futures_util::StreamExt;
    /// use kesoku_core::{Delta, DeltaKind, Gateway};
    ///
    /// let gateway = Gateway::in_memory();
    /// let mut deltas = gateway.deltas(Some("s"));
    /// gateway.publish(Delta::new("other", DeltaKind::Text("not this".into())));
    /// gateway.publish(Delta::new("s", DeltaKind::Text("Hel".into())));
    /// assert_eq!(deltas.next().await.unwrap().kind, DeltaKind::Text("Hel".into()));
    /// # });
    /// ```
    pub fn deltas(&self, session: Option<&str>) -> Deltas {
        let session: Option<Arc<str>> = session.map(Arc::from);
        let receiver = match self.inner.store.delta_feed() {
            Some(feed) if self.inner.relays => feed,
            _ => self.inner.deltas.subscribe(),
        };
        Deltas {
            inner: Box::pin(delta_stream(receiver, session)),
        }
    }

    /// Sets message `id`'s status to `to` if it is one of `from`, in one
    /// conditional update. `true` if this call changed it.
    pub async fn transition(
        &self,
        id: &str,
        from: &[Status],
        to: Status,
    ) -> Result<bool, GatewayError> {
        Ok(self.inner.store.transition(id, from, to).await?)
    }

    /// [`transition`](Self::transition), only while `holder` holds the
    /// lease of the message's session ([`Leases::transition_leased`](crate::store::Leases::transition_leased)).
    pub async fn transition_leased(
        &self,
        id: &str,
        from: &[Status],
        to: Status,
        holder: &str,
    ) -> Result<bool, GatewayError> {
        Ok(self
            .inner
            .store
            .transition_leased(id, from, to, holder)
            .await?)
    }

    /// Claims a `pending_agent` message for processing: `true` for exactly
    /// one of the claimants, in this process or any other sharing the store.
    pub async fn claim(&self, id: &str) -> Result<bool, GatewayError> {
        self.transition(id, &[Status::PendingAgent], Status::Processing)
            .await
    }

    /// A session's stored messages, in order.
    pub async fn history(&self, session_id: &str) -> Result<Vec<Message>, GatewayError> {
        Ok(self.inner.store.history(session_id).await?)
    }

    /// The stored messages that match `filter` (read now), then the live
    /// ones, in order, each once. The stream ends only when it is dropped;
    /// an error item means the store failed, and the stream goes on after
    /// it.
    pub async fn listen(&self, filter: Filter) -> Result<Listener, GatewayError> {
        // Subscribe before replaying: whatever is posted from now on is
        // either in the replay or arrives live, and its `Seq` says which.
        Listener::start(
            self.inner.live.subscribe(),
            Arc::clone(&self.inner.store),
            filter,
            self.inner.poll,
        )
        .await
    }
}

/// The deltas of `receiver` of `session` (all when `None`), in order.
fn delta_stream(
    receiver: broadcast::Receiver<Arc<Delta>>,
    session: Option<Arc<str>>,
) -> impl Stream<Item = Delta> + Send {
    futures_util::stream::unfold(receiver, move |mut receiver| {
        let session = session.clone();
        async move {
            loop {
                match receiver.recv().await {
                    Ok(delta) if session.as_deref().is_none_or(|s| s == delta.session_id) => {
                        return Some((Arc::unwrap_or_clone(delta), receiver));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
}

/// The stream [`Gateway::deltas`] returns.
pub struct Deltas {
    inner: Pin<Box<dyn Stream<Item = Delta> + Send>>,
}

impl fmt::Debug for Deltas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deltas").finish_non_exhaustive()
    }
}

impl Stream for Deltas {
    type Item = Delta;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// A tool's progress notes, posted as any message: stored, then relayed.
impl Progress for Gateway {
    fn post(&self, message: Message) -> ProgressFuture<'_> {
        Box::pin(async move {
            Gateway::post(self, message)
                .await
                .map(drop)
                .map_err(ProgressError::new)
        })
    }
}
