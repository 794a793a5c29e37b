//! The message log's checks: what every [`MessageLog`](crate::store::MessageLog)
//! answers, in order, under concurrency, and from another handle.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use super::fixture::{Fixture, at, msg};
use crate::store::{Page, StoreError};
use crate::{Message, MessageType, Role, Status};

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

/// Every role, type and status, with metadata, unicode, parents and
/// sub-second timestamps, reads back field for field.
pub async fn round_trip(f: Fixture) {
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
pub async fn history_order(f: Fixture) {
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
pub async fn history_after_resumes(f: Fixture) {
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

/// A page of a session is the part of its history between the bounds,
/// the oldest or the newest `limit` of them, in order, and nothing of
/// another session's.
pub async fn history_pages_are_parts_of_the_history(f: Fixture) {
    let store = f.store;
    for i in 0..30 {
        let session = if i % 3 == 0 { "b" } else { "a" };
        let m = msg(&format!("m{i}"), session, Role::User, "x", at(i, 0));
        store.insert(&m).await.unwrap();
    }
    let whole = store.history_after("a", 0).await.unwrap();
    assert_eq!(whole.len(), 20);
    let (s3, s10) = (whole[3].0, whole[10].0);
    let cases = [
        (Page::first(5), whole[..5].to_vec()),
        (Page::last(5), whole[15..].to_vec()),
        (Page::last(4).before(s10), whole[6..10].to_vec()),
        (Page::first(4).after(s3), whole[4..8].to_vec()),
        (Page::last(100).after(s3).before(s10), whole[4..10].to_vec()),
        (Page::last(100), whole.clone()),
        (Page::first(0), Vec::new()),
        (Page::last(3).before(whole[0].0), Vec::new()),
    ];
    for (page, want) in cases {
        assert_eq!(
            store.history_page("a", page).await.unwrap(),
            want,
            "{page:?}"
        );
    }
    assert!(
        store
            .history_page("c", Page::last(5))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A second message with a stored id is rejected, and nothing of it is
/// written: not the message, not its session, not a seq.
pub async fn duplicate_writes_nothing(f: Fixture) {
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
pub async fn after_pages_in_order(f: Fixture) {
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
pub async fn with_status_lists_in_order(f: Fixture) {
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
pub async fn transition_is_conditional(f: Fixture) {
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
pub async fn concurrent_claims_have_one_winner(f: Fixture) {
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
pub async fn sessions_listing(f: Fixture) {
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
pub async fn reopening_sees_everything(f: Fixture) {
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
pub async fn concurrent_inserts_become_visible_in_order(f: Fixture) {
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
