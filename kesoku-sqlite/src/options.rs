//! [`SqliteOptions`]: how a [`SqliteStore`](crate::SqliteStore) opens its
//! database.

use std::time::Duration;

/// How [`SqliteStore::open_with`](crate::SqliteStore::open_with) opens a
/// database.
///
/// ```
/// use std::time::Duration;
/// use kesoku_sqlite::SqliteOptions;
///
/// let options = SqliteOptions::new()
///     .with_busy_timeout(Duration::from_secs(30))
///     .with_readers(4);
/// assert_eq!(options.busy_timeout, Duration::from_secs(30));
/// assert_eq!(SqliteOptions::new().busy_timeout, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a call waits for another connection (another process
    /// sharing the file) to release its lock before it fails. 5 s unless
    /// set.
    pub busy_timeout: Duration,
    /// How many connections serve reads, each on its own thread, in
    /// parallel with each other and with the writer (WAL allows it). 0
    /// sends reads to the writer's connection. 2 unless set.
    pub readers: usize,
    /// No longer has any effect: the VFS shim it turned on, which wrote
    /// each commit's log frames in one write call, is gone (it relied on
    /// write-ahead-log internals `SQLite` does not promise). Writes that
    /// wait for the writer are committed together instead, with no
    /// option.
    #[deprecated(
        since = "0.1.0",
        note = "has no effect: the log-batching VFS shim is gone; writes waiting for the writer are committed together instead"
    )]
    pub batch_log_writes: bool,
}

impl Default for SqliteOptions {
    #[allow(deprecated)] // The field is kept for code that names it.
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            readers: 2,
            batch_log_writes: true,
        }
    }
}

impl SqliteOptions {
    /// The defaults: a busy timeout of 5 s and 2 reader connections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder: sets [`busy_timeout`](Self::busy_timeout).
    #[must_use]
    pub fn with_busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Builder: sets [`readers`](Self::readers).
    #[must_use]
    pub fn with_readers(mut self, readers: usize) -> Self {
        self.readers = readers;
        self
    }

    /// Builder: sets [`batch_log_writes`](Self::batch_log_writes), which
    /// no longer has any effect.
    #[deprecated(
        since = "0.1.0",
        note = "has no effect: the log-batching VFS shim is gone; writes waiting for the writer are committed together instead"
    )]
    #[allow(deprecated)] // Sets the deprecated field.
    #[must_use]
    pub fn with_batch_log_writes(mut self, batch: bool) -> Self {
        self.batch_log_writes = batch;
        self
    }
}
