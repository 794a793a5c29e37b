//! How a store names itself in errors, and how a failure on a connection
//! becomes a [`StoreError`] that names the database and the call.

use std::fmt;
use std::sync::Arc;

use kesoku_core::store::StoreError;

/// The store as errors name it: "`SQLite` at `path`" (or "in memory").
#[derive(Clone)]
pub(crate) struct Place(Arc<str>);

impl Place {
    pub(crate) fn new(name: String) -> Self {
        Place(name.into())
    }

    /// The database failed while doing `action`.
    pub(crate) fn backend(&self, action: String, error: impl fmt::Display) -> StoreError {
        StoreError::Backend {
            store: self.0.to_string(),
            action,
            message: error.to_string(),
            source: None,
        }
    }

    /// The database failed while doing `action`, with `error` kept as the
    /// source.
    pub(crate) fn backend_from(
        &self,
        action: String,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::backend(self.0.to_string(), action, error)
    }

    /// What a call that failed with `failure` reports; `action` is built
    /// only on failure, so a successful call formats nothing.
    pub(crate) fn fail(&self, failure: Failure, action: impl FnOnce() -> String) -> StoreError {
        match failure {
            Failure::Duplicate(id) => StoreError::Duplicate { id },
            Failure::LeaseLost {
                id,
                session,
                holder,
            } => StoreError::LeaseLost {
                id,
                session,
                holder,
            },
            Failure::Corrupt(u) => StoreError::Corrupt {
                store: self.0.to_string(),
                id: u.id,
                message: u.message,
            },
            Failure::Sql(e) => self.backend_from(action(), e),
            Failure::Closed => self.backend(action(), CLOSED),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a call made after [`SqliteStore::close`](crate::SqliteStore::close)
/// fails.
pub(crate) const CLOSED: &str = "the store is closed";

/// Why a call on a connection failed, before it is given its place.
#[derive(Debug)]
pub(crate) enum Failure {
    /// `SQLite` itself failed.
    Sql(rusqlite::Error),
    /// A message with this id is stored already.
    Duplicate(String),
    /// A leased insert's session is not leased to its holder.
    LeaseLost {
        id: String,
        session: String,
        holder: String,
    },
    /// A stored row is not a message.
    Corrupt(Undecodable),
    /// The store was closed before the call.
    Closed,
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure::Sql(e)
    }
}

impl From<Undecodable> for Failure {
    fn from(u: Undecodable) -> Self {
        Failure::Corrupt(u)
    }
}

/// A stored row that cannot be read back.
#[derive(Debug)]
pub(crate) struct Undecodable {
    /// The row's id (its message or session id, or its seq when even the
    /// id is unreadable).
    pub(crate) id: String,
    /// What is wrong with it.
    pub(crate) message: String,
}
