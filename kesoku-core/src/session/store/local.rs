//! [`LocalLeases`]: leases kept in this process's memory, over any
//! [`MessageLog`], for a store that serves one process.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{DeltaRelay, Leases, MessageLog, Page, Seq, SessionInfo, StoreError, StoreFuture};
use crate::session::message::{Message, Role, Status};

/// A [`MessageLog`] made a whole [`Store`](super::Store) for one process:
/// [`Leases`] kept in this process's memory, and the [`DeltaRelay`]'s
/// defaults (no relay between processes).
///
/// A store author writes the log alone (six methods) and wraps it; the
/// leased calls check the lease and write under one lock, so within the
/// process they are as exclusive as a database's conditional writes.
/// Leases do not outlive the process, and another process sharing the
/// log would not see them: a store shared by several processes
/// implements [`Leases`] in its database instead.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kesoku_core::store::{LocalLeases, MemoryStore, Store};
///
/// // Any log will do; MemoryStore stands in for one of your own here.
/// let store: Arc<dyn Store> = Arc::new(LocalLeases::new(MemoryStore::new()));
/// assert!(store.lease("s1", "worker-a", Duration::from_secs(30)).await.unwrap());
/// assert!(!store.lease("s1", "worker-b", Duration::from_secs(30)).await.unwrap());
/// # });
/// ```
pub struct LocalLeases<L> {
    log: L,
    /// Each session's lease: its holder and when it expires. Held across
    /// a leased call's check and its write to the log, so that no lease
    /// changes between them.
    leases: tokio::sync::Mutex<Table>,
}

/// Each session's lease: its holder and when it expires.
type Table = HashMap<String, (String, Instant)>;

/// Whether `holder` holds a live lease of `session` in `table`.
fn holds(table: &Table, session: &str, holder: &str) -> bool {
    table
        .get(session)
        .is_some_and(|(h, until)| h == holder && *until > Instant::now())
}

/// Whether anyone holds a live lease of `session` in `table`.
fn leased(table: &Table, session: &str) -> bool {
    table
        .get(session)
        .is_some_and(|(_, until)| *until > Instant::now())
}

impl<L: MessageLog> LocalLeases<L> {
    /// `log`, with leases kept in memory.
    pub fn new(log: L) -> Self {
        LocalLeases {
            log,
            leases: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The log it wraps.
    pub fn log(&self) -> &L {
        &self.log
    }
}

impl<L> std::fmt::Debug for LocalLeases<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLeases").finish_non_exhaustive()
    }
}

impl<L: MessageLog> MessageLog for LocalLeases<L> {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        self.log.insert(message)
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        self.log.get(id)
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        self.log.history(session_id)
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        self.log.history_after(session_id, seq)
    }

    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        self.log.history_page(session_id, page)
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.log.after(seq, limit)
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.log.with_status(status)
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        self.log.transition(id, from, to)
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        self.log.sessions()
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        self.log.last_seq()
    }
}

impl<L: MessageLog> Leases for LocalLeases<L> {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        Box::pin(async move {
            let table = self.leases.lock().await;
            if !holds(&table, &message.session_id, holder) {
                return Err(StoreError::LeaseLost {
                    id: message.id.clone(),
                    session: message.session_id.clone(),
                    holder: holder.to_owned(),
                });
            }
            self.log.insert(message).await
        })
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let table = self.leases.lock().await;
            let Some(message) = self.log.get(id).await? else {
                return Ok(false);
            };
            if !holds(&table, &message.session_id, holder) {
                return Err(StoreError::LeaseLost {
                    id: id.to_owned(),
                    session: message.session_id,
                    holder: holder.to_owned(),
                });
            }
            self.log.transition(id, from, to).await
        })
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut leases = self.leases.lock().await;
            let now = Instant::now();
            let free = leases
                .get(session_id)
                .is_none_or(|(h, until)| h == holder || *until <= now);
            if free {
                leases.insert(session_id.to_owned(), (holder.to_owned(), now + ttl));
            }
            Ok(free)
        })
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut leases = self.leases.lock().await;
            let now = Instant::now();
            match leases.get_mut(session_id) {
                Some((h, until)) if h == holder && *until > now => {
                    *until = now + ttl;
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut leases = self.leases.lock().await;
            let held = leases.get(session_id).is_some_and(|(h, _)| h == holder);
            if held {
                leases.remove(session_id);
            }
            Ok(held)
        })
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        Box::pin(async move {
            let mut table = self.leases.lock().await;
            let pending = self.log.with_status(Status::PendingAgent).await?;
            let processing = self.log.with_status(Status::Processing).await?;
            // The oldest waiting (or running) user prompt of each session:
            // only that one may be taken.
            let mut oldest: HashMap<&str, Seq> = HashMap::new();
            for (seq, m) in pending.iter().chain(&processing) {
                if m.role == Role::User {
                    let first = oldest.entry(m.session_id.as_str()).or_insert(*seq);
                    *first = (*first).min(*seq);
                }
            }
            for (seq, m) in &pending {
                let first = oldest.get(m.session_id.as_str()) == Some(seq);
                if m.role != Role::User || !first || leased(&table, &m.session_id) {
                    continue;
                }
                if self
                    .log
                    .transition(&m.id, &[Status::PendingAgent], Status::Processing)
                    .await?
                {
                    table.insert(
                        m.session_id.clone(),
                        (holder.to_owned(), Instant::now() + ttl),
                    );
                    let mut taken = m.clone();
                    taken.status = Status::Processing;
                    return Ok(Some((*seq, taken)));
                }
            }
            Ok(None)
        })
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { Ok(self.leases.lock().await.remove(session_id).is_some()) })
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        Box::pin(async move {
            let table = self.leases.lock().await;
            let mut requeued = Vec::new();
            for (seq, mut m) in self.log.with_status(Status::Processing).await? {
                if m.role != Role::User || leased(&table, &m.session_id) {
                    continue;
                }
                if self
                    .log
                    .transition(&m.id, &[Status::Processing], Status::PendingAgent)
                    .await?
                {
                    m.status = Status::PendingAgent;
                    requeued.push((seq, m));
                }
            }
            Ok(requeued)
        })
    }
}

impl<L: MessageLog> DeltaRelay for LocalLeases<L> {}
