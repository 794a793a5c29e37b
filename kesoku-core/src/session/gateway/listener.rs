//! [`Listener`]: the stream [`Gateway::listen`](super::Gateway::listen)
//! returns. The stored matches first, then live ones, with no gap and no
//! duplicate between them; a listener that falls behind, or hears of
//! messages another process posted, reads them from the store.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::broadcast;

use super::error::GatewayError;
use super::filter::Filter;
use crate::session::message::Message;
use crate::session::store::{Announced, Seq, Store, StoreError};

/// How many messages one catch-up read takes from the store.
const PAGE: usize = 512;
/// How often a listener reads a store that announces its changes anyway.
const ANNOUNCED_POLL: Duration = Duration::from_secs(5);

/// A message a listener receives, with its place in the store's order
/// (to resume from, with [`Filter::after`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Delivery {
    /// The message's [`Seq`].
    pub seq: Seq,
    /// The message, as it was posted (live) or as it is stored (replay).
    pub message: Message,
}

/// The stream [`Gateway::listen`](super::Gateway::listen) returns.
pub struct Listener {
    inner: Pin<Box<dyn Stream<Item = Result<Delivery, GatewayError>> + Send>>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}

impl Listener {
    /// A listener over `live` and `store`, its replay read: subscribed
    /// first, so that every message is either in the replay or arrives
    /// live, and its `Seq` says which.
    pub(super) async fn start(
        live: broadcast::Receiver<(Seq, Arc<Message>)>,
        store: Arc<dyn Store>,
        filter: Filter,
        poll: Duration,
    ) -> Result<Listener, GatewayError> {
        let changes = store.changes();
        let mut state = Listening {
            live,
            store,
            filter,
            seen: 0,
            seen_above: BTreeSet::new(),
            ready: VecDeque::new(),
            // A store that announces changes is read on its word; the
            // timer is only a safety net then.
            poll: tokio::time::interval(if changes.is_some() {
                poll.max(ANNOUNCED_POLL)
            } else {
                poll
            }),
            changes,
        };
        state.replay().await?;
        Ok(Listener {
            inner: Box::pin(futures_util::stream::unfold(state, Listening::next)),
        })
    }
}

impl Stream for Listener {
    type Item = Result<Delivery, GatewayError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct Listening {
    live: broadcast::Receiver<(Seq, Arc<Message>)>,
    store: Arc<dyn Store>,
    filter: Filter,
    /// Every message up to this `Seq` was delivered or filtered out.
    seen: Seq,
    /// The live messages above `seen` that were delivered or filtered out.
    /// Live messages arrive out of `Seq` order (two posts race between
    /// their insert and their send, or another process posted in between),
    /// so one with a larger `Seq` says nothing about those below it: only
    /// a read of the store moves `seen`.
    seen_above: BTreeSet<Seq>,
    ready: VecDeque<Delivery>,
    /// The store's announcements, if it makes them.
    changes: Option<broadcast::Receiver<Announced>>,
    poll: tokio::time::Interval,
}

impl Listening {
    async fn next(mut self) -> Option<(Result<Delivery, GatewayError>, Self)> {
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some((Ok(message), self));
            }
            tokio::select! {
                biased;
                live = self.live.recv() => match live {
                    Ok((seq, message)) => self.take(seq, Arc::unwrap_or_clone(message)),
                    // Fell behind the live channel: what was missed is in
                    // the store.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if let Err(e) = self.catch_up().await {
                            return Some((Err(e.into()), self));
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                // Messages other processes posted reach this one's store
                // only: as it announces them, or as the timer finds them.
                news = announced(&mut self.changes) => {
                    let read = match news {
                        Some(news) => self.hear(news).await,
                        // Fell behind the announcements.
                        None => self.catch_up().await,
                    };
                    if let Err(e) = read {
                        return Some((Err(e.into()), self));
                    }
                }
                _ = self.poll.tick() => {
                    if let Err(e) = self.catch_up().await {
                        return Some((Err(e.into()), self));
                    }
                }
            }
        }
    }

    /// What is stored now, up to a `Seq` read first; everything after it is
    /// left to the live part.
    async fn replay(&mut self) -> Result<(), StoreError> {
        let upto = self.store.last_seq().await?;
        let found = match (self.filter.after, self.filter.status) {
            (Some(after), _) => read_after(&*self.store, after, upto).await?,
            (None, Some(status)) => self.store.with_status(status).await?,
            (None, None) => Vec::new(),
        };
        for (seq, message) in found {
            if seq <= upto && self.filter.matches(&message) {
                self.ready.push_back(Delivery { seq, message });
            }
        }
        self.seen = upto;
        Ok(())
    }

    /// Everything stored after what was seen. A store's messages become
    /// visible in `Seq` order, so after this read nothing at or below
    /// `upto` can still arrive.
    async fn catch_up(&mut self) -> Result<(), StoreError> {
        let upto = self.store.last_seq().await?;
        for (seq, message) in read_after(&*self.store, self.seen, upto).await? {
            self.take(seq, message);
        }
        self.seen = self.seen.max(upto);
        self.seen_above = self.seen_above.split_off(&(self.seen + 1));
        Ok(())
    }

    /// Takes in what the store announced, `news` and whatever else is
    /// waiting in the channel: nothing to do for messages seen already, or
    /// ones the filter rejects by their header; for the rest, one read of
    /// the store up to the last of them. (Under load, one read then
    /// serves many announcements.)
    async fn hear(&mut self, news: Announced) -> Result<(), StoreError> {
        let mut wanted = None;
        let mut next = Some(news);
        while let Some(news) = next.take() {
            if news.seq > self.seen && !self.seen_above.contains(&news.seq) {
                match &news.header {
                    Some(header) if !self.filter.admits(header) => {
                        self.seen_above.insert(news.seq);
                    }
                    _ => wanted = wanted.max(Some(news.seq)),
                }
            }
            next = match self.changes.as_mut().map(broadcast::Receiver::try_recv) {
                Some(Ok(news)) => Some(news),
                // Fell behind: what was missed is in the store.
                Some(Err(broadcast::error::TryRecvError::Lagged(_))) => {
                    return self.catch_up().await;
                }
                _ => None,
            };
        }
        self.advance();
        let Some(upto) = wanted else { return Ok(()) };
        // Everything up to `upto` is stored: one read, no `last_seq`.
        for (seq, message) in read_after(&*self.store, self.seen, upto).await? {
            self.take(seq, message);
        }
        self.seen = self.seen.max(upto);
        self.seen_above = self.seen_above.split_off(&(self.seen + 1));
        Ok(())
    }

    /// Moves `seen` over the seqs just above it that were seen.
    fn advance(&mut self) {
        while self.seen_above.first() == Some(&(self.seen + 1)) {
            self.seen_above.pop_first();
            self.seen += 1;
        }
    }

    /// Queues `message` unless it was seen already or the filter rejects it.
    fn take(&mut self, seq: Seq, message: Message) {
        if seq > self.seen && self.seen_above.insert(seq) {
            if self.filter.matches(&message) {
                self.ready.push_back(Delivery { seq, message });
            }
            self.advance();
        }
    }
}

/// The next announcement of the store (`None`: this listener fell behind
/// them); never, for a store that does not announce (or stopped).
async fn announced(changes: &mut Option<broadcast::Receiver<Announced>>) -> Option<Announced> {
    if let Some(rx) = changes {
        match rx.recv().await {
            Ok(news) => return Some(news),
            Err(broadcast::error::RecvError::Lagged(_)) => return None,
            Err(broadcast::error::RecvError::Closed) => *changes = None,
        }
    }
    std::future::pending().await
}

/// The messages stored after `from`, up to `upto`, page by page.
async fn read_after(
    store: &dyn Store,
    mut from: Seq,
    upto: Seq,
) -> Result<Vec<(Seq, Message)>, StoreError> {
    let mut out = Vec::new();
    while from < upto {
        let page = store.after(from, PAGE).await?;
        let Some(&(last, _)) = page.last() else { break };
        from = last;
        out.extend(page.into_iter().filter(|(seq, _)| *seq <= upto));
    }
    Ok(out)
}
