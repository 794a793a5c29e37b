//! The statements' unit tests: what a turn's writes leave in its
//! session's row, and an older build's writes among this one's.

use kesoku_core::{Message, MessageType, Role};
use rusqlite::{Connection, OptionalExtension};

use crate::codec;

fn row(id: &str, session: &str) -> codec::Row {
    let mut m = Message::new(session, Role::Assistant, MessageType::Text, "hi");
    m.id = id.into();
    codec::encode(&m)
}

/// A session's id, message count and latest time.
type Counted = (String, u64, String);

/// Each session's counts from its messages, and as [`super::sessions`]
/// lists them.
fn truth_and_listing(conn: &mut Connection) -> (Vec<Counted>, Vec<Counted>) {
    let mut stmt = conn
        .prepare(
            "SELECT session_id, count(*), max(timestamp) FROM messages
             GROUP BY session_id ORDER BY session_id",
        )
        .unwrap();
    let truth = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(stmt);
    let mut listed: Vec<Counted> = super::sessions(conn)
        .unwrap()
        .into_iter()
        .map(|s| (s.id, s.messages, kesoku_core::store::row::time(&s.updated)))
        .collect();
    listed.sort();
    (truth, listed)
}

/// What a build before schema version 6 ran to insert a message.
fn insert_v5(conn: &Connection, row: &codec::Row) {
    conn.execute(
        "INSERT INTO sessions (id, title, created, updated, messages) VALUES (?1, ?2, ?3, ?3, 1)
         ON CONFLICT (id) DO UPDATE SET
             title = coalesce(sessions.title, excluded.title),
             updated = max(sessions.updated, excluded.updated),
             messages = sessions.messages + 1",
        rusqlite::params![row.session_id, row.title, row.timestamp],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO messages
             (id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        rusqlite::params![
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
        ],
    )
    .unwrap();
}

/// A process of an older build still writing to a file a newer one
/// migrated: its inserts and releases, among leased writes of the new
/// build, leave every count and time exact.
#[test]
fn an_older_builds_writes_keep_every_count_exact() {
    let mut conn = crate::connection::memory().unwrap();
    let at = |id: &str, session: &str, secs: i64| {
        let mut m = Message::new(session, Role::Assistant, MessageType::Text, "hi");
        m.id = id.into();
        m.timestamp = chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap();
        codec::encode(&m)
    };
    let exact = |conn: &mut Connection, step: &str| {
        let (truth, listed) = truth_and_listing(conn);
        assert_eq!(listed, truth, "after {step}");
    };
    super::insert(&mut conn, &at("a", "s", 10), None).unwrap();
    assert!(super::lease(&mut conn, "s", "w", 60_000).unwrap());
    super::insert(&mut conn, &at("b", "s", 30), Some("w")).unwrap();
    exact(&mut conn, "b, leased");
    // The old build: a message stamped earlier, in the leased session,
    // then a new session.
    insert_v5(&conn, &at("c", "s", 20));
    exact(&mut conn, "c, old");
    insert_v5(&conn, &at("d", "t", 5));
    exact(&mut conn, "d, old, a new session");
    super::insert(&mut conn, &at("e", "t", 6), None).unwrap();
    exact(&mut conn, "e");
    super::insert(&mut conn, &at("f", "s", 40), Some("w")).unwrap();
    exact(&mut conn, "f, leased");
    insert_v5(&conn, &at("g", "t", 50));
    exact(&mut conn, "g, old");
    // The old build releases the new one's lease.
    conn.execute(
        "DELETE FROM leases WHERE session_id = 's' AND holder = 'w'",
        [],
    )
    .unwrap();
    exact(&mut conn, "the old release");
    super::insert(&mut conn, &at("h", "s", 1), None).unwrap();
    exact(&mut conn, "h");
    let (truth, _) = truth_and_listing(&mut conn);
    assert_eq!(truth.iter().map(|t| t.1).sum::<u64>(), 8);
}

/// The session's row as (messages, counted), and the largest seq.
fn counts(conn: &Connection, session: &str) -> (i64, i64, i64) {
    conn.query_row(
        "SELECT messages, counted, (SELECT max(seq) FROM messages WHERE session_id = ?1)
         FROM sessions WHERE id = ?1",
        [session],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

/// A leased write leaves its session's row alone (the page it would
/// write is the point); the turn's end counts the whole turn; a write
/// without a lease counts at once.
#[test]
fn a_turns_writes_are_counted_in_the_row_at_its_end() {
    let mut conn = crate::connection::memory().unwrap();
    super::insert(&mut conn, &row("m0", "s"), None).unwrap();
    assert_eq!(counts(&conn, "s"), (1, 1, 1));
    assert!(super::lease(&mut conn, "s", "w", 60_000).unwrap());
    super::insert(&mut conn, &row("m1", "s"), Some("w")).unwrap();
    super::insert(&mut conn, &row("m2", "s"), Some("w")).unwrap();
    assert_eq!(
        counts(&conn, "s"),
        (1, 1, 3),
        "a leased write wrote the row"
    );
    let from = ["processing".to_owned()];
    super::finish_turn(
        &mut conn,
        "s",
        "w",
        &[row("m3", "s")],
        "m1",
        &from,
        "processed",
    )
    .unwrap();
    assert_eq!(counts(&conn, "s"), (4, 4, 4));
    // A release counts too; a write without the lease counts all.
    assert!(super::lease(&mut conn, "s", "w", 60_000).unwrap());
    super::insert(&mut conn, &row("m4", "s"), Some("w")).unwrap();
    assert!(super::release(&conn, "s", "w").unwrap());
    assert_eq!(counts(&conn, "s"), (5, 5, 5));
    assert!(super::lease(&mut conn, "s", "w", 60_000).unwrap());
    super::insert(&mut conn, &row("m5", "s"), Some("w")).unwrap();
    super::insert(&mut conn, &row("m6", "s"), None).unwrap();
    assert_eq!(counts(&conn, "s"), (7, 7, 7));
}

/// A message that cannot title its session (most of a turn's) makes the
/// session's row when it is the session's first (the messages' foreign
/// key finds the row missing), leased or not; the first titled message
/// titles it; a refused write leaves no row behind.
#[test]
fn an_untitled_first_message_makes_its_sessions_row() {
    let mut conn = crate::connection::memory().unwrap();
    let row_of = |conn: &Connection, session: &str| {
        conn.query_row(
            "SELECT title, messages FROM sessions WHERE id = ?1",
            [session],
            |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()
        .unwrap()
    };
    super::insert(&mut conn, &row("a1", "s"), None).unwrap();
    assert_eq!(row_of(&conn, "s"), Some((None, 1)));
    let mut prompt = Message::new("s", Role::User, MessageType::Text, "Plan a trip\nto Lyon");
    prompt.id = "u1".into();
    super::insert(&mut conn, &codec::encode(&prompt), None).unwrap();
    assert_eq!(row_of(&conn, "s"), Some((Some("Plan a trip".into()), 2)));

    assert!(super::lease(&mut conn, "t", "w", 60_000).unwrap());
    super::insert(&mut conn, &row("b1", "t"), Some("w")).unwrap();
    assert!(super::release(&conn, "t", "w").unwrap());
    assert_eq!(row_of(&conn, "t"), Some((None, 1)));

    // A duplicate id, first in a new session: refused, no row made.
    assert!(matches!(
        super::insert(&mut conn, &row("a1", "u"), None),
        Err(crate::error::Failure::Duplicate(_))
    ));
    assert_eq!(row_of(&conn, "u"), None);
    let (truth, listed) = truth_and_listing(&mut conn);
    assert_eq!(listed, truth);
}

/// A claim looks for an older prompt of a candidate's session among the
/// waiting messages, never along the session's index: that walk read the
/// session's whole history for every claim.
#[test]
fn a_claim_never_walks_a_sessions_history() {
    let conn = crate::connection::memory().unwrap();
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", super::claim_sql()))
        .unwrap()
        .query_map([0_i64], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        plan.iter()
            .all(|step| !step.contains("messages_by_session")),
        "{plan:#?}"
    );
    let waiting = plan
        .iter()
        .filter(|s| s.contains("messages_waiting"))
        .count();
    assert_eq!(waiting, 3, "{plan:#?}");
}
