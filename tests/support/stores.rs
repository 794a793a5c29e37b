//! The store suite's fixtures (one fresh database per test, per backend)
//! and `store_suite!`, which runs the listed checks of
//! `kesoku::store::testing` against every backend built in. Shared by
//! `tests/store.rs` (messages), `tests/store_leases.rs` (leases) and
//! `tests/store_claims.rs` (claims), a test per check and backend.
#![allow(dead_code)] // each suite file uses its part

use std::sync::Arc;

use kesoku::store::testing::Fixture;
use kesoku::store::{LocalLeases, MemoryStore, Store};

#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn memory() -> Option<Fixture> {
    Some(Fixture::new(Arc::new(MemoryStore::new())))
}

/// `MemoryStore`'s log with the leases `LocalLeases` keeps, and the
/// log's defaults: what a log-only store gets.
#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn local_leases() -> Option<Fixture> {
    Some(Fixture::new(Arc::new(LocalLeases::new(MemoryStore::new()))))
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn sqlite() -> Option<Fixture> {
    use kesoku::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    Some(
        Fixture::new(store)
            .reopen(move || {
                let path = path.clone();
                async move { Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn Store> }
            })
            .keeping(dir),
    )
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
pub(crate) async fn sqlite_in_memory() -> Option<Fixture> {
    Some(Fixture::new(Arc::new(
        kesoku::store::SqliteStore::in_memory().unwrap(),
    )))
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
    Some(Fixture::new(store).reopen(move || {
        let url = url.clone();
        async move { Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn Store> }
    }))
}

/// Runs each listed check of `kesoku::store::testing::$module` against
/// every backend built in: a module per backend, a test per check.
macro_rules! store_suite {
    ($module:ident; $($test:ident),* $(,)?) => {
        store_suite!(@backend $module; memory; $($test),*);
        store_suite!(@backend $module; local_leases; $($test),*);
        #[cfg(feature = "sqlite")]
        store_suite!(@backend $module; sqlite; $($test),*);
        #[cfg(feature = "sqlite")]
        store_suite!(@backend $module; sqlite_in_memory; $($test),*);
        #[cfg(feature = "postgres")]
        store_suite!(@backend $module; postgres; $($test),*);
    };
    (@backend $module:ident; $backend:ident; $($test:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    if let Some(fixture) = super::stores::$backend().await {
                        kesoku::store::testing::$module::$test(fixture).await;
                    }
                }
            )*
        }
    };
}
