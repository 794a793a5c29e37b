//! [`PostgresStore`]: a pool of connections, the statements of `sql.rs`,
//! and the listening connection of `notify.rs`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Client, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use crate::connect::Spawned;
use kesoku_core::store::row::{Row, name};
use kesoku_core::store::{
    Announced, Claimed, DeltaRelay, Leases, MessageLog, Page, Seq, SessionInfo, StoreError,
    StoreFuture,
};
use kesoku_core::{Delta, Message, Status};
use tokio::sync::{broadcast, oneshot};

use crate::error::{Failure, Place, describe};
use crate::options::PostgresOptions;
use crate::schema::{self, MigrateError};
use crate::{notify, relay, sql, tls};

/// A [`Store`](kesoku_core::store::Store) in a PostgreSQL database, shared by any number of agent
/// processes on any number of machines.
///
/// - Each message gets the next [`Seq`] of one counter, and inserts commit
///   in that order: every process sees one total order, without gaps.
/// - Claims ([`MessageLog::transition`](kesoku_core::store::MessageLog::transition)) are conditional updates, and a
///   session's turn lease ([`Leases::lease`](kesoku_core::store::Leases::lease)) is a conditional upsert on
///   the database's clock: of several workers exactly one wins, and a
///   dead worker's lease expires for another to resume its turn.
/// - Every insert sends a `NOTIFY` when it commits; the store listens on
///   a connection of its own and announces new messages through
///   [`DeltaRelay::changes`](kesoku_core::store::DeltaRelay::changes), so a gateway's listeners in every process get
///   them at once. After a reconnect, what was missed is read from the
///   table.
///
/// Connecting runs the schema's migrations (under an advisory lock, so
/// processes starting together apply each once). Tables are prefixed
/// `kesoku_`; put the store in its own schema with `options=-csearch_path=...`
/// in the URL if the database holds others.
///
/// ```no_run
/// # async fn demo() -> Result<(), kesoku_core::store::StoreError> {
/// use kesoku_postgres::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://kesoku@db.internal/kesoku").await?;
/// # let _ = store;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    place: Place,
    changes: broadcast::Sender<Announced>,
    /// The listening task, stopped with the store.
    listener: tokio::task::AbortHandle,
    /// With [`PostgresOptions::relay_deltas`]: where this store's deltas
    /// go out, and where other stores' come in.
    relay: Option<(relay::Publisher, broadcast::Sender<Arc<Delta>>)>,
}

/// How many announcements a listener may fall behind before it reads
/// what it missed from the table instead.
const ANNOUNCED: usize = 4096;
/// How many relayed deltas a gateway's listener may fall behind before
/// the oldest are dropped for it.
const DELTAS: usize = 4096;

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`,
    /// or the key-value form), brings its schema up to date, and starts
    /// listening for new messages. With [`PostgresOptions::default`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// [`connect`](Self::connect), with `options`.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let tls::Connect { mut config, tls } =
            tls::read(url).map_err(|message| StoreError::Backend {
                store: "PostgreSQL".into(),
                action: "read the connection URL".into(),
                message,
                source: None,
            })?;
        // A connect that no one answers (a server restarting accepts, then
        // waits) fails in time, for the pool and the listener alike.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        let place = Place::of(&config);
        if options.max_connections == 0 {
            return Err(place.backend(
                "open a connection pool".into(),
                "max_connections must be at least 1",
            ));
        }
        // Pooled connections commit without waiting for the disk: an
        // insert then holds the order counter's lock only for its commit,
        // not for its flush, and `sql::insert` waits for the flush after
        // (so a message whose post returned is on disk). Status changes and
        // leases stay asynchronous: one lost to a server crash is redone by
        // recovery (a claim requeued, an answered prompt settled).
        let mut pooled = config.clone();
        sql::commit_asynchronously(&mut pooled);
        // Each connection opens on a task of its own (`connect.rs`).
        let manager = Manager::from_connect(
            pooled,
            Spawned { tls: tls.clone() },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| place.backend("open a connection pool".into(), e))?;

        let mut client = pool
            .get()
            .await
            .map_err(|e| place.backend("connect".into(), pool_error(&e)))?;
        schema::migrate(&mut client)
            .await
            .map_err(|e| match e {
                MigrateError::Sql(e) => place.backend("migrate its schema".into(), describe(&e)),
                MigrateError::Newer { at } => place.backend(
                    "migrate its schema".into(),
                    format!(
                        "the database is at schema version {at}, newer than this build's {}; upgrade kesoku",
                        schema::VERSION
                    ),
                ),
            })?;
        drop(client);

        let (announce, _) = broadcast::channel(ANNOUNCED);
        let changes = announce.clone();
        let (ready, started) = oneshot::channel();
        let mut relayed = None;
        let mut deltas = None;
        if options.relay_deltas {
            // This store's name among all sharing the database: its own
            // deltas come back with it, and are skipped.
            let origin: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
            let (feed, _) = broadcast::channel(DELTAS);
            let publisher = relay::Publisher::start(
                &config,
                tls.clone(),
                place.clone(),
                Arc::clone(&origin),
                feed.clone(),
            );
            deltas = Some(notify::Deltas {
                origin,
                feed: feed.clone(),
            });
            relayed = Some((publisher, feed));
        }
        let listener = tokio::spawn(notify::listen(
            config,
            options.connect_timeout,
            tls,
            place.clone(),
            announce,
            deltas,
            ready,
        ))
        .abort_handle();
        let store = PostgresStore {
            inner: Arc::new(Inner {
                pool,
                place: place.clone(),
                changes,
                listener,
                relay: relayed,
            }),
        };
        match started.await {
            Ok(Ok(())) => Ok(store),
            Ok(Err(e)) => Err(place.backend("listen for new messages".into(), e)),
            Err(_) => Err(place.backend(
                "listen for new messages".into(),
                "the listening task stopped",
            )),
        }
    }

    /// [`MessageLog::insert`](kesoku_core::store::MessageLog::insert), or with a `holder` [`Leases::insert_leased`](kesoku_core::store::Leases::insert_leased).
    fn insert_as<'a>(
        &'a self,
        message: &'a Message,
        holder: Option<&'a str>,
    ) -> StoreFuture<'a, Seq> {
        let row = Row::encode(message);
        Box::pin(async move {
            let inserted = self
                .call(
                    || format!("save message `{}`", message.id),
                    |c| async move { sql::insert(&c, &row, holder).await },
                )
                .await?;
            match inserted {
                sql::Inserted::At(seq) => Ok(seq),
                sql::Inserted::Duplicate => Err(StoreError::Duplicate {
                    id: message.id.clone(),
                }),
                sql::Inserted::NotLeased => Err(StoreError::LeaseLost {
                    id: message.id.clone(),
                    session: message.session_id.clone(),
                    holder: holder.unwrap_or_default().to_owned(),
                }),
            }
        })
    }

    /// Stores the prompt `message` with its session leased to `holder`
    /// (`insert_claimed`); with `after`, also what the session holds after
    /// it, read in the same transaction.
    async fn claim_prompt(
        &self,
        message: &Message,
        holder: &str,
        ttl: Duration,
        after: Option<Seq>,
    ) -> Result<Option<Claimed>, StoreError> {
        let row = Row::encode(message);
        let ttl_ms = ttl.as_secs_f64() * 1000.0;
        let claimed = self
            .call(
                || format!("save prompt `{}` and lease its session", message.id),
                |mut c| async move { sql::insert_claimed(&mut c, &row, holder, ttl_ms, after).await },
            )
            .await?;
        match claimed {
            None => Ok(None),
            Some((sql::Inserted::At(seq), newer)) => Ok(Some(Claimed::new(seq, newer))),
            Some((sql::Inserted::Duplicate, _)) => Err(StoreError::Duplicate {
                id: message.id.clone(),
            }),
            // Not from an unfenced insert; named all the same.
            Some((sql::Inserted::NotLeased, _)) => Err(StoreError::LeaseLost {
                id: message.id.clone(),
                session: message.session_id.clone(),
                holder: holder.to_owned(),
            }),
        }
    }

    /// Runs `job` on a pooled connection; a failure names `action`.
    fn call<'a, T, F>(
        &'a self,
        action: impl FnOnce() -> String + Send + 'a,
        job: impl FnOnce(Client) -> F + Send + 'a,
    ) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: Future<Output = Result<T, Failure>> + Send + 'a,
    {
        Box::pin(async move {
            let result = match self.inner.pool.get().await {
                Ok(client) => job(client).await,
                Err(e) => Err(Failure::Pool(e)),
            };
            result.map_err(|f| self.inner.place.fail(f, action))
        })
    }
}

/// A pool error, with the server's own message when it has one.
fn pool_error(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("place", &self.inner.place.to_string())
            .field("pool", &self.inner.pool.status())
            .finish_non_exhaustive()
    }
}

impl MessageLog for PostgresStore {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        self.insert_as(message, None)
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        self.call(
            move || format!("read message `{id}`"),
            move |c| async move { sql::get(&c, id).await },
        )
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        self.call(
            move || format!("load the history of session `{session_id}`"),
            move |c| async move {
                let found = sql::history_after(&c, session_id, 0).await?;
                Ok(found.into_iter().map(|(_, m)| m).collect())
            },
        )
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        self.call(
            move || format!("load the history of session `{session_id}` after seq {seq}"),
            move |c| async move { sql::history_after(&c, session_id, seq).await },
        )
    }

    fn history_page<'a>(
        &'a self,
        session_id: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        self.call(
            move || format!("load a page of session `{session_id}`"),
            move |c| async move { sql::history_page(&c, session_id, page).await },
        )
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.call(
            move || format!("read the messages after seq {seq}"),
            move |c| async move { sql::after(&c, seq, limit).await },
        )
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let stored = name(status);
        self.call(
            move || format!("list the messages with status `{}`", name(status)),
            move |c| async move { sql::with_status(&c, &stored).await },
        )
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        let from_names: Vec<String> = from.iter().map(|s| name(*s)).collect();
        let to_name = name(to);
        self.call(
            move || format!("set the status of message `{id}` to `{}`", name(to)),
            move |c| async move { sql::transition(&c, id, &from_names, &to_name).await },
        )
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        self.call(
            || "list the sessions".into(),
            |c| async move { sql::sessions(&c).await },
        )
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        self.call(
            || "read the last seq".into(),
            |c| async move { sql::last_seq(&c).await },
        )
    }
}

impl Leases for PostgresStore {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        self.insert_as(message, Some(holder))
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        let from_names: Vec<String> = from.iter().map(|s| name(*s)).collect();
        let to_name = name(to);
        Box::pin(async move {
            let done = self
                .call(
                    move || format!("set the status of message `{id}` to `{}`", name(to)),
                    move |c| async move {
                        sql::transition_leased(&c, id, &from_names, &to_name, holder).await
                    },
                )
                .await?;
            match done {
                sql::Leased::Done(changed) => Ok(changed),
                sql::Leased::NotLeased(session) => Err(StoreError::LeaseLost {
                    id: id.to_owned(),
                    session,
                    holder: holder.to_owned(),
                }),
            }
        })
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let ttl_ms = ttl.as_secs_f64() * 1000.0;
        self.call(
            move || format!("lease session `{session_id}`"),
            move |c| async move { sql::lease(&c, session_id, holder, ttl_ms).await },
        )
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        let ttl_ms = ttl.as_secs_f64() * 1000.0;
        self.call(
            move || format!("renew the lease of session `{session_id}`"),
            move |c| async move { sql::renew(&c, session_id, holder, ttl_ms).await },
        )
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        self.call(
            move || format!("release the lease of session `{session_id}`"),
            move |c| async move { sql::release(&c, session_id, holder).await },
        )
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        let ttl_ms = ttl.as_secs_f64() * 1000.0;
        self.call(
            || "claim the next pending prompt".into(),
            move |c| async move { sql::claim_next(&c, holder, ttl_ms).await },
        )
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        self.call(
            move || format!("break the lease of session `{session_id}`"),
            move |c| async move { sql::break_lease(&c, session_id).await },
        )
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.call(
            || "requeue the turns of expired leases".into(),
            |c| async move { sql::requeue_expired(&c).await },
        )
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        Box::pin(async move {
            let claimed = self.claim_prompt(message, holder, ttl, None).await?;
            Ok(claimed.map(|c| c.seq))
        })
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        Box::pin(self.claim_prompt(message, holder, ttl, Some(after)))
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
        let rows: Vec<Row> = posts.iter().map(Row::encode).collect();
        let from_names: Vec<String> = from.iter().map(|s| name(*s)).collect();
        let to_name = name(to);
        Box::pin(async move {
            let finished = self
                .call(
                    move || format!("end the turn of prompt `{prompt}` in session `{session_id}`"),
                    |mut c| async move {
                        sql::finish_turn(
                            &mut c,
                            session_id,
                            holder,
                            &rows,
                            prompt,
                            &from_names,
                            &to_name,
                        )
                        .await
                    },
                )
                .await?;
            match finished {
                sql::Finished::Done(seqs) => Ok(seqs),
                sql::Finished::Duplicate(i) => Err(StoreError::Duplicate {
                    id: posts[i].id.clone(),
                }),
                sql::Finished::NotLeased { session, id } => Err(StoreError::LeaseLost {
                    id,
                    session,
                    holder: holder.to_owned(),
                }),
            }
        })
    }
}

impl DeltaRelay for PostgresStore {
    fn publish_delta(&self, delta: &Delta) -> bool {
        match &self.inner.relay {
            Some((publisher, _)) => publisher.publish(delta),
            None => false,
        }
    }

    fn delta_feed(&self) -> Option<broadcast::Receiver<Arc<Delta>>> {
        self.inner.relay.as_ref().map(|(_, feed)| feed.subscribe())
    }

    fn changes(&self) -> Option<broadcast::Receiver<Announced>> {
        Some(self.inner.changes.subscribe())
    }
}
