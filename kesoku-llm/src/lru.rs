//! What is kept per session between requests, bounded by a total weight:
//! when over it, the entries put back least recently are dropped first.
//!
//! An entry is taken out while it is used (a concurrent user of the same
//! session goes without) and put back after, so the lock is held only for
//! a map operation. Taking, putting and dropping the oldest are O(1), so a
//! server with many sessions pays no scan per request.

use std::sync::{Mutex, MutexGuard, PoisonError};

use hashlink::LinkedHashMap;

/// What an entry weighs against the budget.
pub(crate) trait Weigh {
    fn weight(&self) -> usize;
}

/// Entries by session, oldest first.
#[derive(Debug)]
pub(crate) struct Lru<V> {
    budget: usize,
    inner: Mutex<Entries<V>>,
}

#[derive(Debug)]
struct Entries<V> {
    by_session: LinkedHashMap<String, V>,
    /// The sum of their weights.
    weight: usize,
}

impl<V: Weigh> Lru<V> {
    /// An empty map whose entries may weigh `budget` in all.
    pub(crate) fn new(budget: usize) -> Self {
        Lru {
            budget,
            inner: Mutex::new(Entries {
                by_session: LinkedHashMap::new(),
                weight: 0,
            }),
        }
    }

    /// Takes out `session`'s entry.
    pub(crate) fn take(&self, session: &str) -> Option<V> {
        let mut entries = self.lock();
        let value = entries.by_session.remove(session)?;
        entries.weight -= value.weight();
        Some(value)
    }

    /// Puts `value` back as `session`'s newest entry, then drops the
    /// oldest while the total is over budget. A value heavier than the
    /// whole budget is not kept.
    pub(crate) fn put(&self, session: &str, value: V) {
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
        let lru = Lru::new(10);
        lru.put("a", 4);
        lru.put("b", 4);
        // Using `a` makes `b` the oldest.
        let a = lru.take("a").unwrap();
        lru.put("a", a);
        lru.put("c", 4);
        assert_eq!(lru.take("b"), None);
        assert_eq!(lru.take("a"), Some(4));
        assert_eq!(lru.take("c"), Some(4));
        assert_eq!(lru.lock().weight, 0);
    }

    #[test]
    fn replacing_an_entry_counts_its_new_weight_only() {
        let lru = Lru::new(10);
        lru.put("a", 6);
        lru.put("a", 3);
        lru.put("b", 7);
        assert_eq!(lru.lock().weight, 10);
        assert_eq!(lru.take("a"), Some(3));
        // Too heavy to keep at all, and nothing else is dropped for it.
        lru.put("c", 11);
        assert_eq!(lru.take("c"), None);
        assert_eq!(lru.take("b"), Some(7));
    }
}
