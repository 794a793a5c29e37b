//! The claims' checks: requeueing expired turns, `claim_next`, and a
//! turn's writes made at once (`insert_claimed`, `finish_turn`).

use std::sync::Arc;
use std::time::Duration;

use super::fixture::{Fixture, at, msg};
use crate::store::{Claimed, StoreError};
use crate::{Role, Status};

/// `processing` user messages go back to `pending_agent` once their
/// session's lease has expired (or when none was taken), and not while it
/// is live; other messages are never touched.
pub async fn expired_turns_are_requeued(f: Fixture) {
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
pub async fn claim_next_takes_each_prompt_once_in_order(f: Fixture) {
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

/// `insert_claimed` stores a prompt and leases its session in one step:
/// refused (`None`, nothing written) while another holder's lease is
/// live; a duplicate id takes no lease; once stored, the holder's lease
/// fences its writes and no one else can lease the session.
pub async fn insert_claimed_stores_and_leases_at_once_or_not_at_all(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let prompt =
        |id: &str| msg(id, "s", Role::User, "2+2?", at(1, 0)).with_status(Status::Processing);
    assert!(other.lease("s", "w2", long).await.unwrap());
    assert_eq!(
        f.store.insert_claimed(&prompt("p0"), "w1", long).await,
        Ok(None),
        "stored under another holder's live lease"
    );
    assert_eq!(f.store.get("p0").await.unwrap(), None, "a refusal wrote p0");
    assert!(other.release("s", "w2").await.unwrap());

    let seq = f
        .store
        .insert_claimed(&prompt("p1"), "w1", long)
        .await
        .unwrap()
        .expect("the session's lease was free");
    let stored = f.store.get("p1").await.unwrap().expect("p1 was not stored");
    assert_eq!(stored.status, Status::Processing);
    assert_eq!(
        f.store.history("s").await.unwrap().len(),
        1,
        "p1 stored more than once"
    );
    assert!(
        !other.lease("s", "w2", long).await.unwrap(),
        "w1 holds no lease"
    );
    let answer = msg("a1", "s", Role::Assistant, "4", at(1, 0));
    assert_eq!(f.store.insert_leased(&answer, "w1").await, Ok(seq + 1));
    assert!(f.store.release("s", "w1").await.unwrap());

    // The same id again: refused, and no lease is left behind.
    assert_eq!(
        f.store.insert_claimed(&prompt("p1"), "w1", long).await,
        Err(StoreError::Duplicate { id: "p1".into() })
    );
    assert!(
        other.lease("s", "w2", long).await.unwrap(),
        "a refused insert kept its lease"
    );
}

/// `insert_claimed_after` is `insert_claimed` that also returns the
/// session's messages after a seq, the new prompt last, as
/// `history_after` would: none of another session's, nothing written or
/// read when refused, no lease kept by a duplicate.
pub async fn insert_claimed_after_also_reads_what_the_session_stored_since(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let prompt =
        |id: &str| msg(id, "s", Role::User, "2+2?", at(2, 0)).with_status(Status::Processing);
    let seen = f
        .store
        .insert(&msg("m1", "s", Role::User, "hi", at(1, 0)))
        .await
        .unwrap();
    for (id, session) in [("m2", "s"), ("x1", "t"), ("m3", "s")] {
        other
            .insert(&msg(id, session, Role::Assistant, "hello", at(1, 1)))
            .await
            .unwrap();
    }
    assert!(other.lease("s", "w2", long).await.unwrap());
    assert_eq!(
        f.store
            .insert_claimed_after(&prompt("p0"), "w1", long, seen)
            .await,
        Ok(None),
        "stored under another holder's live lease"
    );
    assert_eq!(f.store.get("p0").await.unwrap(), None, "a refusal wrote p0");
    assert!(other.release("s", "w2").await.unwrap());

    let Claimed { seq, newer, .. } = f
        .store
        .insert_claimed_after(&prompt("p1"), "w1", long, seen)
        .await
        .unwrap()
        .expect("the session's lease was free");
    let ids: Vec<&str> = newer.iter().map(|(_, m)| m.id.as_str()).collect();
    assert_eq!(ids, ["m2", "m3", "p1"]);
    assert_eq!(newer.last().map(|(s, _)| *s), Some(seq));
    assert_eq!(newer.last().unwrap().1.status, Status::Processing);
    assert_eq!(newer, f.store.history_after("s", seen).await.unwrap());
    assert!(
        !other.lease("s", "w2", long).await.unwrap(),
        "w1 holds no lease"
    );
    // From the prompt itself: nothing newer.
    assert!(f.store.release("s", "w1").await.unwrap());
    let Claimed {
        seq: next, newer, ..
    } = f
        .store
        .insert_claimed_after(&prompt("p2"), "w1", long, seq)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(newer.len(), 1);
    assert_eq!((newer[0].0, newer[0].1.id.as_str()), (next, "p2"));
    assert!(f.store.release("s", "w1").await.unwrap());

    // The same id again: refused, and no lease is left behind.
    assert_eq!(
        f.store
            .insert_claimed_after(&prompt("p1"), "w1", long, seen)
            .await,
        Err(StoreError::Duplicate { id: "p1".into() })
    );
    assert!(
        other.lease("s", "w2", long).await.unwrap(),
        "a refused insert kept its lease"
    );
}

/// `finish_turn` posts the turn's last messages, settles its prompt and
/// releases the lease, all or nothing: a lost lease or a duplicate post
/// writes nothing, and leaves the prompt as it was.
pub async fn finish_turn_posts_settles_and_releases_at_once_or_not_at_all(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let from = [Status::Processing, Status::PendingAgent];
    let prompt = msg("p", "s", Role::User, "2+2?", at(1, 0)).with_status(Status::Processing);
    let post = |id: &str| msg(id, "s", Role::Assistant, "4", at(2, 0));
    let seq = f
        .store
        .insert_claimed(&prompt, "w1", Duration::from_millis(150))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Expired: refused, nothing written.
    match f
        .store
        .finish_turn("s", "w1", &[post("a1")], "p", &from, Status::Processed)
        .await
    {
        Err(StoreError::LeaseLost {
            session, holder, ..
        }) => {
            assert_eq!((session.as_str(), holder.as_str()), ("s", "w1"));
        }
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    assert_eq!(
        f.store.get("a1").await.unwrap(),
        None,
        "a refusal posted a1"
    );
    assert_eq!(
        f.store.get("p").await.unwrap().unwrap().status,
        Status::Processing,
        "a refusal settled the prompt"
    );

    assert!(f.store.lease("s", "w1", long).await.unwrap());
    f.store.insert_leased(&post("a0"), "w1").await.unwrap();
    // A duplicate among the posts: refused, nothing written, lease kept.
    assert_eq!(
        f.store
            .finish_turn(
                "s",
                "w1",
                &[post("a1"), post("a0")],
                "p",
                &from,
                Status::Processed
            )
            .await,
        Err(StoreError::Duplicate { id: "a0".into() })
    );
    assert_eq!(
        f.store.get("a1").await.unwrap(),
        None,
        "a refusal posted a1"
    );
    assert_eq!(
        f.store.get("p").await.unwrap().unwrap().status,
        Status::Processing
    );
    assert!(
        !other.lease("s", "w2", long).await.unwrap(),
        "a refusal released"
    );

    let seqs = f
        .store
        .finish_turn(
            "s",
            "w1",
            &[post("a1"), post("a2")],
            "p",
            &from,
            Status::Processed,
        )
        .await
        .unwrap();
    assert_eq!(seqs, [seq + 2, seq + 3]);
    let ids: Vec<String> = f
        .store
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["p", "a0", "a1", "a2"]);
    assert_eq!(
        f.store.get("p").await.unwrap().unwrap().status,
        Status::Processed
    );
    assert!(
        other.lease("s", "w2", long).await.unwrap(),
        "finish_turn kept the lease"
    );
    // Released: the old holder's finish is refused.
    assert!(matches!(
        f.store
            .finish_turn("s", "w1", &[], "p", &from, Status::Error)
            .await,
        Err(StoreError::LeaseLost { .. })
    ));
}

/// The sessions' listing counts every message of a turn as soon as it is
/// stored (leased or not, before the turn ends and after), with the
/// latest time among them, and a reopened handle lists the same.
pub async fn sessions_count_every_write_of_a_turn_as_it_happens(f: Fixture) {
    let long = Duration::from_secs(30);
    let listed = |store: Arc<dyn crate::store::Store>| async move {
        store
            .sessions()
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.id, s.title, s.created, s.updated, s.messages))
            .collect::<Vec<_>>()
    };
    let title = Some("2+2?".to_owned());
    let prompt = msg("p", "s", Role::User, "2+2?", at(1, 0)).with_status(Status::Processing);
    f.store.insert_claimed(&prompt, "w1", long).await.unwrap();
    assert_eq!(
        listed(f.store.clone()).await,
        [("s".into(), title.clone(), at(1, 0), at(1, 0), 1)]
    );
    // A later post, then one stamped earlier: `updated` does not go back.
    for (id, time) in [("c1", at(3, 0)), ("c2", at(2, 0))] {
        let call = msg(id, "s", Role::Assistant, "calling", time);
        f.store.insert_leased(&call, "w1").await.unwrap();
    }
    assert_eq!(
        listed(f.store.clone()).await,
        [("s".into(), title.clone(), at(1, 0), at(3, 0), 3)]
    );
    // A write without the lease (a person's next prompt) meanwhile.
    let next = msg("q", "s", Role::User, "and 3+3?", at(4, 0)).with_status(Status::PendingAgent);
    f.store.insert(&next).await.unwrap();
    assert_eq!(
        listed(f.store.clone()).await,
        [("s".into(), title.clone(), at(1, 0), at(4, 0), 4)]
    );
    let answer = msg("a", "s", Role::Assistant, "4", at(5, 0));
    let from = [Status::Processing];
    f.store
        .finish_turn("s", "w1", &[answer], "p", &from, Status::Processed)
        .await
        .unwrap();
    let after_turn = [("s".into(), title.clone(), at(1, 0), at(5, 0), 5)];
    assert_eq!(listed(f.store.clone()).await, after_turn);
    // A turn that only releases its lease; another whose lease is never
    // released (its worker died), in a session of its own.
    assert!(f.store.lease("s", "w2", long).await.unwrap());
    for (id, time) in [("d1", at(6, 0)), ("d2", at(7, 0))] {
        let post = msg(id, "s", Role::Assistant, "more", time);
        f.store.insert_leased(&post, "w2").await.unwrap();
    }
    assert!(f.store.release("s", "w2").await.unwrap());
    assert!(f.store.lease("t", "w3", long).await.unwrap());
    let stray = msg("t1", "t", Role::Assistant, "alone", at(8, 0));
    f.store.insert_leased(&stray, "w3").await.unwrap();
    let expected = [
        ("t".into(), None, at(8, 0), at(8, 0), 1),
        ("s".into(), title, at(1, 0), at(7, 0), 7),
    ];
    assert_eq!(listed(f.store.clone()).await, expected);
    // Its lease broken for another worker: still counted.
    assert!(f.store.break_lease("t").await.unwrap());
    assert_eq!(listed(f.store.clone()).await, expected);
    assert!(f.store.lease("t", "w4", long).await.unwrap());
    assert_eq!(listed(f.store.clone()).await, expected);
    drop(f.store);
    assert_eq!(listed((f.handle)().await).await, expected);
}
