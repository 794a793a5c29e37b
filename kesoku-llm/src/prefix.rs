//! [`Prefixes`]: each session's history as already encoded for one
//! backend, so that a request encodes only what is new since the last one.
//!
//! An agent sends a session's whole history on every step, and the history
//! only grows. A wire message, once the next one has started, never changes
//! (see [`WireHistory`](crate::wire::WireHistory)): the backend keeps every
//! wire message but the last as JSON text, with what is needed to check
//! that the next request starts with the same messages and to go on from
//! there. Building a request then costs the new messages plus one copy of
//! the kept text, instead of a walk, a JSON tree and a serialization of the
//! whole history.
//!
//! The store is the truth and this is only a cache: a request whose
//! messages do not start with the kept ones (another history, an edited
//! one, other tools or instructions) is encoded from scratch, and replaces
//! it. It holds a bounded number of bytes; the sessions used least
//! recently are dropped first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kesoku_core::{Message, MessageType};

use crate::fallback::ContentFallback;
use crate::history::Item;
use crate::schemas::LoweredTools;
use kesoku_core::{SessionCache, Weigh};

/// What one session's requests start with.
#[derive(Debug)]
pub(crate) struct Prefix {
    /// The tools it was encoded with (their wire names are in it).
    lowered: Arc<LoweredTools>,
    /// The options' instructions it was encoded with.
    system: Option<String>,
    /// Each message it covers, in order, to recognize them.
    marks: Vec<Mark>,
    /// Its wire messages, as JSON joined by commas.
    pub(crate) json: Vec<u8>,
    /// The system texts the format sends apart, in order.
    pub(crate) system_texts: Vec<String>,
    /// The blocks it sent as text notes.
    pub(crate) fallbacks: Vec<ContentFallback>,
    /// Call message id → its index in the messages: a later result pairs
    /// with it.
    pub(crate) calls: HashMap<String, usize>,
    /// The call message ids its results name but that it does not hold: a
    /// later call with one of them would change how that result reads, so
    /// the prefix no longer holds.
    unpaired: HashSet<String>,
}

/// A message, recognized by its id and the size of what is sent of it
/// (ids are unique, and a stored message never changes but for its
/// status, which is not sent).
#[derive(Debug, PartialEq, Eq)]
struct Mark {
    id: String,
    content: usize,
    metadata: usize,
}

impl Mark {
    fn of(m: &Message) -> Self {
        Mark {
            id: m.id.clone(),
            content: m.content.len(),
            metadata: m.metadata.len(),
        }
    }

    fn matches(&self, m: &Message) -> bool {
        self.id == m.id && self.content == m.content.len() && self.metadata == m.metadata.len()
    }
}

impl Prefix {
    /// An empty prefix for requests with these tools and instructions.
    pub(crate) fn new(lowered: Arc<LoweredTools>, system: Option<&str>) -> Self {
        Prefix {
            lowered,
            system: system.map(str::to_owned),
            marks: Vec::new(),
            json: Vec::new(),
            system_texts: Vec::new(),
            fallbacks: Vec::new(),
            calls: HashMap::new(),
            unpaired: HashSet::new(),
        }
    }

    /// How many messages it covers: a request encodes the ones after.
    pub(crate) fn len(&self) -> usize {
        self.marks.len()
    }

    /// Whether a request of `messages` with these tools and instructions
    /// starts with it.
    fn starts(
        &self,
        lowered: &Arc<LoweredTools>,
        system: Option<&str>,
        messages: &[Message],
    ) -> bool {
        Arc::ptr_eq(&self.lowered, lowered)
            && self.system.as_deref() == system
            && self.marks.len() <= messages.len()
            && self.marks.iter().zip(messages).all(|(k, m)| k.matches(m))
            && (self.unpaired.is_empty()
                || !messages[self.marks.len()..]
                    .iter()
                    .any(|m| m.kind == MessageType::ToolCall && self.unpaired.contains(&m.id)))
    }

    /// Takes in `messages` (the ones after those it covers), whose wire
    /// messages are `json` (joined by commas, or empty when they produced
    /// none), with these system texts and fallbacks. `unpaired` are the
    /// call ids their results name but found no call for.
    pub(crate) fn extend<'a>(
        &mut self,
        messages: &[Message],
        json: &[u8],
        system_texts: impl IntoIterator<Item = &'a str>,
        fallbacks: impl IntoIterator<Item = ContentFallback>,
        unpaired: impl IntoIterator<Item = &'a str>,
    ) {
        let start = self.marks.len();
        for (j, m) in messages.iter().enumerate() {
            if m.kind == MessageType::ToolCall {
                self.calls.entry(m.id.clone()).or_insert(start + j);
            }
            self.marks.push(Mark::of(m));
        }
        if !json.is_empty() {
            if !self.json.is_empty() {
                self.json.push(b',');
            }
            self.json.extend_from_slice(json);
        }
        self.system_texts
            .extend(system_texts.into_iter().map(str::to_owned));
        self.fallbacks.extend(fallbacks);
        self.unpaired
            .extend(unpaired.into_iter().map(str::to_owned));
    }
}

/// The prefixes of the sessions a backend served lately.
#[derive(Debug)]
pub(crate) struct Prefixes {
    kept: SessionCache<Prefix>,
}

/// How many bytes the prefixes of one backend may hold in all.
const BUDGET: usize = 64 << 20;

impl Default for Prefixes {
    fn default() -> Self {
        Prefixes {
            kept: SessionCache::new(BUDGET),
        }
    }
}

impl Weigh for Prefix {
    /// The bytes it holds.
    fn weight(&self) -> usize {
        self.json.len() + self.marks.len() * (std::mem::size_of::<Mark>() + 40)
    }
}

impl Prefixes {
    /// Takes out the prefix of `session` if a request of `messages` with
    /// these tools and instructions starts with it. It is out while the
    /// request is encoded (a concurrent request of the same session encodes
    /// from scratch); [`put`](Self::put) brings it back.
    pub(crate) fn take(
        &self,
        session: &str,
        lowered: &Arc<LoweredTools>,
        system: Option<&str>,
        messages: &[Message],
    ) -> Option<Prefix> {
        let prefix = self.kept.take(session)?;
        prefix.starts(lowered, system, messages).then_some(prefix)
    }

    /// Keeps `prefix` as `session`'s, dropping the least recently used
    /// ones while the total is over budget.
    pub(crate) fn put(&self, session: &str, prefix: Prefix) {
        self.kept.put(session, prefix);
    }
}

/// How many of a request's wire messages a prefix keeps, and the item
/// where the first one it leaves starts: every wire message but the last
/// (which the next messages may still add to), and none that ends on an
/// assistant's item, which a later assistant item may join once what
/// stands between them is gone (a rewind). An item a format sends as
/// several wire messages (OpenAI Responses: a call after its reasoning)
/// is cut only before its first.
pub(crate) fn keep_until<M>(messages: &[(usize, M)], items: &[Item<'_>]) -> Option<(usize, usize)> {
    (1..messages.len()).rev().find_map(|k| {
        let cut = messages[k].0;
        if messages[k - 1].0 == cut {
            return None;
        }
        let joinable = matches!(
            items.get(cut.wrapping_sub(1)),
            Some(Item::AssistantText(_) | Item::ToolCall(_))
        );
        (cut > 0 && !joinable).then_some((k, cut))
    })
}

/// Whether a result among `items` pairs with a call that comes after it
/// (a result stored before its call): its encoding then depends on later
/// messages, so a prefix must not keep it (a rewound history without that
/// call encodes it unpaired).
pub(crate) fn pairs_forward(items: &[Item<'_>], kept: Option<&Prefix>) -> bool {
    let mut seen: HashSet<&str> = HashSet::new();
    for item in items {
        match item {
            Item::ToolCall(c) => {
                seen.insert(c.message.id.as_str());
            }
            Item::ToolResult(r) => {
                if let Some(c) = &r.call {
                    let id = c.message.id.as_str();
                    let earlier = kept.is_some_and(|p| p.calls.contains_key(id));
                    if !seen.contains(id) && !earlier {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// The call a result names (by `parent_id`) but that was not found.
pub(crate) fn unpaired_parent<'a>(item: &Item<'a>) -> Option<&'a str> {
    match item {
        Item::ToolResult(r) if r.call.is_none() => r.message.parent_id.as_deref(),
        _ => None,
    }
}
