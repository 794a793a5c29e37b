//! What is kept per session between requests, bounded by a total weight:
//! when over it, the entries put back least recently are dropped first.
//! The backends keep each session's encoded history in one, the agent
//! each session's view.

use std::sync::{Mutex, MutexGuard, PoisonError};

use hashlink::LinkedHashMap;

/// What an entry of a [`SessionCache`] weighs against its budget, in any
/// unit the cache's user chooses (bytes, messages).
pub trait Weigh {
    /// The entry's weight.
    fn weight(&self) -> usize;
}

/// Entries by session id, bounded by a total weight: when over it, the
/// entries put back least recently are dropped first.
///
/// An entry is taken out while it is used (a concurrent user of the same
/// session goes without, and rebuilds what it needs) and put back after,
/// so the lock is held only for a map operation. Taking, putting and
/// dropping the oldest are O(1), so a server with many sessions pays no
/// scan per request.
///
/// ```
/// use kesoku_core::{SessionCache, Weigh};
///
/// struct Encoded(Vec<u8>);
/// impl Weigh for Encoded {
///     fn weight(&self) -> usize {
///         self.0.len()
///     }
/// }
///
/// let cache = SessionCache::new(8);
/// cache.put("a", Encoded(vec![0; 5]));
/// cache.put("b", Encoded(vec![0; 5])); // over budget: `a` goes
/// assert!(cache.take("a").is_none());
/// assert_eq!(cache.take("b").unwrap().0.len(), 5);
/// assert_eq!(cache.weight(), 0); // taken out while in use
/// ```
#[derive(Debug)]
pub struct SessionCache<V> {
    budget: usize,
    inner: Mutex<Entries<V>>,
}

#[derive(Debug)]
struct Entries<V> {
    by_session: LinkedHashMap<String, V>,
    /// The sum of their weights.
    weight: usize,
}

impl<V: Weigh> SessionCache<V> {
    /// An empty cache whose entries may weigh `budget` in all.
    #[must_use]
    pub fn new(budget: usize) -> Self {
        SessionCache {
            budget,
            inner: Mutex::new(Entries {
                by_session: LinkedHashMap::new(),
                weight: 0,
            }),
        }
    }

    /// Takes out `session`'s entry, if it is kept.
    pub fn take(&self, session: &str) -> Option<V> {
        let mut entries = self.lock();
        let value = entries.by_session.remove(session)?;
        entries.weight -= value.weight();
        Some(value)
    }

    /// Puts `value` back as `session`'s newest entry, then drops the
    /// oldest while the total is over budget. A value heavier than the
    /// whole budget is not kept.
    pub fn put(&self, session: &str, value: V) {
        let weight = value.weight();
        if weight > self.budget {
            return;
        }
        let mut entries = self.lock();
        if let Some(old) = entries.by_session.remove(session) {
            entries.weight -= old.weight();
        }
        entries.by_session.insert(session.to_owned(), value);
        entries.weight += weight;
        while entries.weight > self.budget {
            let Some((_, oldest)) = entries.by_session.pop_front() else {
                break;
            };
            entries.weight -= oldest.weight();
        }
    }

    /// The total weight of the entries kept (not of those taken out).
    pub fn weight(&self) -> usize {
        self.lock().weight
    }

    fn lock(&self) -> MutexGuard<'_, Entries<V>> {
        // The map is valid after any panic: each change is one insert or
        // remove, with its weight.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weigh for usize {
        fn weight(&self) -> usize {
            *self
        }
    }

    #[test]
    fn the_least_recently_put_go_first() {
        let cache = SessionCache::new(10);
        cache.put("a", 4);
        cache.put("b", 4);
        // Using `a` makes `b` the oldest.
        let a = cache.take("a").unwrap();
        cache.put("a", a);
        cache.put("c", 4);
        assert_eq!(cache.take("b"), None);
        assert_eq!(cache.take("a"), Some(4));
        assert_eq!(cache.take("c"), Some(4));
        assert_eq!(cache.weight(), 0);
    }

    #[test]
    fn replacing_an_entry_counts_its_new_weight_only() {
        let cache = SessionCache::new(10);
        cache.put("a", 6);
        cache.put("a", 3);
        cache.put("b", 7);
        assert_eq!(cache.weight(), 10);
        assert_eq!(cache.take("a"), Some(3));
        // Too heavy to keep at all, and nothing else is dropped for it.
        cache.put("c", 11);
        assert_eq!(cache.take("c"), None);
        assert_eq!(cache.take("b"), Some(7));
    }
}
