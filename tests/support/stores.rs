//! The store suite's fixtures (one fresh database per test, per backend)
//! and `store_suite!`, which runs the listed tests against every backend.
//! Shared by `tests/store.rs` (messages) and `tests/store_leases.rs`
//! (leases and claims).
#![allow(dead_code)] // each suite file uses its part

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use kesoku::store::{MemoryStore, Store};
use kesoku::{Message, MessageType, Role};

/// Opens another handle on a fixture's database.
pub(crate) type Opener =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// A fresh, empty database and a way to open more handles on it.
pub(crate) struct Fixture {
    pub(crate) store: Arc<dyn Store>,
    /// Another handle on the same database: for `SQLite` or PostgreSQL a
    /// new connection, as a second process would open.
    pub(crate) handle: Opener,
    /// Keeps the database's directory alive.
    _dir: Option<tempfile::TempDir>,
}

/// A handle that is `store` itself.
pub(crate) fn same(store: &Arc<dyn Store>) -> Opener {
    let same = Arc::clone(store);
    Box::new(move || {
        let same = Arc::clone(&same);
        Box::pin(async move { same })
    })
}

#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn memory() -> Option<Fixture> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    Some(Fixture {
        handle: same(&store),
        store,
        _dir: None,
    })
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn sqlite() -> Option<Fixture> {
    use kesoku::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    Some(Fixture {
        store,
        handle: Box::new(move || {
            let path = path.clone();
            Box::pin(async move { Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn Store> })
        }),
        _dir: Some(dir),
    })
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn sqlite_in_memory() -> Option<Fixture> {
    let store: Arc<dyn Store> = Arc::new(kesoku::store::SqliteStore::in_memory().unwrap());
    Some(Fixture {
        handle: same(&store),
        store,
        _dir: None,
    })
}

#[cfg(feature = "postgres")]
#[path = "pg.rs"]
mod pg;

/// A new database on the test server; `None` (skipped) without one.
#[cfg(feature = "postgres")]
pub(crate) async fn postgres() -> Option<Fixture> {
    use kesoku::store::PostgresStore;
    let url = pg::fresh_database("the PostgreSQL store suite").await?;
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    Some(Fixture {
        store,
        handle: Box::new(move || {
            let url = url.clone();
            Box::pin(async move {
                Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn Store>
            })
        }),
        _dir: None,
    })
}

/// Runs each listed `async fn NAME(f: Fixture)` of the calling file
/// against every backend built in: a module per backend, a test per name.
macro_rules! store_suite {
    ($($test:ident),* $(,)?) => {
        store_suite!(@backend memory; $($test),*);
        #[cfg(feature = "sqlite")]
        store_suite!(@backend sqlite; $($test),*);
        #[cfg(feature = "sqlite")]
        store_suite!(@backend sqlite_in_memory; $($test),*);
        #[cfg(feature = "postgres")]
        store_suite!(@backend postgres; $($test),*);
    };
    (@backend $backend:ident; $($test:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    if let Some(fixture) = super::stores::$backend().await {
                        super::$test(fixture).await;
                    }
                }
            )*
        }
    };
}

pub(crate) fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, nanos).unwrap()
}

pub(crate) fn msg(
    id: &str,
    session: &str,
    role: Role,
    content: &str,
    time: DateTime<Utc>,
) -> Message {
    let mut m = Message::new(session, role, MessageType::Text, content);
    m.id = id.into();
    m.timestamp = time;
    m
}
