//! The statements of each store call, and a row as a message.

use std::sync::LazyLock;

use deadpool_postgres::{Client, GenericClient};
use kesoku_core::Message;
use kesoku_core::store::row::{Row, parse_time, variant};
use kesoku_core::store::{Page, Seq, SessionInfo};
use tokio_postgres::types::ToSql;

use crate::error::{Failure, is_duplicate};

/// The columns [`decode`] reads, in its order.
const COLUMNS: &str =
    "seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id";

/// The `NOTIFY` channel each insert announces itself on, with the payload
/// `SEQ ROLE STATUS SESSION` (just `SEQ` for a session id over 512 bytes:
/// a payload must stay under 8,000).
pub(crate) const CHANNEL: &str = "kesoku_messages";

/// `config` with `synchronous_commit` off for its sessions (added to the
/// server options the URL gives): their commits do not wait for the disk.
pub(crate) fn commit_asynchronously(config: &mut tokio_postgres::Config) {
    let options = match config.get_options() {
        Some(o) if !o.is_empty() => format!("{o} -c synchronous_commit=off"),
        _ => "-c synchronous_commit=off".to_owned(),
    };
    config.options(&options);
}

/// What an insert did.
pub(crate) enum Inserted {
    /// Stored at this seq.
    At(Seq),
    /// An id stored already: nothing written.
    Duplicate,
    /// A leased insert whose holder does not hold the session's live
    /// lease: nothing written.
    NotLeased,
}

/// The insert's one statement; with `fenced`, it writes only while `$12`
/// holds the session's live lease.
///
/// One statement, so one round trip and one transaction (the `NOTIFY`
/// included, sent when it commits): the counter is taken first (every
/// part reads `c`), which orders the inserts and keeps two of one session
/// from locking its row in opposite orders. A fenced insert first locks
/// the lease row `FOR SHARE`, so no other worker takes the lease before
/// this commits (and one that took it already leaves no row to lock);
/// without the lease the counter is not touched, so no seq is skipped.
fn insert_sql(fenced: bool) -> String {
    let (lease, counted) = if fenced {
        (
            "l AS (SELECT 1 FROM kesoku_leases
                   WHERE session_id = $2 AND holder = $12 AND expires > clock_timestamp()
                   FOR SHARE),",
            " WHERE EXISTS (SELECT 1 FROM l)",
        )
    } else {
        ("", "")
    };
    format!(
        "WITH {lease} c AS (UPDATE kesoku_counter SET seq = seq + 1{counted} RETURNING seq),
         s AS (
             INSERT INTO kesoku_sessions (id, title, created, updated, messages)
             SELECT $2, $11, $10, $10, 1 FROM c
             ON CONFLICT (id) DO UPDATE SET
                 title = coalesce(kesoku_sessions.title, excluded.title),
                 updated = greatest(kesoku_sessions.updated, excluded.updated),
                 messages = kesoku_sessions.messages + 1
         ),
         m AS (
             INSERT INTO kesoku_messages
                 (seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id)
             SELECT c.seq, $1, $2, $3, $4, $5, $6, $7, $8, $10, $9 FROM c
             RETURNING seq
         )
         SELECT seq, pg_notify('kesoku_messages', CASE
             WHEN octet_length($2) <= 512 THEN seq || ' ' || $4 || ' ' || $6 || ' ' || $2
             ELSE seq::text END) FROM m"
    )
}

/// Saves `row` and its session (with a `holder`, only while it holds the
/// session's live lease), then waits for the log to be flushed.
pub(crate) async fn insert(
    client: &Client,
    row: &Row,
    holder: Option<&str>,
) -> Result<Inserted, Failure> {
    let inserted = insert_row(client, row, holder).await?;
    if let Inserted::At(_) = inserted {
        flushed(client).await?;
    }
    Ok(inserted)
}

/// [`insert`] on a connection or in a transaction, without waiting for
/// the flush.
async fn insert_row(
    client: &impl GenericClient,
    row: &Row,
    holder: Option<&str>,
) -> Result<Inserted, Failure> {
    static PLAIN: LazyLock<String> = LazyLock::new(|| insert_sql(false));
    static FENCED: LazyLock<String> = LazyLock::new(|| insert_sql(true));
    let sql = if holder.is_some() { &FENCED } else { &PLAIN };
    let stmt = client.prepare_cached(sql).await?;
    let content = row.content.as_bytes();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &row.id,
        &row.session_id,
        &row.sender,
        &row.role,
        &row.kind,
        &row.status,
        &content,
        &row.metadata,
        &row.parent_id,
        &row.timestamp,
        &row.title,
    ];
    if let Some(holder) = &holder {
        params.push(holder);
    }
    let seq = match client.query_opt(&stmt, &params).await {
        Ok(Some(r)) => r.get(0),
        Ok(None) => return Ok(Inserted::NotLeased),
        Err(e) if is_duplicate(&e) => return Ok(Inserted::Duplicate),
        Err(e) => return Err(e.into()),
    };
    Ok(Inserted::At(seq))
}

/// Takes `holder`'s lease of `row`'s session for `ttl_ms` and saves `row`
/// in one transaction, then waits for the flush; `None` (nothing written)
/// when another holder's lease is live.
/// With `after`, also the messages of `row`'s session after it, read
/// once the transaction is committed (`row` among them).
pub(crate) async fn insert_claimed(
    client: &mut Client,
    row: &Row,
    holder: &str,
    ttl_ms: f64,
    after: Option<Seq>,
) -> Result<Option<(Inserted, Vec<(Seq, Message)>)>, Failure> {
    let tx = client.transaction().await?;
    if !lease(&tx, &row.session_id, holder, ttl_ms).await? {
        return Ok(None);
    }
    // The lease is taken before the counter, as a leased insert takes
    // them: no two transactions wait on each other. A duplicate drops
    // `tx`, and the lease with it.
    let inserted = insert_row(&tx, row, None).await?;
    let mut newer = Vec::new();
    if let Inserted::At(_) = inserted {
        tx.commit().await?;
        // Read after the commit, so the order counter's lock is not held
        // through it: every message before the prompt committed before
        // it took the counter, so none is missed.
        if let Some(after) = after {
            newer = history_after(&*client, &row.session_id, after).await?;
        }
        flushed(client).await?;
    }
    Ok(Some((inserted, newer)))
}

/// What [`finish_turn`] did.
pub(crate) enum Finished {
    /// All done: the posts' seqs.
    Done(Vec<Seq>),
    /// Post `i` is stored already: nothing written.
    Duplicate(usize),
    /// `holder` does not hold the live lease of this session (for the
    /// write of this id): nothing written.
    NotLeased { session: String, id: String },
}

/// Ends `holder`'s turn of `session_id` in one transaction: saves `rows`,
/// sets `prompt`'s status to `to` if it is one of `from`, and drops the
/// lease; then waits for the flush. Nothing is written when a part is
/// refused.
pub(crate) async fn finish_turn(
    client: &mut Client,
    session_id: &str,
    holder: &str,
    rows: &[Row],
    prompt: &str,
    from: &[String],
    to: &str,
) -> Result<Finished, Failure> {
    let tx = client.transaction().await?;
    // Locked for the transaction: the lease cannot change hands before
    // the commit, and is deleted by it.
    let held = tx
        .prepare_cached(
            "SELECT 1 FROM kesoku_leases
             WHERE session_id = $1 AND holder = $2 AND expires > clock_timestamp()
             FOR UPDATE",
        )
        .await?;
    if tx
        .query_opt(&held, &[&session_id, &holder])
        .await?
        .is_none()
    {
        return Ok(Finished::NotLeased {
            session: session_id.to_owned(),
            id: prompt.to_owned(),
        });
    }
    let mut seqs = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let fence = (row.session_id != session_id).then_some(holder);
        match insert_row(&tx, row, fence).await? {
            Inserted::At(seq) => seqs.push(seq),
            Inserted::Duplicate => return Ok(Finished::Duplicate(i)),
            Inserted::NotLeased => {
                return Ok(Finished::NotLeased {
                    session: row.session_id.clone(),
                    id: row.id.clone(),
                });
            }
        }
    }
    if let Leased::NotLeased(session) = transition_leased(&tx, prompt, from, to, holder).await? {
        return Ok(Finished::NotLeased {
            session,
            id: prompt.to_owned(),
        });
    }
    release(&tx, session_id, holder).await?;
    tx.commit().await?;
    flushed(client).await?;
    Ok(Finished::Done(seqs))
}

/// Returns once everything this connection committed is on disk (as the
/// server's `synchronous_commit` would have it): a transaction that
/// writes a little WAL and commits synchronously flushes the log up to
/// its own commit, which is after every earlier one. Many inserts waiting
/// at once share one flush, and none holds the order counter's lock
/// meanwhile.
async fn flushed(client: &Client) -> Result<(), Failure> {
    client
        .batch_execute(
            "BEGIN; SET LOCAL synchronous_commit TO on; \
             SELECT pg_logical_emit_message(true, 'kesoku', ''); COMMIT",
        )
        .await?;
    Ok(())
}

/// The message with this id.
pub(crate) async fn get(client: &Client, id: &str) -> Result<Option<Message>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM kesoku_messages WHERE id = $1");
    Ok(messages(client, &sql, &[&id]).await?.pop().map(|(_, m)| m))
}

/// A session's messages after `seq`, in order.
pub(crate) async fn history_after(
    client: &impl GenericClient,
    session_id: &str,
    seq: Seq,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql = format!(
        "SELECT {COLUMNS} FROM kesoku_messages WHERE session_id = $1 AND seq > $2 ORDER BY seq"
    );
    messages(client, &sql, &[&session_id, &seq]).await
}

/// A page of a session's messages, in order.
pub(crate) async fn history_page(
    client: &Client,
    session_id: &str,
    page: Page,
) -> Result<Vec<(Seq, Message)>, Failure> {
    // The newest of a range read from its end, then put in order.
    let order = if page.newest { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT {COLUMNS} FROM kesoku_messages WHERE session_id = $1 AND seq > $2 AND seq < $3
         ORDER BY seq {order} LIMIT $4"
    );
    let limit = i64::try_from(page.limit).unwrap_or(i64::MAX);
    let mut found = messages(
        client,
        &sql,
        &[&session_id, &page.after, &page.before, &limit],
    )
    .await?;
    if page.newest {
        found.reverse();
    }
    Ok(found)
}

/// Up to `limit` messages after `seq`.
pub(crate) async fn after(
    client: &Client,
    seq: Seq,
    limit: usize,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM kesoku_messages WHERE seq > $1 ORDER BY seq LIMIT $2");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    messages(client, &sql, &[&seq, &limit]).await
}

/// The messages with status `status` (its stored name).
pub(crate) async fn with_status(
    client: &Client,
    status: &str,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM kesoku_messages WHERE status = $1 ORDER BY seq");
    messages(client, &sql, &[&status]).await
}

/// Sets the status of `id` to `to` if it is one of `from`; whether it
/// changed.
pub(crate) async fn transition(
    client: &Client,
    id: &str,
    from: &[String],
    to: &str,
) -> Result<bool, Failure> {
    let stmt = client
        .prepare_cached("UPDATE kesoku_messages SET status = $1 WHERE id = $2 AND status = ANY($3)")
        .await?;
    Ok(client.execute(&stmt, &[&to, &id, &from]).await? == 1)
}

/// What a leased transition did.
pub(crate) enum Leased {
    /// The lease was held; whether the status changed (`false` for an
    /// unknown id or a status not in `from`).
    Done(bool),
    /// The lease of the message's session (named) was not `holder`'s, or
    /// not live: nothing changed.
    NotLeased(String),
}

/// [`transition`], only while `holder` holds the live lease of the
/// message's session, whose row it locks `FOR SHARE` (as a leased insert
/// does) so no other worker takes it before this commits.
pub(crate) async fn transition_leased(
    client: &impl GenericClient,
    id: &str,
    from: &[String],
    to: &str,
    holder: &str,
) -> Result<Leased, Failure> {
    let stmt = client
        .prepare_cached(
            "WITH msg AS (SELECT session_id FROM kesoku_messages WHERE id = $2),
             l AS (SELECT 1 FROM kesoku_leases
                   WHERE session_id = (SELECT session_id FROM msg) AND holder = $4
                     AND expires > clock_timestamp()
                   FOR SHARE),
             u AS (UPDATE kesoku_messages SET status = $1
                   WHERE id = $2 AND status = ANY($3) AND EXISTS (SELECT 1 FROM l)
                   RETURNING 1)
             SELECT (SELECT session_id FROM msg), EXISTS (SELECT 1 FROM l), EXISTS (SELECT 1 FROM u)",
        )
        .await?;
    let row = client.query_one(&stmt, &[&to, &id, &from, &holder]).await?;
    let session: Option<String> = row.try_get(0)?;
    let (held, changed): (bool, bool) = (row.try_get(1)?, row.try_get(2)?);
    Ok(match session {
        None => Leased::Done(false),
        Some(session) if !held => Leased::NotLeased(session),
        Some(_) => Leased::Done(changed),
    })
}

/// Every session, the most recently updated first.
pub(crate) async fn sessions(client: &Client) -> Result<Vec<SessionInfo>, Failure> {
    let stmt = client
        .prepare_cached(
            "SELECT id, title, created, updated, messages FROM kesoku_sessions ORDER BY updated DESC, id",
        )
        .await?;
    let mut out = Vec::new();
    for row in client.query(&stmt, &[]).await? {
        let id: String = row.try_get(0)?;
        let bad = |message: String| Failure::Corrupt {
            id: id.clone(),
            message,
        };
        let created = parse_time(row.try_get(2)?).map_err(bad)?;
        let mut info = SessionInfo::new(id.clone(), created);
        info.title = row.try_get(1)?;
        info.updated = parse_time(row.try_get(3)?).map_err(bad)?;
        info.messages = u64::try_from(row.try_get::<_, i64>(4)?)
            .map_err(|_| bad("a negative message count".into()))?;
        out.push(info);
    }
    Ok(out)
}

/// The largest seq committed, 0 when empty. Inserts commit in seq order,
/// so every smaller one is committed too.
pub(crate) async fn last_seq(client: &tokio_postgres::Client) -> Result<Seq, Failure> {
    let row = client
        .query_one("SELECT coalesce(max(seq), 0) FROM kesoku_messages", &[])
        .await?;
    Ok(row.get(0))
}

/// Takes or renews `holder`'s lease of `session_id` for `ttl_ms`, on the
/// database's clock; whether `holder` holds it now.
pub(crate) async fn lease(
    client: &impl GenericClient,
    session_id: &str,
    holder: &str,
    ttl_ms: f64,
) -> Result<bool, Failure> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO kesoku_leases (session_id, holder, expires)
             VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
             ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
             WHERE kesoku_leases.holder = excluded.holder OR kesoku_leases.expires <= clock_timestamp()",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&session_id, &holder, &ttl_ms])
        .await?
        == 1)
}

/// Extends `holder`'s live lease of `session_id` to `ttl_ms` from now, on
/// the database's clock; whether it did (never creates one).
pub(crate) async fn renew(
    client: &Client,
    session_id: &str,
    holder: &str,
    ttl_ms: f64,
) -> Result<bool, Failure> {
    let stmt = client
        .prepare_cached(
            "UPDATE kesoku_leases SET expires = clock_timestamp() + $3 * interval '1 millisecond'
             WHERE session_id = $1 AND holder = $2 AND expires > clock_timestamp()",
        )
        .await?;
    Ok(client
        .execute(&stmt, &[&session_id, &holder, &ttl_ms])
        .await?
        == 1)
}

/// Drops `holder`'s lease of `session_id`; whether it held it.
pub(crate) async fn release(
    client: &impl GenericClient,
    session_id: &str,
    holder: &str,
) -> Result<bool, Failure> {
    let stmt = client
        .prepare_cached("DELETE FROM kesoku_leases WHERE session_id = $1 AND holder = $2")
        .await?;
    Ok(client.execute(&stmt, &[&session_id, &holder]).await? == 1)
}

/// Claims the oldest pending user message of a session with no live
/// lease (and no older one pending, or left `processing` by a dead worker
/// until it is requeued), leasing the session to `holder`, in one
/// statement. Workers asking at once skip each other's candidates
/// (`SKIP LOCKED`) instead of queueing on them; one that loses the race
/// for a session's lease gets `None`.
pub(crate) async fn claim_next(
    client: &Client,
    holder: &str,
    ttl_ms: f64,
) -> Result<Option<(Seq, Message)>, Failure> {
    let sql = format!(
        "WITH next AS (
             SELECT m.seq, m.session_id FROM kesoku_messages m
             WHERE m.status = 'pending_agent' AND m.role = 'user'
               AND NOT EXISTS (SELECT 1 FROM kesoku_leases l
                               WHERE l.session_id = m.session_id AND l.expires > clock_timestamp())
               AND NOT EXISTS (SELECT 1 FROM kesoku_messages o
                               WHERE o.session_id = m.session_id
                                 AND o.status IN ('pending_agent', 'processing')
                                 AND o.role = 'user' AND o.seq < m.seq)
             ORDER BY m.seq LIMIT 1
             FOR UPDATE OF m SKIP LOCKED
         ),
         leased AS (
             INSERT INTO kesoku_leases (session_id, holder, expires)
             SELECT session_id, $1, clock_timestamp() + $2 * interval '1 millisecond' FROM next
             ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
             WHERE kesoku_leases.expires <= clock_timestamp()
             RETURNING session_id
         )
         UPDATE kesoku_messages m SET status = 'processing'
         FROM next, leased
         WHERE m.seq = next.seq AND leased.session_id = next.session_id
         RETURNING {}",
        COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(messages(client, &sql, &[&holder, &ttl_ms]).await?.pop())
}

/// Drops `session_id`'s lease, whoever holds it; whether there was one.
pub(crate) async fn break_lease(client: &Client, session_id: &str) -> Result<bool, Failure> {
    let stmt = client
        .prepare_cached("DELETE FROM kesoku_leases WHERE session_id = $1")
        .await?;
    Ok(client.execute(&stmt, &[&session_id]).await? == 1)
}

/// Puts the `processing` user messages of sessions without a live lease
/// back to `pending_agent`; those messages, in order.
pub(crate) async fn requeue_expired(client: &Client) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql = format!(
        "UPDATE kesoku_messages m SET status = 'pending_agent'
         WHERE m.status = 'processing' AND m.role = 'user'
           AND NOT EXISTS (SELECT 1 FROM kesoku_leases l
                           WHERE l.session_id = m.session_id AND l.expires > clock_timestamp())
         RETURNING {}",
        COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut found = messages(client, &sql, &[]).await?;
    found.sort_by_key(|(seq, _)| *seq);
    Ok(found)
}

/// The messages `sql` selects (its columns [`COLUMNS`]).
async fn messages(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<(Seq, Message)>, Failure> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .query(&stmt, params)
        .await?
        .iter()
        .map(decode)
        .collect()
}

/// A row of [`COLUMNS`] as a message and its seq.
fn decode(row: &tokio_postgres::Row) -> Result<(Seq, Message), Failure> {
    let seq: Seq = row.try_get(0)?;
    let id: String = row.try_get(1)?;
    let bad = |message: String| Failure::Corrupt {
        id: id.clone(),
        message,
    };
    let text = |i: usize| row.try_get::<_, String>(i);
    let message = Message {
        session_id: text(2)?,
        sender: text(3)?,
        role: variant(&text(4)?).map_err(bad)?,
        kind: variant(&text(5)?).map_err(bad)?,
        status: variant(&text(6)?).map_err(bad)?,
        content: String::from_utf8(row.try_get::<_, Vec<u8>>(7)?)
            .map_err(|e| bad(format!("content is not UTF-8: {e}")))?,
        metadata: serde_json::from_str(&text(8)?)
            .map_err(|e| bad(format!("metadata is not a JSON object: {e}")))?,
        timestamp: parse_time(&text(9)?).map_err(bad)?,
        parent_id: row.try_get(10)?,
        id: id.clone(),
    };
    Ok((seq, message))
}
