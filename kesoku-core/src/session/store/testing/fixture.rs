//! [`Fixture`], the store a check runs on, and the messages the checks
//! make.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};

use crate::store::Store;
use crate::{Message, MessageType, Role};

/// Opens another handle on a fixture's database.
pub(super) type Opener =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// A fresh, empty store for one check, and a way to open another handle
/// on the same data, as a second process would.
///
/// ```
/// use std::sync::Arc;
/// use kesoku_core::store::MemoryStore;
/// use kesoku_core::store::testing::Fixture;
///
/// // One process's store: its other handle is itself.
/// let fixture = Fixture::new(Arc::new(MemoryStore::new()));
/// // A store in a directory: the directory lives as long as the fixture,
/// // and another handle opens the same data.
/// let dir = std::env::temp_dir();
/// let fixture = Fixture::new(Arc::new(MemoryStore::new()))
///     .reopen(|| async { Arc::new(MemoryStore::new()) as _ })
///     .keeping(dir);
/// ```
pub struct Fixture {
    pub(super) store: Arc<dyn Store>,
    pub(super) handle: Opener,
    /// Held only to be dropped with the fixture.
    #[allow(dead_code)]
    kept: Option<Box<dyn Any + Send + Sync>>,
}

impl Fixture {
    /// `store`, empty, whose other handle is `store` itself.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let same = Arc::clone(&store);
        Fixture {
            store,
            handle: Box::new(move || {
                let same = Arc::clone(&same);
                Box::pin(async move { same })
            }),
            kept: None,
        }
    }

    /// Opens other handles with `open`: for a store in a file or a server,
    /// a new connection to the same data.
    #[must_use]
    pub fn reopen<F, Fut>(mut self, open: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Arc<dyn Store>> + Send + 'static,
    {
        self.handle = Box::new(move || Box::pin(open()));
        self
    }

    /// Keeps `anything` (a temporary directory, a server) alive as long
    /// as the fixture.
    #[must_use]
    pub fn keeping(mut self, anything: impl Any + Send + Sync) -> Self {
        self.kept = Some(Box::new(anything));
        self
    }
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fixture").finish_non_exhaustive()
    }
}

/// `secs` seconds (and `nanos`) after a fixed instant in 2023.
pub(super) fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, nanos)
        .single()
        .expect("a valid time")
}

/// A text message with this id, session, role, content and time.
pub(super) fn msg(
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
