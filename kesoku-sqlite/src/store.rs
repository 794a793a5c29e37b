//! [`SqliteStore`]: the [`Store`](kesoku_core::store::Store) on a `SQLite` file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kesoku_core::store::{
    Claimed, DeltaRelay, Leases, MessageLog, Page, Seq, SessionInfo, StoreError, StoreFuture,
};
use kesoku_core::{Message, Status};
use rusqlite::Connection;

use crate::codec;
use crate::connection;
use crate::error::{CLOSED, Failure, Place};
use crate::options::SqliteOptions;
use crate::sql;
use crate::worker::{Connections, Lane, Where, Workers};

/// A [`Store`](kesoku_core::store::Store) in a `SQLite` file: sessions and messages survive the
/// process, and several processes can share the file (each claim is one
/// conditional update, so two agents never take the same message).
///
/// The database runs in WAL mode with `synchronous=NORMAL`, foreign keys
/// on and a busy timeout; every call is one transaction, or one savepoint
/// of a transaction shared with the calls queued beside it. A short call
/// (a write, a read of a row or of what is new) runs on the caller's
/// thread when its connection is free, and never waits there: a busy
/// database, or a call that may read a lot, goes to a thread the store
/// owns, which waits out the busy timeout. A message whose `insert`
/// returned survives the process being killed.
///
/// Writes that queue for the writer while it is busy (many sessions at
/// once) are committed together: one transaction, a savepoint per call.
/// A call that fails undoes only its own writes and reports its own
/// error; each call's result is given once the shared commit is done.
///
/// Cloning is cheap: clones share the connections. They close on the
/// store's threads a moment after the last clone is dropped, or, when the
/// calls already made are done, with [`SqliteStore::close`], which waits
/// for them.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use kesoku_core::{Message, MessageType, Role, Status};
/// use kesoku_core::store::MessageLog;
/// use kesoku_sqlite::SqliteStore;
///
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteStore::open(dir.path().join("kesoku.sqlite")).unwrap();
/// let prompt = Message::new("s1", Role::User, MessageType::Text, "Add 2 and 3")
///     .with_status(Status::PendingAgent);
/// store.insert(&prompt).await.unwrap();
/// let claim = [Status::PendingAgent];
/// assert!(store.transition(&prompt.id, &claim, Status::Processing).await.unwrap());
/// assert!(!store.transition(&prompt.id, &claim, Status::Processing).await.unwrap());
///
/// // Reopened, the file holds the session.
/// drop(store);
/// let store = SqliteStore::open(dir.path().join("kesoku.sqlite")).unwrap();
/// let history = store.history("s1").await.unwrap();
/// assert_eq!(history[0].status, Status::Processing);
/// assert_eq!(store.sessions().await.unwrap()[0].title.as_deref(), Some("Add 2 and 3"));
/// # });
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The file; `None` in memory.
    path: Option<PathBuf>,
    place: Place,
    workers: Workers,
}

impl SqliteStore {
    /// Opens the database at `path` with the default [`SqliteOptions`],
    /// creating the file if it does not exist and migrating its schema to
    /// the latest version. Its directory must exist.
    ///
    /// This blocks while it opens the file and migrates (briefly, but do
    /// not call it on an async worker in a hot path).
    ///
    /// ```
    /// use kesoku_core::store::StoreError;
    /// use kesoku_sqlite::SqliteStore;
    ///
    /// let err = SqliteStore::open("/no/such/dir/kesoku.sqlite").unwrap_err();
    /// assert!(matches!(err, StoreError::Backend { .. }));
    /// assert!(err.to_string().contains("/no/such/dir"));
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, &SqliteOptions::default())
    }

    /// Opens the database at `path` with `options`; see
    /// [`open`](Self::open).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kesoku_sqlite::{SqliteOptions, SqliteStore};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let options = SqliteOptions::new().with_busy_timeout(Duration::from_secs(30));
    /// let store = SqliteStore::open_with(dir.path().join("kesoku.sqlite"), &options).unwrap();
    /// assert!(format!("{store:?}").contains("kesoku.sqlite"));
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: &SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let place = Place::new(format!("SQLite at `{}`", path.display()));
        let fail = |e: String| place.backend("open the database".into(), e);
        // SQLite's own error for this is "unable to open database file",
        // which does not say what is missing.
        let missing = |d: &&Path| !d.as_os_str().is_empty() && !d.is_dir();
        if let Some(dir) = path.parent().filter(missing) {
            return Err(fail(format!(
                "its directory `{}` does not exist",
                dir.display()
            )));
        }
        let writer = connection::writer(&path, options).map_err(fail)?;
        let readers = (0..options.readers)
            .map(|_| connection::reader(&path, options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let checkpointer = connection::checkpointer(&path, options).map_err(fail)?;
        let connections = Connections {
            writer,
            readers,
            checkpointer: Some(checkpointer),
            busy_timeout: options.busy_timeout,
        };
        Self::start(Some(path), place, connections)
    }

    /// A private database in memory, for tests: lost when the last clone
    /// is dropped.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use kesoku_core::store::MessageLog;
    ///
    /// let store = kesoku_sqlite::SqliteStore::in_memory().unwrap();
    /// assert_eq!(store.last_seq().await.unwrap(), 0);
    /// # });
    /// ```
    pub fn in_memory() -> Result<Self, StoreError> {
        let place = Place::new("SQLite in memory".into());
        let writer =
            connection::memory().map_err(|e| place.backend("open the database".into(), e))?;
        let connections = Connections {
            writer,
            readers: Vec::new(),
            checkpointer: None,
            busy_timeout: SqliteOptions::default().busy_timeout,
        };
        Self::start(None, place, connections)
    }

    fn start(
        path: Option<PathBuf>,
        place: Place,
        connections: Connections,
    ) -> Result<Self, StoreError> {
        let workers = Workers::start(connections)
            .map_err(|e| place.backend("start its threads".into(), e))?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                place,
                workers,
            }),
        })
    }

    /// The database file; `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Closes the store's connections, for every clone, and returns once
    /// they are closed. The calls already made finish first (a write that
    /// was made is stored); every call after this, on any clone, fails
    /// with an error saying the store is closed.
    ///
    /// The writer's connection closes last: unless another connection
    /// (another `SqliteStore`, another process) has the file open,
    /// `SQLite` then copies the log into the database and removes the log,
    /// so the file alone holds everything, ready to copy or move. Without
    /// this, the connections close on the store's threads after the last
    /// clone is dropped, a moment later.
    ///
    /// Calling it again, or at the same time, returns once the
    /// connections are closed. Dropping the returned future does not open
    /// the store again: calls are refused from the moment it is called, and
    /// the connections close when the last clone is dropped, or at the
    /// next `close`.
    ///
    /// # Errors
    /// An error `SQLite` gave closing a connection, to one of the calls
    /// that closed it. The store refuses calls all the same; a connection
    /// that failed to close is released when `SQLite` can, and its log may
    /// stay beside the file until a later connection's close removes it.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use kesoku_core::{Message, MessageType, Role};
    /// use kesoku_core::store::MessageLog;
    /// use kesoku_sqlite::SqliteStore;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("kesoku.sqlite");
    /// let store = SqliteStore::open(&path).unwrap();
    /// let clone = store.clone();
    /// clone.insert(&Message::new("s1", Role::User, MessageType::Text, "hi")).await.unwrap();
    /// store.close().await.unwrap();
    ///
    /// // One file, no log beside it.
    /// assert!(!dir.path().join("kesoku.sqlite-wal").exists());
    /// let error = clone.history("s1").await.unwrap_err();
    /// assert!(error.to_string().ends_with("the store is closed"), "{error}");
    /// assert_eq!(SqliteStore::open(&path).unwrap().history("s1").await.unwrap().len(), 1);
    /// # });
    /// ```
    pub async fn close(&self) -> Result<(), StoreError> {
        self.inner.workers.close().await.map_err(|e| {
            self.inner
                .place
                .backend_from("close the database".into(), e)
        })
    }

    /// Runs `SQLite`'s `PRAGMA integrity_check`: `"ok"` when the file is
    /// sound, else its findings, one per line.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = kesoku_sqlite::SqliteStore::in_memory().unwrap();
    /// assert_eq!(store.check_integrity().await.unwrap(), "ok");
    /// # });
    /// ```
    pub fn check_integrity(&self) -> StoreFuture<'_, String> {
        self.call(
            Lane::Write,
            Where::Away,
            || "check its integrity".into(),
            sql::integrity_check,
        )
    }

    /// Runs `job` on a connection of `lane`, here when `place` allows it
    /// (see `worker.rs`); a failure names `action`.
    fn call<'a, T: Send + 'static>(
        &'a self,
        lane: Lane,
        place: Where,
        action: impl FnOnce() -> String + Send + 'a,
        job: impl Fn(&mut Connection) -> Result<T, Failure> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let reply = self.inner.workers.run(lane, place, job);
        Box::pin(async move {
            let place = &self.inner.place;
            match reply.wait().await {
                Some(result) => result.map_err(|f| place.fail(f, action)),
                // Queued as the store closed, its thread having ended (or
                // it panicked as the store closed).
                None if self.inner.workers.is_closed() => Err(place.backend(action(), CLOSED)),
                None => Err(place.backend(
                    action(),
                    "the call was lost: it panicked, or its SQLite thread has stopped",
                )),
            }
        })
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// Where a read after `seq` runs: a whole history (from 0) may be long,
/// so it goes to a reader's thread; what was stored after a later seq (a
/// turn bringing its view up to date) is short.
/// The longest page of a session read on the caller's thread.
const SHORT_PAGE: usize = 256;

fn newer_only(seq: Seq) -> Where {
    if seq > 0 { Where::Here } else { Where::Away }
}

impl MessageLog for SqliteStore {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        let row = codec::encode(message);
        self.call(
            Lane::Write,
            Where::Here,
            || format!("save message `{}`", message.id),
            move |conn| sql::insert(conn, &row, None),
        )
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        let owned = id.to_owned();
        self.call(
            Lane::Read,
            Where::Here,
            move || format!("read message `{id}`"),
            move |conn| sql::get(conn, &owned),
        )
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        let owned = session_id.to_owned();
        self.call(
            Lane::Read,
            Where::Away,
            move || format!("load the history of session `{session_id}`"),
            move |conn| sql::history(conn, &owned),
        )
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        let owned = session_id.to_owned();
        self.call(
            Lane::Read,
            newer_only(seq),
            move || format!("load the history of session `{session_id}` after seq {seq}"),
            move |conn| sql::history_after(conn, &owned, seq),
        )
    }

    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        let owned = session_id.to_owned();
        // A short page is a short read.
        let place = if page.limit <= SHORT_PAGE {
            Where::Here
        } else {
            Where::Away
        };
        self.call(
            Lane::Read,
            place,
            move || format!("load a page of session `{session_id}`"),
            move |conn| sql::history_page(conn, &owned, page),
        )
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        // A listener's page, up to `limit` messages: not a short call.
        self.call(
            Lane::Read,
            Where::Away,
            move || format!("read the messages after seq {seq}"),
            move |conn| sql::after(conn, seq, limit),
        )
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let name = codec::name(status);
        self.call(
            Lane::Read,
            Where::Away,
            move || format!("list the messages with status `{}`", codec::name(status)),
            move |conn| sql::with_status(conn, &name),
        )
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        let owned = id.to_owned();
        let from_names: Vec<String> = from.iter().map(|s| codec::name(*s)).collect();
        let to_name = codec::name(to);
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("set the status of message `{id}` to `{}`", codec::name(to)),
            move |conn| sql::transition(conn, &owned, &from_names, &to_name),
        )
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        self.call(
            Lane::Read,
            Where::Away,
            || "list the sessions".into(),
            sql::sessions,
        )
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        self.call(
            Lane::Read,
            Where::Here,
            || "read the last seq".into(),
            sql::last_seq,
        )
    }
}

impl Leases for SqliteStore {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        let row = codec::encode(message);
        let who = holder.to_owned();
        self.call(
            Lane::Write,
            Where::Here,
            || format!("save message `{}`", message.id),
            move |conn| sql::insert(conn, &row, Some(&who)),
        )
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (owned, who) = (id.to_owned(), holder.to_owned());
        let from_names: Vec<String> = from.iter().map(|s| codec::name(*s)).collect();
        let to_name = codec::name(to);
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("set the status of message `{id}` to `{}`", codec::name(to)),
            move |conn| sql::transition_leased(conn, &owned, &from_names, &to_name, &who),
        )
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let (session, who) = (session_id.to_owned(), holder.to_owned());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("lease session `{session_id}`"),
            move |conn| sql::lease(conn, &session, &who, ttl_ms),
        )
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let (session, who) = (session_id.to_owned(), holder.to_owned());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("renew the lease of session `{session_id}`"),
            move |conn| sql::renew(conn, &session, &who, ttl_ms),
        )
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        let (session, who) = (session_id.to_owned(), holder.to_owned());
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("release the lease of session `{session_id}`"),
            move |conn| sql::release(conn, &session, &who),
        )
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        let who = holder.to_owned();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.call(
            Lane::Write,
            Where::Here,
            || "claim the next pending prompt".into(),
            move |conn| sql::claim_next(conn, &who, ttl_ms),
        )
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        let session = session_id.to_owned();
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("break the lease of session `{session_id}`"),
            move |conn| sql::break_lease(conn, &session),
        )
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.call(
            Lane::Write,
            Where::Away,
            || "requeue the turns of expired leases".into(),
            sql::requeue_expired,
        )
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        let row = codec::encode(message);
        let who = holder.to_owned();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.call(
            Lane::Write,
            Where::Here,
            || format!("save prompt `{}` and lease its session", message.id),
            move |conn| sql::insert_claimed(conn, &row, &who, ttl_ms),
        )
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        let row = codec::encode(message);
        let who = holder.to_owned();
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.call(
            Lane::Write,
            Where::Here,
            || format!("save prompt `{}` and lease its session", message.id),
            move |conn| sql::insert_claimed_after(conn, &row, &who, ttl_ms, after),
        )
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
        let rows: Vec<codec::Row> = posts.iter().map(codec::encode).collect();
        let (session, who, id) = (session_id.to_owned(), holder.to_owned(), prompt.to_owned());
        let from_names: Vec<String> = from.iter().map(|s| codec::name(*s)).collect();
        let to_name = codec::name(to);
        self.call(
            Lane::Write,
            Where::Here,
            move || format!("end the turn of prompt `{prompt}` in session `{session_id}`"),
            move |conn| sql::finish_turn(conn, &session, &who, &rows, &id, &from_names, &to_name),
        )
    }
}

impl DeltaRelay for SqliteStore {}
