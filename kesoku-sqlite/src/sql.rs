//! The statements of each store call, run on a connection's thread.

use kesoku_core::Message;
use kesoku_core::store::{Claimed, Page, Seq, SessionInfo};
use std::collections::HashMap;
use std::ops::Deref;

use rusqlite::{Connection, OptionalExtension as _, Params, ffi, params, params_from_iter};

use crate::codec::{self, COLUMNS, Row};
use crate::error::{Failure, Undecodable};
use crate::schema;

/// A call's write: a transaction of its own, begun `IMMEDIATE`, or, when
/// the writer's thread has begun one for a group of calls (see
/// `worker.rs`), a savepoint in it, so that a call that fails undoes only
/// its own writes. `IMMEDIATE` takes the write lock up front, waiting out
/// another writer through the busy timeout (a deferred one that reads
/// first could only fail with `SQLITE_BUSY` when it tries to write).
/// Rolled back unless committed.
///
/// Unlike rusqlite's `Transaction`, its statements are cached: parsing
/// them anew took a few microseconds of each write.
struct Immediate<'c> {
    conn: &'c Connection,
    open: bool,
    /// A savepoint in a group's transaction.
    nested: bool,
}

impl<'c> Immediate<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        let nested = !conn.is_autocommit();
        let begin = if nested {
            "SAVEPOINT call"
        } else {
            "BEGIN IMMEDIATE"
        };
        conn.prepare_cached(begin)?.execute([])?;
        Ok(Immediate {
            conn,
            open: true,
            nested,
        })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
        let end = if self.nested {
            "RELEASE call"
        } else {
            "COMMIT"
        };
        self.conn.prepare_cached(end)?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Deref for Immediate<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        // A failed COMMIT may leave the transaction open, or SQLite may
        // have rolled it back already (a group's too, after some errors:
        // the writer's thread sees that); either way the connection must
        // leave it.
        if !self.open || self.conn.is_autocommit() {
            return;
        }
        let undo = if self.nested {
            "ROLLBACK TO call; RELEASE call"
        } else {
            "ROLLBACK"
        };
        let _ = self.conn.execute_batch(undo);
    }
}

/// Saves `row` in one transaction; its seq. With a `holder`, only while
/// that holder's lease of the session is live, and the session's row
/// counts it at the turn's end; without, the row counts it now.
pub(crate) fn insert(
    conn: &mut Connection,
    row: &Row,
    holder: Option<&str>,
) -> Result<Seq, Failure> {
    let tx = Immediate::begin(conn)?;
    if let Some(holder) = holder {
        // Under the write lock: no lease changes hands before the commit.
        require_lease(&tx, &row.session_id, holder, &row.id, now_ms())?;
    }
    let seq = insert_row(&tx, row)?;
    if holder.is_none() {
        count_tail(&tx, &row.session_id)?;
    }
    tx.commit()?;
    Ok(seq)
}

/// Takes `holder`'s lease of `row`'s session for `ttl_ms` and saves `row`
/// in one transaction; its seq, or `None` (nothing written) when another
/// holder's lease is live.
pub(crate) fn insert_claimed(
    conn: &mut Connection,
    row: &Row,
    holder: &str,
    ttl_ms: i64,
) -> Result<Option<Seq>, Failure> {
    let tx = Immediate::begin(conn)?;
    if !take_lease(&tx, &row.session_id, holder, ttl_ms)? {
        return Ok(None);
    }
    // A duplicate drops `tx`, and the lease with it.
    let seq = insert_row(&tx, row)?;
    tx.commit()?;
    Ok(Some(seq))
}

/// [`insert_claimed`], then the messages of `row`'s session after `after`
/// (`row` last), read in the same transaction: the view of a turn's
/// agent brought up to date without a transaction of its own.
pub(crate) fn insert_claimed_after(
    conn: &mut Connection,
    row: &Row,
    holder: &str,
    ttl_ms: i64,
    after: Seq,
) -> Result<Option<Claimed>, Failure> {
    let tx = Immediate::begin(conn)?;
    if !take_lease(&tx, &row.session_id, holder, ttl_ms)? {
        return Ok(None);
    }
    let seq = insert_row(&tx, row)?;
    let newer = session_after(&tx, &row.session_id, after)?;
    tx.commit()?;
    Ok(Some(Claimed::new(seq, newer)))
}

/// Ends `holder`'s turn of `session_id` in one transaction: saves `rows`,
/// sets `prompt`'s status to `to` if it is one of `from`, drops the
/// lease, and counts the turn's messages in their sessions' rows; the
/// rows' seqs. Nothing is written when a part is refused.
pub(crate) fn finish_turn(
    conn: &mut Connection,
    session_id: &str,
    holder: &str,
    rows: &[Row],
    prompt: &str,
    from: &[String],
    to: &str,
) -> Result<Vec<Seq>, Failure> {
    let tx = Immediate::begin(conn)?;
    let now = now_ms();
    // Under the write lock: the lease cannot change hands before the commit.
    require_lease(&tx, session_id, holder, prompt, now)?;
    let mut seqs = Vec::with_capacity(rows.len());
    for row in rows {
        if row.session_id != session_id {
            require_lease(&tx, &row.session_id, holder, &row.id, now)?;
        }
        seqs.push(insert_row(&tx, row)?);
    }
    settle_leased(&tx, prompt, from, to, holder, now, Some(session_id))?;
    // Folds the session's tail (`leases_fold`).
    release(&tx, session_id, holder)?;
    for (i, row) in rows.iter().enumerate() {
        let first = rows[..i].iter().all(|r| r.session_id != row.session_id);
        if row.session_id != session_id && first {
            count_tail(&tx, &row.session_id)?;
        }
    }
    tx.commit()?;
    Ok(seqs)
}

/// Fails with [`Failure::LeaseLost`] (for the write of `id`) unless
/// `holder` holds the lease of `session`, live at `now`.
fn require_lease(
    conn: &Connection,
    session: &str,
    holder: &str,
    id: &str,
    now: i64,
) -> Result<(), Failure> {
    let held = conn
        .prepare_cached(
            "SELECT 1 FROM leases WHERE session_id = ?1 AND holder = ?2 AND expires > ?3",
        )?
        .exists(params![session, holder, now])?;
    if held {
        Ok(())
    } else {
        Err(Failure::LeaseLost {
            id: id.to_owned(),
            session: session.to_owned(),
            holder: holder.to_owned(),
        })
    }
}

/// Saves `row` inside the caller's transaction, in its session's tail
/// (see [`count_tail`]); its seq. The session's row is made by its first
/// message and given the first title; otherwise it is not written.
fn insert_row(conn: &Connection, row: &Row) -> Result<Seq, Failure> {
    // A message that may title its session goes through the session's
    // row first. One that cannot (most of a turn's) needs the row only
    // to exist, which the messages' foreign key checks as it goes in:
    // the row is made only when that finds it missing.
    if row.title.is_some() {
        put_session(conn, row)?;
    }
    match insert_message(conn, row) {
        Err(Failure::Sql(rusqlite::Error::SqliteFailure(e, _)))
            if e.extended_code == ffi::SQLITE_CONSTRAINT_FOREIGNKEY && row.title.is_none() =>
        {
            // The failed statement wrote nothing; the transaction goes on.
            put_session(conn, row)?;
            insert_message(conn, row)
        }
        other => other,
    }
}

/// Makes `row`'s session's row if it has none, or gives it `row`'s title
/// if it has none.
fn put_session(conn: &Connection, row: &Row) -> Result<(), Failure> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, title, created, updated) VALUES (?1, ?2, ?3, ?3)
         ON CONFLICT (id) DO UPDATE SET title = excluded.title
         WHERE sessions.title IS NULL AND excluded.title IS NOT NULL",
    )?
    .execute(params![row.session_id, row.title, row.timestamp])?;
    Ok(())
}

/// Stores `row` in `messages`; its seq.
fn insert_message(conn: &Connection, row: &Row) -> Result<Seq, Failure> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO messages
                 (id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            row.id,
            row.session_id,
            row.sender,
            row.role,
            row.kind,
            row.status,
            row.content,
            row.metadata,
            row.timestamp,
            row.parent_id,
        ]);
    match inserted {
        // The caller's transaction, dropped, rolls the session's update
        // back too.
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.extended_code == ffi::SQLITE_CONSTRAINT_UNIQUE =>
        {
            return Err(Failure::Duplicate(row.id.clone()));
        }
        other => other?,
    };
    Ok(conn.last_insert_rowid())
}

/// The message with this id.
pub(crate) fn get(conn: &mut Connection, id: &str) -> Result<Option<Message>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM messages WHERE id = ?1");
    Ok(messages(conn, &sql, [id])?.pop().map(|(_, m)| m))
}

/// A session's messages, in order.
pub(crate) fn history(conn: &mut Connection, session_id: &str) -> Result<Vec<Message>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM messages WHERE session_id = ?1 ORDER BY seq");
    Ok(messages(conn, &sql, [session_id])?
        .into_iter()
        .map(|(_, m)| m)
        .collect())
}

/// A session's messages after `seq`, in order.
pub(crate) fn history_after(
    conn: &mut Connection,
    session_id: &str,
    seq: Seq,
) -> Result<Vec<(Seq, Message)>, Failure> {
    session_after(conn, session_id, seq)
}

/// [`history_after`] on any connection (inside a caller's transaction too).
fn session_after(
    conn: &Connection,
    session_id: &str,
    seq: Seq,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql =
        format!("SELECT {COLUMNS} FROM messages WHERE session_id = ?1 AND seq > ?2 ORDER BY seq");
    messages(conn, &sql, params![session_id, seq])
}

/// A page of a session's messages, in order.
pub(crate) fn history_page(
    conn: &mut Connection,
    session_id: &str,
    page: Page,
) -> Result<Vec<(Seq, Message)>, Failure> {
    // The newest of a range read from its end, then put in order.
    let order = if page.newest { "DESC" } else { "ASC" };
    let sql = format!(
        "SELECT {COLUMNS} FROM messages WHERE session_id = ?1 AND seq > ?2 AND seq < ?3
         ORDER BY seq {order} LIMIT ?4"
    );
    let limit = i64::try_from(page.limit).unwrap_or(i64::MAX);
    let mut found = messages(
        conn,
        &sql,
        params![session_id, page.after, page.before, limit],
    )?;
    if page.newest {
        found.reverse();
    }
    Ok(found)
}

/// Up to `limit` messages after `seq`.
pub(crate) fn after(
    conn: &mut Connection,
    seq: Seq,
    limit: usize,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let sql = format!("SELECT {COLUMNS} FROM messages WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    messages(conn, &sql, params![seq, limit])
}

/// The messages with status `status` (its stored name).
pub(crate) fn with_status(
    conn: &mut Connection,
    status: &str,
) -> Result<Vec<(Seq, Message)>, Failure> {
    // A waiting status is named as a literal, for the planner to see
    // that the partial index holds it (it cannot see that of `?1`); it
    // is one of our own names, never the caller's text.
    if let Some(waiting) = schema::WAITING.iter().find(|w| **w == status) {
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE status = '{waiting}' ORDER BY seq");
        messages(conn, &sql, [])
    } else {
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE status = ?1 ORDER BY seq");
        messages(conn, &sql, [status])
    }
}

/// Sets the status of `id` to `to` if it is one of `from`, in one
/// conditional update; whether a row changed.
pub(crate) fn transition(
    conn: &Connection,
    id: &str,
    from: &[String],
    to: &str,
) -> Result<bool, Failure> {
    transition_where(conn, id, None, from, to)
}

/// [`transition`], only if the message is in `session` when one is given.
fn transition_where(
    conn: &Connection,
    id: &str,
    session: Option<&str>,
    from: &[String],
    to: &str,
) -> Result<bool, Failure> {
    if from.is_empty() {
        return Ok(false);
    }
    let marks = vec!["?"; from.len()].join(", ");
    let in_session = if session.is_some() {
        " AND session_id = ?"
    } else {
        ""
    };
    let sql =
        format!("UPDATE messages SET status = ? WHERE id = ?{in_session} AND status IN ({marks})");
    let values = [to, id]
        .into_iter()
        .chain(session)
        .chain(from.iter().map(String::as_str));
    let changed = conn
        .prepare_cached(&sql)?
        .execute(params_from_iter(values))?;
    Ok(changed == 1)
}

/// [`transition`], only while `holder` holds the live lease of the
/// message's session (checked under the write lock).
pub(crate) fn transition_leased(
    conn: &mut Connection,
    id: &str,
    from: &[String],
    to: &str,
    holder: &str,
) -> Result<bool, Failure> {
    let tx = Immediate::begin(conn)?;
    let changed = settle_leased(&tx, id, from, to, holder, now_ms(), None)?;
    tx.commit()?;
    Ok(changed)
}

/// [`transition`] inside the caller's transaction, only while `holder`
/// holds the lease of the message's session, live at `now` (not checked
/// again for `held`, a session whose lease the caller checked in this
/// transaction); `false` for an unknown id.
#[allow(clippy::too_many_arguments)] // One statement's inputs.
fn settle_leased(
    conn: &Connection,
    id: &str,
    from: &[String],
    to: &str,
    holder: &str,
    now: i64,
    held: Option<&str>,
) -> Result<bool, Failure> {
    // Most often the message is in the session whose lease was checked:
    // then one conditional update does it.
    if let Some(held) = held
        && transition_where(conn, id, Some(held), from, to)?
    {
        return Ok(true);
    }
    let session: Option<String> = conn
        .prepare_cached("SELECT session_id FROM messages WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()?;
    let Some(session) = session else {
        return Ok(false);
    };
    if held != Some(session.as_str()) {
        require_lease(conn, &session, holder, id, now)?;
    }
    transition(conn, id, from, to)
}

/// Counts the messages of `session_id` after its row's `counted` (its
/// tail) in the row, inside the caller's transaction. Writes nothing when
/// the tail is empty. (Dropping a session's lease row does the same, in
/// the schema's `leases_fold`, so that no tail outlives it: [`sessions`]
/// reads the tails of leased sessions only.)
fn count_tail(conn: &Connection, session_id: &str) -> Result<(), Failure> {
    conn.prepare_cached(
        "UPDATE sessions SET (messages, updated, counted) =
             (SELECT sessions.messages + count(*), max(sessions.updated, max(m.timestamp)), max(m.seq)
              FROM messages m WHERE m.session_id = ?1 AND m.seq > sessions.counted)
         WHERE id = ?1 AND EXISTS (SELECT 1 FROM messages m
                                   WHERE m.session_id = ?1 AND m.seq > sessions.counted)",
    )?
    .execute([session_id])?;
    Ok(())
}

/// Every session, the most recently updated first; each row's counts
/// with its tail's. Only a session with a lease row has a tail (a tail is
/// made by leased writes, and folded before the row goes: see
/// [`count_tail`]), so only those are read past their row.
pub(crate) fn sessions(conn: &mut Connection) -> Result<Vec<SessionInfo>, Failure> {
    // Both reads from one snapshot (a savepoint: in a group's
    // transaction too).
    let tx = conn.savepoint()?;
    let mut tails = HashMap::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT s.id, count(*), max(m.timestamp)
             FROM leases l JOIN sessions s ON s.id = l.session_id
             JOIN messages m ON m.session_id = s.id AND m.seq > s.counted
             GROUP BY s.id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let tail: (i64, String) = (row.get(1)?, row.get(2)?);
            tails.insert(row.get::<_, String>(0)?, tail);
        }
    }
    let had_tails = !tails.is_empty();
    let mut out = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT id, title, created, updated, messages FROM sessions ORDER BY updated DESC, id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            let bad = |message: String| Undecodable {
                id: id.clone(),
                message,
            };
            let created = codec::parse_time(&row.get::<_, String>(2)?).map_err(bad)?;
            let mut info = SessionInfo::new(id.clone(), created);
            info.title = row.get(1)?;
            info.updated = codec::parse_time(&row.get::<_, String>(3)?).map_err(bad)?;
            let mut messages = row.get::<_, i64>(4)?;
            if let Some((n, latest)) = tails.remove(&id) {
                messages += n;
                info.updated = info.updated.max(codec::parse_time(&latest).map_err(bad)?);
            }
            info.messages =
                u64::try_from(messages).map_err(|_| bad("a negative message count".into()))?;
            out.push(info);
        }
    }
    tx.commit()?;
    if had_tails {
        // A tail may have moved its session up.
        out.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
    }
    Ok(out)
}

/// The largest seq, 0 when empty.
pub(crate) fn last_seq(conn: &mut Connection) -> Result<Seq, Failure> {
    let seq = conn
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM messages")?
        .query_row([], |row| row.get(0))?;
    Ok(seq)
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Takes or renews `holder`'s lease of `session_id` for `ttl_ms`; whether
/// `holder` holds it now.
pub(crate) fn lease(
    conn: &mut Connection,
    session_id: &str,
    holder: &str,
    ttl_ms: i64,
) -> Result<bool, Failure> {
    take_lease(conn, session_id, holder, ttl_ms)
}

/// [`lease`] on any connection (inside a caller's transaction too).
fn take_lease(
    conn: &Connection,
    session_id: &str,
    holder: &str,
    ttl_ms: i64,
) -> Result<bool, Failure> {
    let now = now_ms();
    let changed = conn
        .prepare_cached(
            "INSERT INTO leases (session_id, holder, expires) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
             WHERE leases.holder = excluded.holder OR leases.expires <= ?4",
        )?
        .execute(params![session_id, holder, now.saturating_add(ttl_ms), now])?;
    Ok(changed == 1)
}

/// Extends `holder`'s live lease of `session_id` to `ttl_ms` from now;
/// whether it did (never creates one).
pub(crate) fn renew(
    conn: &mut Connection,
    session_id: &str,
    holder: &str,
    ttl_ms: i64,
) -> Result<bool, Failure> {
    let now = now_ms();
    let changed = conn
        .prepare_cached(
            "UPDATE leases SET expires = ?3 WHERE session_id = ?1 AND holder = ?2 AND expires > ?4",
        )?
        .execute(params![session_id, holder, now.saturating_add(ttl_ms), now])?;
    Ok(changed == 1)
}

/// Drops `holder`'s lease of `session_id` (which folds the session's
/// tail, see `leases_fold`); whether it held it.
pub(crate) fn release(conn: &Connection, session_id: &str, holder: &str) -> Result<bool, Failure> {
    let changed = conn
        .prepare_cached("DELETE FROM leases WHERE session_id = ?1 AND holder = ?2")?
        .execute(params![session_id, holder])?;
    Ok(changed == 1)
}

/// The oldest claimable prompt (`?1`: now). An older prompt of the
/// session, waiting or running, is looked for among the waiting messages
/// (a few), not along the session's index (its whole history, which
/// `SQLite` would otherwise walk): one subquery per status, each through
/// the partial index.
fn claim_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM messages m
         WHERE m.status = 'pending_agent' AND m.role = 'user'
           AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.session_id = m.session_id AND l.expires > ?1)
           AND NOT EXISTS (SELECT 1 FROM messages o INDEXED BY messages_waiting
                           WHERE o.status = 'pending_agent' AND o.seq < m.seq
                             AND o.session_id = m.session_id AND o.role = 'user')
           AND NOT EXISTS (SELECT 1 FROM messages o INDEXED BY messages_waiting
                           WHERE o.status = 'processing' AND o.seq < m.seq
                             AND o.session_id = m.session_id AND o.role = 'user')
         ORDER BY m.seq LIMIT 1"
    )
}

/// Claims the oldest pending user message of a session with no live
/// lease (and no older one pending, or left `processing` by a dead worker
/// until it is requeued), leasing the session to `holder`.
pub(crate) fn claim_next(
    conn: &mut Connection,
    holder: &str,
    ttl_ms: i64,
) -> Result<Option<(Seq, Message)>, Failure> {
    let now = now_ms();
    let tx = Immediate::begin(conn)?;
    let sql = claim_sql();
    let Some((seq, mut message)) = messages(&tx, &sql, [now])?.pop() else {
        return Ok(None);
    };
    tx.prepare_cached(
        "INSERT INTO leases (session_id, holder, expires) VALUES (?1, ?2, ?3)
         ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires",
    )?
    .execute(params![message.session_id, holder, now.saturating_add(ttl_ms)])?;
    tx.prepare_cached("UPDATE messages SET status = 'processing' WHERE seq = ?1")?
        .execute([seq])?;
    tx.commit()?;
    message.status = kesoku_core::Status::Processing;
    Ok(Some((seq, message)))
}

/// Drops `session_id`'s lease, whoever holds it (which folds the
/// session's tail, see `leases_fold`); whether there was one.
pub(crate) fn break_lease(conn: &mut Connection, session_id: &str) -> Result<bool, Failure> {
    let changed = conn
        .prepare_cached("DELETE FROM leases WHERE session_id = ?1")?
        .execute([session_id])?;
    Ok(changed == 1)
}

/// Puts the `processing` user messages of sessions without a live lease
/// back to `pending_agent`; those messages.
pub(crate) fn requeue_expired(conn: &mut Connection) -> Result<Vec<(Seq, Message)>, Failure> {
    let tx = Immediate::begin(conn)?;
    let sql = format!(
        "UPDATE messages SET status = 'pending_agent'
         WHERE status = 'processing' AND role = 'user'
           AND NOT EXISTS (SELECT 1 FROM leases l
                           WHERE l.session_id = messages.session_id AND l.expires > ?1)
         RETURNING {COLUMNS}"
    );
    let mut found = messages(&tx, &sql, [now_ms()])?;
    tx.commit()?;
    found.sort_by_key(|(seq, _)| *seq);
    Ok(found)
}

/// `PRAGMA integrity_check`: "ok", or its findings, one per line.
pub(crate) fn integrity_check(conn: &mut Connection) -> Result<String, Failure> {
    let mut stmt = conn.prepare("PRAGMA integrity_check")?;
    let lines = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(lines.join("\n"))
}

/// The messages `sql` selects (its columns [`COLUMNS`]).
fn messages(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Result<Vec<(Seq, Message)>, Failure> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(codec::decode(row)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
