//! [`MemoryStore`]: the [`Store`] in this process's memory.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{
    Claimed, DeltaRelay, Leases, MessageLog, Page, Seq, SessionInfo, StoreError, StoreFuture,
    title_of,
};
use crate::session::message::{Message, Role, Status};

/// A [`Store`](super::Store) in memory: the default of an agent without one, and for
/// tests. Lost when the process ends.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use kesoku_core::{Message, MessageType, Role, Status};
/// use kesoku_core::store::{MemoryStore, MessageLog};
///
/// let store = MemoryStore::new();
/// let prompt = Message::new("s1", Role::User, MessageType::Text, "Add 2 and 3")
///     .with_status(Status::PendingAgent);
/// store.insert(&prompt).await.unwrap();
/// let claim = [Status::PendingAgent];
/// assert!(store.transition(&prompt.id, &claim, Status::Processing).await.unwrap());
/// assert!(!store.transition(&prompt.id, &claim, Status::Processing).await.unwrap());
/// assert_eq!(store.history("s1").await.unwrap()[0].status, Status::Processing);
/// # });
/// ```
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    /// Every message, in `Seq` order: entry `i` has `Seq` `i + 1`.
    log: Vec<Message>,
    /// Message id → index in `log`.
    by_id: HashMap<IdKey, usize>,
    /// Session id → the indexes of its messages, in order.
    by_session: HashMap<String, Vec<usize>>,
    sessions: HashMap<String, SessionInfo>,
    /// Session id → its lease.
    leases: LeaseTable,
}

/// A message id as `by_id` keys it: inline up to [`IdKey::INLINE`] bytes
/// (a UUID takes 36), so indexing a message allocates nothing. Looked up
/// by the id's bytes.
#[derive(Clone)]
enum IdKey {
    Inline { len: u8, bytes: [u8; IdKey::INLINE] },
    Heap(Box<[u8]>),
}

impl IdKey {
    const INLINE: usize = 40;

    fn new(id: &str) -> Self {
        let id = id.as_bytes();
        match u8::try_from(id.len()) {
            Ok(len) if id.len() <= Self::INLINE => {
                let mut bytes = [0; Self::INLINE];
                bytes[..id.len()].copy_from_slice(id);
                IdKey::Inline { len, bytes }
            }
            _ => IdKey::Heap(id.into()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            IdKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            IdKey::Heap(bytes) => bytes,
        }
    }
}

impl std::borrow::Borrow<[u8]> for IdKey {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

// Hashed and compared as its bytes, as `Borrow` requires.
impl std::hash::Hash for IdKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

impl PartialEq for IdKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for IdKey {}

/// Session id → its lease: its holder, and when it expires. A released
/// lease's entry stays, marked, so that the session's next lease (its
/// next turn's) reuses its key and its holder's text rather than
/// allocating them again.
#[derive(Default)]
struct LeaseTable(HashMap<String, Lease>);

struct Lease {
    holder: String,
    until: Instant,
    released: bool,
}

impl LeaseTable {
    /// The lease of `session`, live or expired (not released): its holder
    /// and when it expires.
    fn get(&self, session: &str) -> Option<(&str, Instant)> {
        self.0
            .get(session)
            .filter(|lease| !lease.released)
            .map(|lease| (lease.holder.as_str(), lease.until))
    }

    /// Whether `holder` holds a live lease of `session` at `now`.
    fn holds(&self, session: &str, holder: &str, now: Instant) -> bool {
        self.get(session)
            .is_some_and(|(h, until)| h == holder && until > now)
    }

    /// Whether anyone holds a live lease of `session` at `now`.
    fn live(&self, session: &str, now: Instant) -> bool {
        self.get(session).is_some_and(|(_, until)| until > now)
    }

    /// Whether `holder` may take the lease of `session` at `now`: no one
    /// holds it, it expired, or it is `holder`'s.
    fn free_for(&self, session: &str, holder: &str, now: Instant) -> bool {
        self.get(session)
            .is_none_or(|(h, until)| h == holder || until <= now)
    }

    /// Leases `session` to `holder` until `until`.
    fn insert(&mut self, session: &str, holder: &str, until: Instant) {
        if let Some(lease) = self.0.get_mut(session) {
            holder.clone_into(&mut lease.holder);
            lease.until = until;
            lease.released = false;
        } else {
            let lease = Lease {
                holder: holder.to_owned(),
                until,
                released: false,
            };
            self.0.insert(session.to_owned(), lease);
        }
    }

    /// Extends `holder`'s live lease of `session` to `until`; whether it
    /// was one.
    fn renew(&mut self, session: &str, holder: &str, now: Instant, until: Instant) -> bool {
        match self.0.get_mut(session) {
            Some(lease) if !lease.released && lease.holder == holder && lease.until > now => {
                lease.until = until;
                true
            }
            _ => false,
        }
    }

    /// Releases the lease of `session`; whether there was one.
    fn remove(&mut self, session: &str) -> bool {
        match self.0.get_mut(session) {
            Some(lease) if !lease.released => {
                lease.released = true;
                true
            }
            _ => false,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        // A panic elsewhere cannot leave `Memory` half-written: every
        // change below is a few pushes after all checks.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("messages", &self.lock().log.len())
            .finish()
    }
}

/// `Seq` of the entry at `index`.
fn seq_of(index: usize) -> Seq {
    Seq::try_from(index).map_or(Seq::MAX, |i| i + 1)
}

impl MemoryStore {
    /// The messages of `session_id` after `seq`, in order.
    fn history_after_locked(m: &Memory, session_id: &str, seq: Seq) -> Vec<(Seq, Message)> {
        m.by_session
            .get(session_id)
            .map(|ix| {
                // Indexes ascend, so those after `seq` are a suffix.
                let from = ix.partition_point(|&i| seq_of(i) <= seq);
                ix[from..]
                    .iter()
                    .map(|&i| (seq_of(i), m.log[i].clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`Leases::insert_claimed`] under the lock.
    fn insert_claimed_locked(
        m: &mut Memory,
        message: &Message,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Seq>, StoreError> {
        let now = Instant::now();
        if !m.leases.free_for(&message.session_id, holder, now) {
            Ok(None)
        } else if m.by_id.contains_key(message.id.as_bytes()) {
            // Checked first: a refused insert takes no lease.
            Err(StoreError::Duplicate {
                id: message.id.clone(),
            })
        } else {
            m.leases.insert(&message.session_id, holder, now + ttl);
            Self::insert_locked(m, message).map(Some)
        }
    }

    /// Inserts `message` under the lock already taken.
    fn insert_locked(m: &mut Memory, message: &Message) -> Result<Seq, StoreError> {
        if m.by_id.contains_key(message.id.as_bytes()) {
            Err(StoreError::Duplicate {
                id: message.id.clone(),
            })
        } else {
            let index = m.log.len();
            m.log.push(message.clone());
            m.by_id.insert(IdKey::new(&message.id), index);
            // A known session (the usual case) costs no key copy.
            match m.by_session.get_mut(&message.session_id) {
                Some(indexes) => indexes.push(index),
                None => {
                    m.by_session.insert(message.session_id.clone(), vec![index]);
                }
            }
            let count = |session: &mut SessionInfo| {
                if session.title.is_none() {
                    session.title = title_of(message);
                }
                session.updated = message.timestamp.max(session.updated);
                session.messages += 1;
            };
            if let Some(session) = m.sessions.get_mut(&message.session_id) {
                count(session);
            } else {
                let mut session = SessionInfo::new(&message.session_id, message.timestamp);
                count(&mut session);
                m.sessions.insert(message.session_id.clone(), session);
            }
            Ok(seq_of(index))
        }
    }
}

impl MessageLog for MemoryStore {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        let result = Self::insert_locked(&mut self.lock(), message);
        Box::pin(std::future::ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        let m = self.lock();
        let found = m.by_id.get(id.as_bytes()).map(|&i| m.log[i].clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        let m = self.lock();
        let messages = m
            .by_session
            .get(session_id)
            .map(|ix| ix.iter().map(|&i| m.log[i].clone()).collect())
            .unwrap_or_default();
        Box::pin(std::future::ready(Ok(messages)))
    }

    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        let m = self.lock();
        let found = m.by_session.get(session_id).map_or_else(Vec::new, |ix| {
            // Indexes ascend: the bounds are a slice, the page a part of it.
            let from = ix.partition_point(|&i| seq_of(i) <= page.after);
            let to = ix.partition_point(|&i| seq_of(i) < page.before);
            let ix = &ix[from..to.max(from)];
            ix[page.within(ix.len())]
                .iter()
                .map(|&i| (seq_of(i), m.log[i].clone()))
                .collect()
        });
        Box::pin(std::future::ready(Ok(found)))
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        let found = Self::history_after_locked(&self.lock(), session_id, seq);
        Box::pin(std::future::ready(Ok(found)))
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let m = self.lock();
        let start = usize::try_from(seq.max(0)).unwrap_or(usize::MAX);
        let found = m
            .log
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, msg)| (seq_of(i), msg.clone()))
            .collect();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let m = self.lock();
        let found = m
            .log
            .iter()
            .enumerate()
            .filter(|(_, msg)| msg.status == status)
            .map(|(i, msg)| (seq_of(i), msg.clone()))
            .collect();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        let mut m = self.lock();
        let changed = match m.by_id.get(id.as_bytes()).copied() {
            Some(i) if from.contains(&m.log[i].status) => {
                m.log[i].status = to;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(changed)))
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        let m = self.lock();
        let mut sessions: Vec<SessionInfo> = m.sessions.values().cloned().collect();
        sessions.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
        Box::pin(std::future::ready(Ok(sessions)))
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        let len = self.lock().log.len();
        Box::pin(std::future::ready(Ok(seq_of(len) - 1)))
    }
}

impl Leases for MemoryStore {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        let mut m = self.lock();
        let held = m.leases.holds(&message.session_id, holder, Instant::now());
        let result = if held {
            Self::insert_locked(&mut m, message)
        } else {
            Err(StoreError::LeaseLost {
                id: message.id.clone(),
                session: message.session_id.clone(),
                holder: holder.to_owned(),
            })
        };
        Box::pin(std::future::ready(result))
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        let mut m = self.lock();
        let Some(i) = m.by_id.get(id.as_bytes()).copied() else {
            return Box::pin(std::future::ready(Ok(false)));
        };
        let session = &m.log[i].session_id;
        let held = m.leases.holds(session, holder, Instant::now());
        let result = if !held {
            Err(StoreError::LeaseLost {
                id: id.to_owned(),
                session: session.clone(),
                holder: holder.to_owned(),
            })
        } else if from.contains(&m.log[i].status) {
            m.log[i].status = to;
            Ok(true)
        } else {
            Ok(false)
        };
        Box::pin(std::future::ready(result))
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let mut m = self.lock();
        let now = Instant::now();
        let free = m.leases.free_for(session_id, holder, now);
        if free {
            m.leases.insert(session_id, holder, now + ttl);
        }
        Box::pin(std::future::ready(Ok(free)))
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let mut m = self.lock();
        let now = Instant::now();
        let renewed = m.leases.renew(session_id, holder, now, now + ttl);
        Box::pin(std::future::ready(Ok(renewed)))
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        let mut m = self.lock();
        let held = m.leases.get(session_id).is_some_and(|(h, _)| h == holder);
        if held {
            m.leases.remove(session_id);
        }
        Box::pin(std::future::ready(Ok(held)))
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        let mut m = self.lock();
        let now = Instant::now();
        let Memory { log, leases, .. } = &mut *m;
        // Sessions with an older prompt pending come first, or are leased.
        let mut passed = std::collections::HashSet::new();
        let mut found = None;
        for (i, msg) in log.iter_mut().enumerate() {
            if msg.role != Role::User {
                continue;
            }
            if msg.status == Status::Processing {
                // Left by a dead worker: it goes first, once requeued.
                passed.insert(msg.session_id.clone());
                continue;
            }
            if msg.status != Status::PendingAgent {
                continue;
            }
            let leased = leases.live(&msg.session_id, now);
            if !leased && !passed.contains(msg.session_id.as_str()) {
                msg.status = Status::Processing;
                leases.insert(&msg.session_id, holder, now + ttl);
                found = Some((seq_of(i), msg.clone()));
                break;
            }
            passed.insert(msg.session_id.clone());
        }
        Box::pin(std::future::ready(Ok(found)))
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        let broken = self.lock().leases.remove(session_id);
        Box::pin(std::future::ready(Ok(broken)))
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let mut m = self.lock();
        let now = Instant::now();
        let Memory { log, leases, .. } = &mut *m;
        let mut found = Vec::new();
        for (i, msg) in log.iter_mut().enumerate() {
            let live = || leases.live(&msg.session_id, now);
            if msg.status == Status::Processing && msg.role == Role::User && !live() {
                msg.status = Status::PendingAgent;
                found.push((seq_of(i), msg.clone()));
            }
        }
        Box::pin(std::future::ready(Ok(found)))
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        let result = Self::insert_claimed_locked(&mut self.lock(), message, holder, ttl);
        Box::pin(std::future::ready(result))
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        let mut m = self.lock();
        let result = Self::insert_claimed_locked(&mut m, message, holder, ttl).map(|stored| {
            stored.map(|seq| {
                Claimed::new(
                    seq,
                    Self::history_after_locked(&m, &message.session_id, after),
                )
            })
        });
        Box::pin(std::future::ready(result))
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
        let mut m = self.lock();
        let result = Self::finish_locked(&mut m, session_id, holder, posts, prompt, from, to);
        Box::pin(std::future::ready(result))
    }
}

impl MemoryStore {
    /// [`Leases::finish_turn`] under the lock: every check before any
    /// change, so a refusal writes nothing.
    fn finish_locked(
        m: &mut Memory,
        session_id: &str,
        holder: &str,
        posts: &[Message],
        prompt: &str,
        from: &[Status],
        to: Status,
    ) -> Result<Vec<Seq>, StoreError> {
        let now = Instant::now();
        let held = |m: &Memory, session: &str| m.leases.holds(session, holder, now);
        if !held(m, session_id) {
            return Err(StoreError::LeaseLost {
                id: prompt.to_owned(),
                session: session_id.to_owned(),
                holder: holder.to_owned(),
            });
        }
        for (i, message) in posts.iter().enumerate() {
            if !held(m, &message.session_id) {
                return Err(StoreError::LeaseLost {
                    id: message.id.clone(),
                    session: message.session_id.clone(),
                    holder: holder.to_owned(),
                });
            }
            // A turn's last write holds a few posts: no set of their ids.
            let twice = posts[..i].iter().any(|p| p.id == message.id);
            if twice || m.by_id.contains_key(message.id.as_bytes()) {
                return Err(StoreError::Duplicate {
                    id: message.id.clone(),
                });
            }
        }
        let prompt_at = m.by_id.get(prompt.as_bytes()).copied();
        if let Some(i) = prompt_at
            && !held(m, &m.log[i].session_id)
        {
            return Err(StoreError::LeaseLost {
                id: prompt.to_owned(),
                session: m.log[i].session_id.clone(),
                holder: holder.to_owned(),
            });
        }
        let mut seqs = Vec::with_capacity(posts.len());
        for message in posts {
            seqs.push(Self::insert_locked(m, message)?);
        }
        if let Some(i) = prompt_at
            && from.contains(&m.log[i].status)
        {
            m.log[i].status = to;
        }
        if m.leases.get(session_id).is_some_and(|(h, _)| h == holder) {
            m.leases.remove(session_id);
        }
        Ok(seqs)
    }
}

impl DeltaRelay for MemoryStore {}
