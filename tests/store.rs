//! One conformance suite for every `Store`: `store_suite!` runs the same
//! tests against each backend. Adding a backend is one fixture function
//! and one `store_suite!` line.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use kesoku::store::{MemoryStore, Store, StoreError};
use kesoku::{Message, MessageType, Role, Status};
use serde_json::json;

/// Opens another handle on a fixture's database.
type Opener = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// A fresh, empty database and a way to open more handles on it.
struct Fixture {
    store: Arc<dyn Store>,
    /// Another handle on the same database: for `SQLite` or PostgreSQL a
    /// new connection, as a second process would open.
    handle: Opener,
    /// Keeps the database's directory alive.
    _dir: Option<tempfile::TempDir>,
}

/// A handle that is `store` itself.
fn same(store: &Arc<dyn Store>) -> Opener {
    let same = Arc::clone(store);
    Box::new(move || {
        let same = Arc::clone(&same);
        Box::pin(async move { same })
    })
}

#[allow(clippy::unused_async)] // every fixture has the same signature
async fn memory() -> Option<Fixture> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    Some(Fixture {
        handle: same(&store),
        store,
        _dir: None,
    })
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
async fn sqlite() -> Option<Fixture> {
    use kesoku::store::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    Some(Fixture {
        store,
        handle: Box::new(move || {
            let path = path.clone();
            Box::pin(async move { Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn Store> })
        }),
        _dir: Some(dir),
    })
}

#[cfg(feature = "sqlite")]
#[allow(clippy::unused_async)] // every fixture has the same signature
async fn sqlite_in_memory() -> Option<Fixture> {
    let store: Arc<dyn Store> = Arc::new(kesoku::store::SqliteStore::in_memory().unwrap());
    Some(Fixture {
        handle: same(&store),
        store,
        _dir: None,
    })
}

#[cfg(feature = "postgres")]
#[path = "support/pg.rs"]
mod pg;

/// A new database on the test server; `None` (skipped) without one.
#[cfg(feature = "postgres")]
async fn postgres() -> Option<Fixture> {
    use kesoku::store::PostgresStore;
    let url = pg::fresh_database("the PostgreSQL store suite").await?;
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    Some(Fixture {
        store,
        handle: Box::new(move || {
            let url = url.clone();
            Box::pin(async move {
                Arc::new(PostgresStore::connect(&url).await.unwrap()) as Arc<dyn Store>
            })
        }),
        _dir: None,
    })
}

macro_rules! store_suite {
    ($backend:ident, $fixture:path) => {
        store_suite!(@tests $backend, $fixture; round_trip, history_order, history_after_resumes,
            duplicate_writes_nothing,
            after_pages_in_order, with_status_lists_in_order, transition_is_conditional,
            concurrent_claims_have_one_winner, sessions_listing, reopening_sees_everything,
            concurrent_inserts_become_visible_in_order, leases_are_exclusive_until_they_expire,
            expired_turns_are_requeued, claim_next_takes_each_prompt_once_in_order,
            leased_inserts_need_a_live_lease, a_lost_lease_orders_the_old_holders_writes_first,
            leased_transitions_need_a_live_lease);
    };
    (@tests $backend:ident, $fixture:path; $($test:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    if let Some(fixture) = $fixture().await {
                        super::$test(fixture).await;
                    }
                }
            )*
        }
    };
}

store_suite!(memory, super::memory);
#[cfg(feature = "sqlite")]
store_suite!(sqlite, super::sqlite);
#[cfg(feature = "sqlite")]
store_suite!(sqlite_in_memory, super::sqlite_in_memory);
#[cfg(feature = "postgres")]
store_suite!(postgres, super::postgres);

const ROLES: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::System];
const TYPES: [MessageType; 4] = [
    MessageType::Text,
    MessageType::Thought,
    MessageType::ToolCall,
    MessageType::ToolResult,
];
const STATUSES: [Status; 8] = [
    Status::PendingAgent,
    Status::Processing,
    Status::Processed,
    Status::Interrupted,
    Status::Error,
    Status::Pending,
    Status::Delivered,
    Status::Responded,
];

fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, nanos).unwrap()
}

fn msg(id: &str, session: &str, role: Role, content: &str, time: DateTime<Utc>) -> Message {
    let mut m = Message::new(session, role, MessageType::Text, content);
    m.id = id.into();
    m.timestamp = time;
    m
}

/// Every role, type and status, with metadata, unicode, parents and
/// sub-second timestamps, reads back field for field.
async fn round_trip(f: Fixture) {
    let store = f.store;
    let mut stored = Vec::new();
    let mut n = 0u32;
    for role in ROLES {
        for kind in TYPES {
            for status in STATUSES {
                n += 1;
                let mut m =
                    Message::new("s", role, kind, format!("héllo 🌍 {n}\nline two\t\u{0}end"))
                        .with_status(status)
                        .with_sender(if n.is_multiple_of(2) { "" } else { "gpt-ö" });
                m.timestamp = at(i64::from(n), n * 7_654_321 % 1_000_000_000);
                if n.is_multiple_of(3) {
                    m = m.with_parent(format!("parent-{n}"));
                }
                if !n.is_multiple_of(5) {
                    // Keys out of alphabetical order: their order must survive.
                    let serde_json::Value::Object(metadata) = json!({
                        "z": n, "a": [1.5, -2, null, true, "ü"],
                        "m": {"nested": {"deep": [{"k": "v"}]}, "b": 1e300},
                        "big": u64::MAX, "neg": i64::MIN, "empty": {}
                    }) else {
                        unreachable!()
                    };
                    m.metadata = metadata;
                }
                store.insert(&m).await.unwrap();
                stored.push(m);
            }
        }
    }
    for m in &stored {
        let got = store.get(&m.id).await.unwrap().unwrap();
        assert_eq!(&got, m);
        let keys: Vec<_> = got.metadata.keys().collect();
        let want: Vec<_> = m.metadata.keys().collect();
        assert_eq!(keys, want, "metadata key order");
    }
    assert_eq!(store.history("s").await.unwrap(), stored);
    assert_eq!(store.get("no-such-id").await.unwrap(), None);
}

/// A session's history is in insertion order, whatever the timestamps, and
/// holds only its own messages.
async fn history_order(f: Fixture) {
    let store = f.store;
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..20 {
        // Timestamps run backwards: the order is the store's, not the clock's.
        let m = msg(
            &format!("m{i}"),
            if i % 3 == 0 { "b" } else { "a" },
            Role::User,
            "x",
            at(100 - i, 0),
        );
        store.insert(&m).await.unwrap();
        if i % 3 == 0 { b.push(m) } else { a.push(m) }
    }
    assert_eq!(store.history("a").await.unwrap(), a);
    assert_eq!(store.history("b").await.unwrap(), b);
    assert!(store.history("c").await.unwrap().is_empty());
}

/// A session's history after a `Seq` is the rest of `history`, with the
/// seqs a listener sees; other sessions' messages are not in it.
async fn history_after_resumes(f: Fixture) {
    let store = f.store;
    let mut seqs = Vec::new();
    for i in 0..12 {
        let session = if i % 2 == 0 { "a" } else { "b" };
        let m = msg(&format!("m{i}"), session, Role::User, "x", at(i, 0));
        seqs.push((store.insert(&m).await.unwrap(), m));
    }
    let of_a: Vec<_> = seqs
        .iter()
        .filter(|(_, m)| m.session_id == "a")
        .cloned()
        .collect();
    assert_eq!(store.history_after("a", 0).await.unwrap(), of_a);
    for k in 0..of_a.len() {
        let after = of_a[k].0;
        assert_eq!(
            store.history_after("a", after).await.unwrap(),
            of_a[k + 1..]
        );
    }
    // A seq of another session's message resumes just the same.
    let b_seq = seqs[5].0;
    let rest: Vec<_> = of_a.iter().filter(|(q, _)| *q > b_seq).cloned().collect();
    assert_eq!(store.history_after("a", b_seq).await.unwrap(), rest);
    assert!(store.history_after("c", 0).await.unwrap().is_empty());
}

/// A second message with a stored id is rejected, and nothing of it is
/// written: not the message, not its session, not a seq.
async fn duplicate_writes_nothing(f: Fixture) {
    let store = f.store;
    let first = msg("same", "s1", Role::Assistant, "first", at(0, 0));
    let seq = store.insert(&first).await.unwrap();
    let mut again = msg("same", "s2", Role::User, "second", at(5, 0));
    again.metadata.insert("k".into(), json!(1));
    let err = store.insert(&again).await.unwrap_err();
    assert_eq!(err, StoreError::Duplicate { id: "same".into() });
    assert_eq!(store.get("same").await.unwrap(), Some(first.clone()));
    assert!(store.history("s2").await.unwrap().is_empty());
    let sessions = store.sessions().await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].messages, sessions[0].updated), (1, at(0, 0)));
    assert_eq!(sessions[0].title, None);
    assert_eq!(store.last_seq().await.unwrap(), seq);
    // The next insert still gets the next seq.
    let next = store
        .insert(&msg("next", "s1", Role::User, "x", at(1, 0)))
        .await
        .unwrap();
    assert!(next > seq);
}

/// `after` pages through every session's messages in one order, with the
/// seqs `insert` returned; `last_seq` is the last of them.
async fn after_pages_in_order(f: Fixture) {
    let store = f.store;
    assert_eq!(store.last_seq().await.unwrap(), 0);
    assert!(store.after(0, 10).await.unwrap().is_empty());
    let mut expected = Vec::new();
    for i in 0..25 {
        let m = msg(
            &format!("m{i}"),
            &format!("s{}", i % 4),
            Role::User,
            "x",
            at(i, 0),
        );
        let seq = store.insert(&m).await.unwrap();
        if let Some((last, _)) = expected.last() {
            assert!(seq > *last, "seqs increase");
        }
        expected.push((seq, m));
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        let page = store.after(cursor, 10).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 10);
        cursor = page.last().unwrap().0;
        seen.extend(page);
    }
    assert_eq!(seen, expected);
    let last = expected.last().unwrap().0;
    assert_eq!(store.last_seq().await.unwrap(), last);
    assert!(store.after(last, 10).await.unwrap().is_empty());
    assert!(store.after(0, 0).await.unwrap().is_empty());
    assert_eq!(
        store.after(expected[19].0, 3).await.unwrap(),
        expected[20..23]
    );
    assert_eq!(store.after(-5, 1).await.unwrap(), expected[..1]);
}

/// `with_status` lists the messages with a status, in order, and follows
/// transitions.
async fn with_status_lists_in_order(f: Fixture) {
    let store = f.store;
    let mut pending = Vec::new();
    for i in 0..12 {
        let status = if i % 3 == 0 {
            Status::PendingAgent
        } else {
            Status::Processed
        };
        let m = msg(&format!("m{i}"), "s", Role::User, "x", at(i, 0)).with_status(status);
        let seq = store.insert(&m).await.unwrap();
        if status == Status::PendingAgent {
            pending.push((seq, m));
        }
    }
    assert_eq!(
        store.with_status(Status::PendingAgent).await.unwrap(),
        pending
    );
    assert!(
        store
            .with_status(Status::Delivered)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .transition("m3", &[Status::PendingAgent], Status::Delivered)
            .await
            .unwrap()
    );
    let left = store.with_status(Status::PendingAgent).await.unwrap();
    assert_eq!(
        left.iter().map(|(_, m)| m.id.as_str()).collect::<Vec<_>>(),
        ["m0", "m6", "m9"]
    );
    let delivered = store.with_status(Status::Delivered).await.unwrap();
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        (delivered[0].0, delivered[0].1.status),
        (pending[1].0, Status::Delivered)
    );
}

/// `transition` changes the status only from one of `from`.
async fn transition_is_conditional(f: Fixture) {
    let store = f.store;
    let m = msg("m", "s", Role::User, "x", at(0, 0)).with_status(Status::PendingAgent);
    store.insert(&m).await.unwrap();
    let status = || async { store.get("m").await.unwrap().unwrap().status };
    assert!(
        !store
            .transition("m", &[Status::Processing], Status::Processed)
            .await
            .unwrap()
    );
    assert!(!store.transition("m", &[], Status::Processed).await.unwrap());
    assert!(
        !store
            .transition("nope", &[Status::PendingAgent], Status::Processing)
            .await
            .unwrap()
    );
    assert_eq!(status().await, Status::PendingAgent);
    let from = [Status::Error, Status::PendingAgent];
    assert!(
        store
            .transition("m", &from, Status::Processing)
            .await
            .unwrap()
    );
    assert_eq!(status().await, Status::Processing);
    assert!(
        !store
            .transition("m", &from, Status::Processing)
            .await
            .unwrap()
    );
    // To the same status is still a change of one row.
    assert!(
        store
            .transition("m", &[Status::Processing], Status::Processing)
            .await
            .unwrap()
    );
    assert!(
        store
            .transition("m", &[Status::Processing], Status::Processed)
            .await
            .unwrap()
    );
    // Nothing else moved.
    let mut want = m.clone();
    want.status = Status::Processed;
    assert_eq!(store.get("m").await.unwrap(), Some(want));
}

/// Many tasks on two handles (for `SQLite`, two connections, as two
/// processes would have) race to claim the same messages: exactly one wins
/// each.
async fn concurrent_claims_have_one_winner(f: Fixture) {
    const MESSAGES: usize = 30;
    const CLAIMANTS: usize = 16;
    let ids: Vec<String> = (0..MESSAGES).map(|i| format!("m{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let m = msg(id, &format!("s{}", i % 3), Role::User, "x", at(0, 0))
            .with_status(Status::PendingAgent);
        f.store.insert(&m).await.unwrap();
    }
    let handles = [f.store.clone(), (f.handle)().await];
    let ids = Arc::new(ids);
    let mut tasks = Vec::new();
    for c in 0..CLAIMANTS {
        let store = handles[c % 2].clone();
        let ids = Arc::clone(&ids);
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            // Half go forwards, half backwards, to meet in the middle.
            let order: Vec<&String> = if c % 2 == 0 {
                ids.iter().collect()
            } else {
                ids.iter().rev().collect()
            };
            for id in order {
                if store
                    .transition(id, &[Status::PendingAgent], Status::Processing)
                    .await
                    .unwrap()
                {
                    won.push(id.clone());
                }
            }
            won
        }));
    }
    let mut winners: HashMap<String, usize> = HashMap::new();
    for task in tasks {
        for id in task.await.unwrap() {
            *winners.entry(id).or_default() += 1;
        }
    }
    for id in ids.iter() {
        assert_eq!(winners.get(id), Some(&1), "claims of {id}");
        assert_eq!(
            f.store.get(id).await.unwrap().unwrap().status,
            Status::Processing
        );
    }
    assert!(
        f.store
            .with_status(Status::PendingAgent)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Sessions list their title (the first user message's first line),
/// creation and update times, and counts, the most recently updated first.
async fn sessions_listing(f: Fixture) {
    let store = f.store;
    assert!(store.sessions().await.unwrap().is_empty());
    let steps = [
        msg("a1", "a", Role::Assistant, "not a title", at(10, 5)),
        msg(
            "a2",
            "a",
            Role::User,
            "  \n  Hello, wörld  \nsecond line",
            at(11, 0),
        ),
        msg("a3", "a", Role::User, "a later prompt", at(12, 0)),
        msg("b1", "b", Role::Assistant, "no user yet", at(20, 0)),
        msg("c1", "c", Role::User, &"x".repeat(100), at(15, 0)),
        // Older than the session's last update: `updated` does not go back.
        msg("c2", "c", Role::Tool, "late", at(1, 0)),
        msg("d1", "d", Role::User, "tie", at(12, 0)),
    ];
    for m in &steps {
        store.insert(m).await.unwrap();
    }
    let sessions = store.sessions().await.unwrap();
    let listed: Vec<_> = sessions
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.title.clone(),
                s.created,
                s.updated,
                s.messages,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("b", None, at(20, 0), at(20, 0), 1),
            ("c", Some("x".repeat(80)), at(15, 0), at(15, 0), 2),
            ("a", Some("Hello, wörld".into()), at(10, 5), at(12, 0), 3),
            ("d", Some("tie".into()), at(12, 0), at(12, 0), 1),
        ]
    );
}

/// A new handle on the database (for `SQLite`, the file reopened) sees
/// every message, status and session.
async fn reopening_sees_everything(f: Fixture) {
    let mut messages = Vec::new();
    for i in 0..10 {
        let m = msg(
            &format!("m{i}"),
            &format!("s{}", i % 2),
            Role::User,
            &format!("prompt {i}"),
            at(i, 123_456_789),
        )
        .with_status(Status::PendingAgent);
        f.store.insert(&m).await.unwrap();
        messages.push(m);
    }
    assert!(
        f.store
            .transition("m4", &[Status::PendingAgent], Status::Processed)
            .await
            .unwrap()
    );
    messages[4].status = Status::Processed;
    let sessions = f.store.sessions().await.unwrap();
    let last = f.store.last_seq().await.unwrap();
    drop(f.store);
    let store = (f.handle)().await;
    assert_eq!(store.sessions().await.unwrap(), sessions);
    assert_eq!(store.last_seq().await.unwrap(), last);
    let all: Vec<Message> = store
        .after(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    assert_eq!(all, messages);
    // And it goes on writing.
    assert!(
        store
            .insert(&msg("m10", "s0", Role::User, "x", at(20, 0)))
            .await
            .unwrap()
            > last
    );
}

/// Tasks on two handles insert at once while readers watch: whenever a
/// `Seq` is visible (through `last_seq` or `after`), every smaller one is
/// too, which is what lets listeners catch up without a gap.
async fn concurrent_inserts_become_visible_in_order(f: Fixture) {
    const WRITERS: usize = 8;
    const EACH: usize = 40;
    let handles = [f.store.clone(), (f.handle)().await];
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = handles[w % 2].clone();
        writers.push(tokio::spawn(async move {
            for i in 0..EACH {
                let m = msg(
                    &format!("w{w}-{i}"),
                    &format!("s{}", i % 4),
                    Role::User,
                    "x",
                    at(0, 0),
                );
                store.insert(&m).await.unwrap();
            }
        }));
    }
    // Each read: the `last_seq` read first, then every seq `after` gave.
    let reader = {
        let store = handles[1].clone();
        tokio::spawn(async move {
            let mut reads = Vec::new();
            loop {
                let last = store.last_seq().await.unwrap();
                let seqs: Vec<i64> = store
                    .after(0, 10_000)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
                let done = seqs.len() == WRITERS * EACH;
                reads.push((last, seqs));
                if done {
                    return reads;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    let reads = reader.await.unwrap();
    let all: Vec<i64> = f
        .store
        .after(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(all.len(), WRITERS * EACH);
    assert!(all.windows(2).all(|p| p[0] < p[1]));
    for (last, seqs) in &reads {
        // Everything up to the last seq read was readable right after.
        let upto: Vec<i64> = all.iter().copied().filter(|s| s <= last).collect();
        let got: Vec<i64> = seqs.iter().copied().filter(|s| s <= last).collect();
        assert_eq!(got, upto, "a seq at or below {last} was not visible yet");
        // And what a read saw is a prefix of the final order: no smaller
        // seq became visible later.
        let max = seqs.last().copied().unwrap_or(0);
        let before: Vec<i64> = all.iter().copied().filter(|s| *s <= max).collect();
        assert_eq!(seqs, &before, "a seq below {max} became visible after it");
    }
}

/// A session's lease is held by one holder at a time, renewed by it,
/// released only by it, and free for another once it expires.
async fn leases_are_exclusive_until_they_expire(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    assert!(f.store.lease("s1", "a", long).await.unwrap());
    assert!(
        !other.lease("s1", "b", long).await.unwrap(),
        "b took a's lease"
    );
    assert!(
        f.store.lease("s1", "a", long).await.unwrap(),
        "a could not renew"
    );
    // Other sessions are free.
    assert!(other.lease("s2", "b", long).await.unwrap());
    // Only the holder releases.
    assert!(!other.release("s1", "b").await.unwrap());
    assert!(!other.lease("s1", "b", long).await.unwrap());
    assert!(f.store.release("s1", "a").await.unwrap());
    assert!(!f.store.release("s1", "a").await.unwrap());
    assert!(other.lease("s1", "b", long).await.unwrap());
    // An expired lease goes to whoever asks next; its old holder has lost it.
    assert!(
        f.store
            .lease("s3", "a", Duration::from_millis(150))
            .await
            .unwrap()
    );
    assert!(!other.lease("s3", "b", long).await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(other.lease("s3", "b", long).await.unwrap());
    assert!(!f.store.lease("s3", "a", long).await.unwrap());
    assert!(!f.store.release("s3", "a").await.unwrap());
    // Breaking one frees it whoever holds it.
    assert!(f.store.break_lease("s3").await.unwrap());
    assert!(!f.store.break_lease("s3").await.unwrap());
    assert!(f.store.lease("s3", "a", long).await.unwrap());

    // Many claimants at once on two handles: one winner.
    let handles = [f.store.clone(), other];
    let mut tasks = Vec::new();
    for c in 0..16 {
        let store = handles[c % 2].clone();
        tasks.push(tokio::spawn(async move {
            store.lease("race", &format!("h{c}"), long).await.unwrap()
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += usize::from(t.await.unwrap());
    }
    assert_eq!(winners, 1);
}

/// `insert_leased` writes only while its holder holds the session's live
/// lease: not without one, with another holder's, a released or an
/// expired one, or another session's. A refusal writes nothing, and uses
/// up no seq.
async fn leased_inserts_need_a_live_lease(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let answer = |id: &str, session: &str| msg(id, session, Role::Assistant, "4", at(1, 0));
    let refused =
        |result: Result<i64, StoreError>, id: &str, session: &str, holder: &str| match result {
            Err(StoreError::LeaseLost {
                id: i,
                session: s,
                holder: h,
            }) => assert_eq!((i.as_str(), s.as_str(), h.as_str()), (id, session, holder)),
            other => panic!("{id}: expected LeaseLost, got {other:?}"),
        };
    refused(
        f.store.insert_leased(&answer("m0", "s1"), "w1").await,
        "m0",
        "s1",
        "w1",
    );
    assert!(f.store.lease("s1", "w1", long).await.unwrap());
    let first = f
        .store
        .insert_leased(&answer("m1", "s1"), "w1")
        .await
        .unwrap();
    refused(
        other.insert_leased(&answer("m2", "s1"), "w2").await,
        "m2",
        "s1",
        "w2",
    );
    refused(
        f.store.insert_leased(&answer("m3", "s2"), "w1").await,
        "m3",
        "s2",
        "w1",
    );
    assert!(f.store.release("s1", "w1").await.unwrap());
    refused(
        f.store.insert_leased(&answer("m4", "s1"), "w1").await,
        "m4",
        "s1",
        "w1",
    );
    assert!(
        f.store
            .lease("s1", "w1", Duration::from_millis(150))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Expired, though no one has taken it yet.
    refused(
        f.store.insert_leased(&answer("m5", "s1"), "w1").await,
        "m5",
        "s1",
        "w1",
    );
    assert!(other.lease("s1", "w2", long).await.unwrap());
    let next = other
        .insert_leased(&answer("m6", "s1"), "w2")
        .await
        .unwrap();
    assert_eq!(next, first + 1, "a refused insert used up a seq");
    assert_eq!(
        other.insert_leased(&answer("m6", "s1"), "w2").await,
        Err(StoreError::Duplicate { id: "m6".into() })
    );
    for id in ["m0", "m2", "m3", "m4", "m5"] {
        assert_eq!(f.store.get(id).await.unwrap(), None, "{id} was written");
    }
    let ids: Vec<String> = f
        .store
        .history("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["m1", "m6"]);
    let sessions: Vec<String> = f
        .store
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(sessions, ["s1"], "a refused insert made its session");
}

/// `transition_leased` changes a status only while its holder holds the
/// live lease of the message's session; a refusal names the session and
/// changes nothing.
async fn leased_transitions_need_a_live_lease(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let mut prompt = msg("p", "s1", Role::User, "hi", at(0, 0));
    prompt.status = Status::Processing;
    f.store.insert(&prompt).await.unwrap();
    let status = || async { f.store.get("p").await.unwrap().unwrap().status };
    let done = [Status::Processing];
    let lost = |result: Result<bool, StoreError>, holder: &str| match result {
        Err(StoreError::LeaseLost {
            id,
            session,
            holder: h,
        }) => assert_eq!(
            (id.as_str(), session.as_str(), h.as_str()),
            ("p", "s1", holder)
        ),
        other => panic!("expected LeaseLost for {holder}, got {other:?}"),
    };
    lost(
        f.store
            .transition_leased("p", &done, Status::Processed, "w1")
            .await,
        "w1",
    );
    assert!(f.store.lease("s1", "w1", long).await.unwrap());
    lost(
        other
            .transition_leased("p", &done, Status::Interrupted, "w2")
            .await,
        "w2",
    );
    assert_eq!(status().await, Status::Processing);
    // Another session's lease does not count.
    assert!(other.lease("s2", "w2", long).await.unwrap());
    lost(
        other
            .transition_leased("p", &done, Status::Interrupted, "w2")
            .await,
        "w2",
    );
    assert_eq!(
        other
            .transition_leased("no-such-id", &done, Status::Processed, "w2")
            .await,
        Ok(false)
    );
    assert_eq!(
        f.store
            .transition_leased("p", &done, Status::Processed, "w1")
            .await,
        Ok(true)
    );
    assert_eq!(status().await, Status::Processed);
    // Its status is no longer one of `from`.
    assert_eq!(
        f.store
            .transition_leased("p", &done, Status::Error, "w1")
            .await,
        Ok(false)
    );
    assert!(f.store.release("s1", "w1").await.unwrap());
    lost(
        f.store
            .transition_leased("p", &[Status::Processed], Status::Error, "w1")
            .await,
        "w1",
    );
    assert_eq!(status().await, Status::Processed);
}

/// A holder writing as fast as it can while its lease expires and another
/// takes it over: each of its writes either lands before the new holder's
/// first or is refused; none comes after.
async fn a_lost_lease_orders_the_old_holders_writes_first(f: Fixture) {
    let other = (f.handle)().await;
    assert!(
        f.store
            .lease("s", "old", Duration::from_millis(300))
            .await
            .unwrap()
    );
    let writer = {
        let store = f.store.clone();
        tokio::spawn(async move {
            let mut written = 0_u32;
            for n in 0.. {
                let m = msg(&format!("old-{n}"), "s", Role::Tool, "r", at(n, 0));
                match store.insert_leased(&m, "old").await {
                    Ok(_) => written += 1,
                    Err(StoreError::LeaseLost { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            written
        })
    };
    let taker = tokio::spawn(async move {
        while !other
            .lease("s", "new", Duration::from_secs(30))
            .await
            .unwrap()
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let m = msg("new-0", "s", Role::Assistant, "a", at(0, 0));
        other.insert_leased(&m, "new").await.unwrap()
    });
    let written = writer.await.unwrap();
    let new_seq = taker.await.unwrap();
    assert!(
        written > 0,
        "the old holder wrote nothing while it held the lease"
    );
    let stored = f.store.history_after("s", 0).await.unwrap();
    let old: Vec<i64> = stored
        .iter()
        .filter(|(_, m)| m.id.starts_with("old-"))
        .map(|(seq, _)| *seq)
        .collect();
    assert_eq!(old.len(), usize::try_from(written).unwrap());
    assert!(
        old.iter().all(|&seq| seq < new_seq),
        "an old holder's write landed after the new holder's: {old:?} vs {new_seq}"
    );
}

/// `processing` user messages go back to `pending_agent` once their
/// session's lease has expired (or when none was taken), and not while it
/// is live; other messages are never touched.
async fn expired_turns_are_requeued(f: Fixture) {
    let store = f.store;
    let prompt = |id: &str, session: &str| {
        msg(id, session, Role::User, "x", at(0, 0)).with_status(Status::PendingAgent)
    };
    for (id, session) in [
        ("live", "s-live"),
        ("dead", "s-dead"),
        ("none", "s-none"),
        ("waiting", "s-live"),
    ] {
        store.insert(&prompt(id, session)).await.unwrap();
    }
    let answer =
        msg("answer", "s-dead", Role::Assistant, "a", at(1, 0)).with_status(Status::Processing);
    store.insert(&answer).await.unwrap();
    assert!(
        store
            .lease("s-live", "w1", Duration::from_secs(30))
            .await
            .unwrap()
    );
    assert!(
        store
            .lease("s-dead", "w2", Duration::from_millis(100))
            .await
            .unwrap()
    );
    for id in ["live", "dead", "none"] {
        assert!(
            store
                .transition(id, &[Status::PendingAgent], Status::Processing)
                .await
                .unwrap()
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requeued: Vec<String> = store
        .requeue_expired()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, m)| m.id)
        .collect();
    assert_eq!(requeued, ["dead", "none"]);
    let status = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get(id).await.unwrap().unwrap().status }
    };
    assert_eq!(status("live").await, Status::Processing);
    assert_eq!(status("dead").await, Status::PendingAgent);
    assert_eq!(status("none").await, Status::PendingAgent);
    assert_eq!(status("waiting").await, Status::PendingAgent);
    assert_eq!(
        status("answer").await,
        Status::Processing,
        "only user messages are turns"
    );
    assert!(store.requeue_expired().await.unwrap().is_empty());
}

/// `claim_next` hands out the oldest prompt of a session no one leases,
/// each to one claimant, and never a session's second prompt before its
/// first; what it claimed is `processing` and its session leased.
async fn claim_next_takes_each_prompt_once_in_order(f: Fixture) {
    let long = Duration::from_secs(30);
    let prompt = |id: &str, session: &str| {
        msg(id, session, Role::User, "x", at(0, 0)).with_status(Status::PendingAgent)
    };
    // a1, b1, a2, an answer (not a prompt), c1 with c's lease held.
    for (id, session) in [("a1", "a"), ("b1", "b"), ("a2", "a")] {
        f.store.insert(&prompt(id, session)).await.unwrap();
    }
    f.store
        .insert(&msg("x", "d", Role::Assistant, "x", at(0, 0)).with_status(Status::PendingAgent))
        .await
        .unwrap();
    f.store.insert(&prompt("c1", "c")).await.unwrap();
    assert!(f.store.lease("c", "other", long).await.unwrap());

    let (seq, first) = f.store.claim_next("w1", long).await.unwrap().unwrap();
    assert_eq!(
        (first.id.as_str(), first.status),
        ("a1", Status::Processing)
    );
    assert_eq!(
        f.store.get("a1").await.unwrap().unwrap().status,
        Status::Processing
    );
    assert_eq!(seq, f.store.after(0, 1).await.unwrap()[0].0);
    // a is leased to w1 now: a2 waits; b1 is next; then nothing (c leased).
    assert!(!f.store.lease("a", "w2", long).await.unwrap());
    let (_, second) = f.store.claim_next("w2", long).await.unwrap().unwrap();
    assert_eq!(second.id, "b1");
    assert_eq!(f.store.claim_next("w3", long).await.unwrap(), None);
    // Once a1's turn is over (its prompt answered, the lease released),
    // a2 goes.
    assert!(
        f.store
            .transition("a1", &[Status::Processing], Status::Processed)
            .await
            .unwrap()
    );
    assert!(f.store.release("a", "w1").await.unwrap());
    let (_, third) = f.store.claim_next("w3", long).await.unwrap().unwrap();
    assert_eq!(third.id, "a2");
    assert!(
        f.store
            .transition("a2", &[Status::Processing], Status::Processed)
            .await
            .unwrap()
    );
    assert!(f.store.release("a", "w3").await.unwrap());

    // Many claimants on two handles, 40 prompts in 40 sessions: each once.
    for i in 0..40 {
        f.store
            .insert(&prompt(&format!("p{i}"), &format!("s{i}")))
            .await
            .unwrap();
    }
    let handles = [f.store.clone(), (f.handle)().await];
    let mut tasks = Vec::new();
    for c in 0..8 {
        let store = handles[c % 2].clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut misses = 0;
            // A claimant that lost a race for a lease may get `None`
            // while prompts remain: it asks again a few times.
            while misses < 5 {
                if let Some((_, m)) = store.claim_next(&format!("c{c}"), long).await.unwrap() {
                    got.push(m.id);
                } else {
                    misses += 1;
                    tokio::task::yield_now().await;
                }
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    let mut want: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    want.sort();
    assert_eq!(all, want, "each prompt claimed exactly once");

    // A dead worker's prompt, still `processing` once its lease is gone,
    // goes before the session's newer one: after it is requeued.
    f.store.insert(&prompt("e1", "e")).await.unwrap();
    let (_, e1) = f.store.claim_next("dead", long).await.unwrap().unwrap();
    assert_eq!(e1.id, "e1");
    assert!(f.store.break_lease("e").await.unwrap());
    f.store.insert(&prompt("e2", "e")).await.unwrap();
    assert_eq!(f.store.claim_next("w", long).await.unwrap(), None);
    let requeued: Vec<String> = f
        .store
        .requeue_expired()
        .await
        .unwrap()
        .into_iter()
        .map(|(_, m)| m.id)
        .collect();
    assert!(requeued.contains(&"e1".to_owned()), "{requeued:?}");
    assert_eq!(
        f.store.claim_next("w", long).await.unwrap().unwrap().1.id,
        "e1"
    );
}
