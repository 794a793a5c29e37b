//! The database schema, as versioned migrations (`rusqlite_migration`
//! keeps the version in `SQLite`'s `user_version`). Append a migration to
//! change the schema; never edit one that has shipped.

use rusqlite_migration::{M, Migrations};

/// Version 1: sessions and messages.
///
/// - `messages.seq` is the store's total order. `AUTOINCREMENT` keeps a
///   seq from ever being reused, so a listener's resume point stays valid,
///   and since `SQLite` has one writer at a time, seqs become visible in
///   order: a reader never sees seq 7 before seq 6 is committed.
/// - Timestamps are RFC 3339 in UTC with nanoseconds, fixed width, so they
///   round-trip exactly and compare as text.
/// - `metadata` is a JSON object, as text, in its original key order.
/// - `sessions.messages` counts the session's messages, kept in the same
///   transaction as each insert, so listing sessions does not scan them.
/// - `STRICT` makes `SQLite` reject a value of the wrong type.
const V1: &str = "
CREATE TABLE sessions (
    id       TEXT PRIMARY KEY NOT NULL,
    title    TEXT,
    created  TEXT NOT NULL,
    updated  TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    sender     TEXT NOT NULL,
    role       TEXT NOT NULL,
    type       TEXT NOT NULL,
    status     TEXT NOT NULL,
    content    TEXT NOT NULL,
    metadata   TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    parent_id  TEXT
) STRICT;

-- The history of a session, in order.
CREATE INDEX messages_by_session ON messages (session_id, seq);
-- The messages with status S, in order.
CREATE INDEX messages_by_status ON messages (status, seq);
-- The sessions, the most recently updated first.
CREATE INDEX sessions_by_updated ON sessions (updated DESC, id);
";

/// Version 2: session turn leases.
///
/// - One row per session whose turn some agent holds: `holder` is the
///   agent's id, `expires` milliseconds since the Unix epoch (the
///   processes sharing a file share a clock). A holder renews it while
///   its turn runs; once it expires, another agent may take the session.
const V2: &str = "
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    expires    INTEGER NOT NULL
) STRICT;
";

/// Version 3: fewer pages written per insert (about 4 in place of 8).
///
/// - `messages.seq` without `AUTOINCREMENT`: a new seq is the largest
///   plus one, as before, since the store never deletes a message; the
///   `sqlite_sequence` row is no longer written by every insert.
/// - The status index holds only the statuses that wait for someone
///   ([`WAITING`]): a message that moves on leaves it, and most are
///   never in it. A query for another status reads the table in order.
/// - No index of sessions by their last update: every insert moved the
///   session's entry; listing the sessions sorts them instead.
///
/// The table is copied whole, once, when an older file is opened.
const V3: &str = "
CREATE TABLE messages_v3 (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    sender     TEXT NOT NULL,
    role       TEXT NOT NULL,
    type       TEXT NOT NULL,
    status     TEXT NOT NULL,
    content    TEXT NOT NULL,
    metadata   TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    parent_id  TEXT
) STRICT;
INSERT INTO messages_v3
    (seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id)
SELECT seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id
FROM messages ORDER BY seq;
DROP TABLE messages;
ALTER TABLE messages_v3 RENAME TO messages;
DELETE FROM sqlite_sequence WHERE name = 'messages';

-- The history of a session, in order.
CREATE INDEX messages_by_session ON messages (session_id, seq);
-- The messages waiting with status S, in order. Written as ORs, so that
-- a query for one of them (`status = 'processing'`) may use it.
CREATE INDEX messages_waiting ON messages (status, seq)
    WHERE status = 'pending_agent' OR status = 'processing' OR status = 'pending';
DROP INDEX sessions_by_updated;
";

/// Version 4: a lease is one row in one b-tree.
///
/// - `leases` `WITHOUT ROWID`: keyed by the session itself, where before
///   a rowid table kept a second b-tree (its primary key's index) beside
///   the rows, so taking and dropping a lease wrote two pages each, in
///   every turn.
const V4: &str = "
CREATE TABLE leases_v4 (
    session_id TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    expires    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO leases_v4 (session_id, holder, expires)
SELECT session_id, holder, expires FROM leases;
DROP TABLE leases;
ALTER TABLE leases_v4 RENAME TO leases;
";

/// Version 5: prompts paused for a person's approval are found through
/// the index of waiting statuses too (every sweep of a serving agent
/// looks for those whose deadline passed).
const V5: &str = "
DROP INDEX messages_waiting;
CREATE INDEX messages_waiting ON messages (status, seq)
    WHERE status = 'pending_agent' OR status = 'processing' OR status = 'pending'
       OR status = 'awaiting_approval';
";

/// Version 6: a turn's writes count in their session's row once, at the
/// turn's end, not each in its own transaction.
///
/// - `sessions.counted`: the largest seq that `messages` and `updated`
///   count. The session's later messages (its tail: those a turn has
///   written so far) are counted when the sessions are listed, and folded
///   into the row by a write without a lease, and by dropping the
///   session's lease (`leases_fold`: at a turn's end, a release, a broken
///   lease). A leased write then leaves the row alone: one page fewer in
///   each of a turn's commits. Only a session with a row in `leases` has
///   a tail, so a listing reads past the rows of those only.
/// - Every count is exact after the migration: nothing is in a tail.
/// - A process of an older build may still be writing when a newer one
///   migrates the file. Its writes keep the counts exact too. Its insert
///   counts the message in the session's row first, then stores it, in
///   one transaction: `sessions_counted` and `sessions_counted_new` make
///   that count all the session's messages, the one that follows among
///   them, and `counted` the seq it will be given (the largest plus one,
///   as the table gives it), so no tail is left without a lease row. Its
///   release folds through `leases_fold`.
const V6: &str = "
ALTER TABLE sessions ADD COLUMN counted INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET counted = coalesce(
    (SELECT max(seq) FROM messages WHERE session_id = sessions.id), 0);

CREATE TRIGGER leases_fold AFTER DELETE ON leases
BEGIN
    UPDATE sessions SET
        messages = messages + (SELECT count(*) FROM messages m
                               WHERE m.session_id = OLD.session_id AND m.seq > sessions.counted),
        updated = max(updated, (SELECT max(m.timestamp) FROM messages m
                                WHERE m.session_id = OLD.session_id AND m.seq > sessions.counted)),
        counted = (SELECT max(m.seq) FROM messages m WHERE m.session_id = OLD.session_id)
    WHERE id = OLD.session_id AND EXISTS (SELECT 1 FROM messages m
                                          WHERE m.session_id = OLD.session_id
                                            AND m.seq > sessions.counted);
END;

CREATE TRIGGER sessions_counted_new AFTER INSERT ON sessions WHEN NEW.messages <> 0
BEGIN
    UPDATE sessions SET counted = (SELECT coalesce(max(seq), 0) + 1 FROM messages)
    WHERE id = NEW.id;
END;

CREATE TRIGGER sessions_counted AFTER UPDATE OF messages ON sessions
WHEN NEW.counted = OLD.counted
BEGIN
    UPDATE sessions SET
        messages = (SELECT count(*) + 1 FROM messages m WHERE m.session_id = NEW.id),
        updated = max(NEW.updated, coalesce((SELECT max(m.timestamp) FROM messages m
                                             WHERE m.session_id = NEW.id
                                               AND m.seq > OLD.counted), NEW.updated)),
        counted = (SELECT coalesce(max(seq), 0) + 1 FROM messages)
    WHERE id = NEW.id;
END;
";

/// Version 7: a tail is folded into its session's row with one read of
/// it, where [`V6`]'s `leases_fold` read it three times (its count, its
/// latest timestamp, its last seq), each a walk of the session's index,
/// and the timestamps from the table. The same fold, at every turn's end.
const V7: &str = "
DROP TRIGGER leases_fold;
CREATE TRIGGER leases_fold AFTER DELETE ON leases
BEGIN
    UPDATE sessions SET (messages, updated, counted) =
        (SELECT sessions.messages + count(*), max(sessions.updated, max(m.timestamp)), max(m.seq)
         FROM messages m WHERE m.session_id = OLD.session_id AND m.seq > sessions.counted)
    WHERE id = OLD.session_id AND EXISTS (SELECT 1 FROM messages m
                                          WHERE m.session_id = OLD.session_id
                                            AND m.seq > sessions.counted);
END;
";

/// The statuses the index of waiting messages holds ([`V3`], [`V5`]), by
/// their stored names: a query for one of them names it as a literal, so
/// the index serves it.
pub(crate) const WAITING: [&str; 4] = [
    "pending_agent",
    "processing",
    "pending",
    "awaiting_approval",
];

/// Every migration, oldest first.
pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(V1),
        M::up(V2),
        M::up(V3),
        M::up(V4),
        M::up(V5),
        M::up(V6),
        M::up(V7),
    ])
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    #[test]
    fn migrations_are_valid() {
        assert_eq!(super::migrations().validate(), Ok(()));
    }

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt.query_map([], |row| row.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    /// Each session's id, message count, latest time and `counted`.
    fn counted(conn: &Connection) -> Vec<(String, i64, String, i64)> {
        let mut stmt = conn
            .prepare("SELECT id, messages, updated, counted FROM sessions ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// A file of version 6 with a session mid-turn (a tail, its lease
    /// held) folds the tail when the lease goes, after version 7.
    #[test]
    fn version_7_folds_a_tail_left_by_version_6() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        super::migrations().to_version(&mut conn, 6).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions (id, title, created, updated)
                 VALUES ('s', 'T', '2026', '2026'), ('t', NULL, '2026', '2026');
             INSERT INTO messages VALUES
                 (4, 'a', 's', 'user', 'user', 'text', 'processed', 'hi', '{}', '2026', NULL),
                 (5, 'x', 't', 'user', 'user', 'text', 'processed', 'hi', '{}', '2026', NULL),
                 (7, 'b', 's', 'agent', 'assistant', 'text', 'processed', 'yo', '{}', '2028', NULL),
                 (9, 'c', 's', 'agent', 'assistant', 'text', 'processed', 'yo', '{}', '2027', NULL);
             -- Each row counts its first message; 's' has a tail of two.
             UPDATE sessions SET messages = 1, counted = 4 WHERE id = 's';
             UPDATE sessions SET messages = 1, counted = 5 WHERE id = 't';
             INSERT INTO leases VALUES ('s', 'w', 0), ('t', 'w', 0);",
        )
        .unwrap();
        super::migrations().to_latest(&mut conn).unwrap();
        conn.execute_batch("DELETE FROM leases").unwrap();
        assert_eq!(
            counted(&conn),
            [
                ("s".into(), 3, "2028".into(), 9),
                ("t".into(), 1, "2026".into(), 5),
            ]
        );
    }

    /// A file of version 5 keeps each session's counts through version 6,
    /// with nothing left in a tail: `counted` is the session's last seq.
    #[test]
    fn version_6_counts_every_message_in_its_sessions_row() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        super::migrations().to_version(&mut conn, 5).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('s', 'T', '2026', '2027', 2), ('e', NULL, '2026', '2026', 0);
             INSERT INTO messages VALUES
                 (4, 'a', 's', 'user', 'user', 'text', 'processed', 'hi', '{}', '2026', NULL),
                 (7, 'b', 's', 'agent', 'assistant', 'text', 'processed', 'yo', '{}', '2027', 'a');",
        )
        .unwrap();
        super::migrations().to_latest(&mut conn).unwrap();
        assert_eq!(
            counted(&conn),
            [
                ("e".into(), 0, "2026".into(), 0),
                ("s".into(), 2, "2027".into(), 7),
            ]
        );
    }

    /// A file of version 3 keeps its leases through version 4, whose
    /// table is one b-tree: no index beside it, the rows keyed by session.
    #[test]
    fn version_4_keeps_every_lease_in_one_b_tree() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::migrations().to_version(&mut conn, 3).unwrap();
        conn.execute_batch(
            "INSERT INTO leases VALUES ('s1', 'agent-a', 100), ('s2', 'agent-b', 200);",
        )
        .unwrap();
        super::migrations().to_latest(&mut conn).unwrap();
        let mut stmt = conn
            .prepare("SELECT session_id, holder, expires FROM leases ORDER BY session_id")
            .unwrap();
        let rows: Vec<(String, String, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                ("s1".into(), "agent-a".into(), 100),
                ("s2".into(), "agent-b".into(), 200),
            ]
        );
        let indexes: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'leases'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 0, "a second b-tree beside the leases");
        let duplicate = conn.execute("INSERT INTO leases VALUES ('s1', 'agent-c', 300)", []);
        assert!(duplicate.is_err(), "one lease per session");
    }

    /// A file of version 2 keeps its messages, seqs and sessions through
    /// version 3; the next seq follows the largest; a waiting status is
    /// found through the partial index.
    #[test]
    fn version_3_keeps_every_message_and_its_seq() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        super::migrations().to_version(&mut conn, 2).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('s', 'T', '2026', '2027', 3);
             INSERT INTO messages VALUES
                 (1, 'a', 's', 'user', 'user', 'text', 'processed', 'hi', '{}', '2026', NULL),
                 (5, 'b', 's', 'agent', 'assistant', 'text', 'pending', 'yo', '{}', '2026', 'a'),
                 (9, 'c', 's', 'user', 'user', 'text', 'processing', '?', '{}', '2027', NULL);",
        )
        .unwrap();
        super::migrations().to_latest(&mut conn).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, id, status, parent_id FROM messages ORDER BY seq")
            .unwrap();
        let rows: Vec<(i64, String, String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                (1, "a".into(), "processed".into(), None),
                (5, "b".into(), "pending".into(), Some("a".into())),
                (9, "c".into(), "processing".into(), None),
            ]
        );
        conn.execute(
            "INSERT INTO messages (id, session_id, sender, role, type, status, content, metadata, timestamp)
             VALUES ('d', 's', 'user', 'user', 'text', 'pending_agent', '!', '{}', '2028')",
            [],
        )
        .unwrap();
        assert_eq!(conn.last_insert_rowid(), 10);
        for waiting in super::WAITING {
            let found = plan(
                &conn,
                &format!("SELECT seq FROM messages WHERE status = '{waiting}' ORDER BY seq"),
            );
            assert!(found.contains("messages_waiting"), "{waiting}: {found}");
        }
        let found = plan(
            &conn,
            "SELECT seq FROM messages WHERE session_id = 's' AND seq > 3 ORDER BY seq",
        );
        assert!(found.contains("messages_by_session"), "{found}");
        let sessions: i64 = conn
            .query_row("SELECT messages FROM sessions WHERE id = 's'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(sessions, 3, "the session's row changed");
    }
}
