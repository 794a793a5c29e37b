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

/// Every migration, oldest first.
pub(crate) fn migrations() -> Migrations<'static> {
    Migrations::new(vec![M::up(V1), M::up(V2)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_are_valid() {
        assert_eq!(super::migrations().validate(), Ok(()));
    }
}
