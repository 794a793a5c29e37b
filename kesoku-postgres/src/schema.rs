//! The database schema, as versioned migrations. Each process that
//! connects brings the schema up to date under an advisory lock, so
//! processes starting together apply each migration once. Append a
//! migration to change the schema; never edit one that has shipped.

use tokio_postgres::Client;

/// The advisory lock key migrations run under ("kesoku" in ASCII).
const MIGRATION_LOCK: i64 = 0x6B65_736F_6B75;

/// Version 1: sessions, messages, the order counter and turn leases.
///
/// - `kesoku_counter` holds the last `seq` given. An insert takes the next
///   one by updating its single row, which it keeps locked until it
///   commits: inserts commit in `seq` order, so a reader never sees seq 7
///   before seq 6 (listeners rely on it), and a rolled-back insert gives
///   its seq back.
/// - Timestamps are RFC 3339 text in UTC with nanoseconds, fixed width,
///   as in `SQLite` (`timestamptz` keeps only microseconds): they
///   round-trip exactly and compare as text.
/// - `content` is its UTF-8 bytes: `TEXT` cannot hold a NUL character,
///   which a tool's output may.
/// - `metadata` is its JSON object as text, keeping its key order
///   (`jsonb` would sort the keys; JSON escapes any NUL).
/// - Lease expiry times are the database's clock, so workers on machines
///   whose clocks differ agree on them.
const V1: &str = "
CREATE TABLE kesoku_sessions (
    id       TEXT PRIMARY KEY,
    title    TEXT,
    created  TEXT NOT NULL,
    updated  TEXT NOT NULL,
    messages BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE kesoku_messages (
    seq        BIGINT PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES kesoku_sessions (id),
    sender     TEXT NOT NULL,
    role       TEXT NOT NULL,
    type       TEXT NOT NULL,
    status     TEXT NOT NULL,
    content    BYTEA NOT NULL,
    metadata   TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    parent_id  TEXT
);
CREATE INDEX kesoku_messages_by_session ON kesoku_messages (session_id, seq);
CREATE INDEX kesoku_messages_by_status ON kesoku_messages (status, seq);
CREATE INDEX kesoku_sessions_by_updated ON kesoku_sessions (updated DESC, id);
-- The prompts waiting for a worker, in order, and those open (waiting
-- or running) by session: what `claim_next` reads; small, since a prompt
-- leaves them once claimed or answered.
CREATE INDEX kesoku_pending_prompts ON kesoku_messages (seq)
    WHERE status = 'pending_agent' AND role = 'user';
CREATE INDEX kesoku_open_prompts_by_session ON kesoku_messages (session_id, seq)
    WHERE status IN ('pending_agent', 'processing') AND role = 'user';

CREATE TABLE kesoku_counter (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq BIGINT NOT NULL
);
INSERT INTO kesoku_counter (seq) VALUES (0);

CREATE TABLE kesoku_leases (
    session_id TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires    TIMESTAMPTZ NOT NULL
);
";

/// Every migration, oldest first: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[V1];

/// The schema version this build knows.
#[allow(clippy::cast_possible_wrap)] // a handful of migrations
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// Applies the migrations the database lacks, in one transaction, under
/// the advisory lock. The version the database is at after; an error if
/// it is newer than this build knows.
pub(crate) async fn migrate(client: &mut Client) -> Result<i64, MigrateError> {
    let tx = client.transaction().await?;
    // The pool's connections commit asynchronously; a migration waits.
    tx.batch_execute("SET LOCAL synchronous_commit TO on")
        .await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS kesoku_schema (version BIGINT NOT NULL)")
        .await?;
    let at: Option<i64> = tx
        .query_opt("SELECT version FROM kesoku_schema", &[])
        .await?
        .map(|row| row.get(0));
    let at = at.unwrap_or(0);
    if at > VERSION {
        return Err(MigrateError::Newer { at });
    }
    for (i, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(at).unwrap_or(0))
    {
        tx.batch_execute(migration).await?;
        tracing::info!(version = i + 1, "migrated the PostgreSQL store");
    }
    if at == 0 {
        tx.execute(
            "INSERT INTO kesoku_schema (version) VALUES ($1)",
            &[&VERSION],
        )
        .await?;
    } else if at < VERSION {
        tx.execute("UPDATE kesoku_schema SET version = $1", &[&VERSION])
            .await?;
    }
    tx.commit().await?;
    Ok(VERSION)
}

/// Why the schema could not be brought up to date.
#[derive(Debug)]
pub(crate) enum MigrateError {
    /// The database failed.
    Sql(tokio_postgres::Error),
    /// A newer build migrated the database past what this one knows.
    Newer {
        /// The database's version.
        at: i64,
    },
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Sql(e)
    }
}
