//! How the store names itself in errors, and how a driver or pool failure
//! becomes a [`StoreError`] that names the database and the call.

use std::fmt;
use std::sync::Arc;

use kesoku_core::ErrorSource;
use kesoku_core::store::StoreError;
use tokio_postgres::error::SqlState;

/// The store as errors name it: "PostgreSQL at host:port/database" (never
/// the user or password).
#[derive(Clone)]
pub(crate) struct Place(Arc<str>);

impl Place {
    pub(crate) fn of(config: &tokio_postgres::Config) -> Self {
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let db = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres");
        Place(format!("PostgreSQL at {host}:{port}/{db}").into())
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

    /// A stored row that is not a message.
    pub(crate) fn corrupt(&self, id: String, message: String) -> StoreError {
        StoreError::Corrupt {
            store: self.0.to_string(),
            id,
            message,
        }
    }

    /// What a call that failed with `failure` reports; `action` is built
    /// only on failure.
    pub(crate) fn fail(&self, failure: Failure, action: impl FnOnce() -> String) -> StoreError {
        match failure {
            Failure::Pool(e) => self.backend(action(), format!("no connection: {e}")),
            Failure::Sql(e) => StoreError::Backend {
                store: self.0.to_string(),
                action: action(),
                message: describe(&e),
                source: Some(ErrorSource::new(e)),
            },
            Failure::Corrupt { id, message } => self.corrupt(id, message),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A driver error with the server's own message, when it sent one (the
/// driver's `Display` says only "db error").
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    // The driver's `Display` leaves out its cause (a refused connection,
    // the TLS handshake's reason): add the chain.
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// Whether `e` is a unique violation of the message id (a duplicate id),
/// not of anything else.
pub(crate) fn is_duplicate(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && e.as_db_error().and_then(|d| d.constraint()) == Some("kesoku_messages_id_key")
}

/// Why a call failed, before it is given its place.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be had from the pool.
    Pool(deadpool_postgres::PoolError),
    /// The statement failed.
    Sql(tokio_postgres::Error),
    /// A stored row is not a message.
    Corrupt {
        /// The row's message id (or seq when even that is unreadable).
        id: String,
        /// What is wrong with it.
        message: String,
    },
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Sql(e)
    }
}

impl From<deadpool_postgres::PoolError> for Failure {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Failure::Pool(e)
    }
}
