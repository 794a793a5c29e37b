//! One conformance suite for every `Store`, the part of turn leases,
//! claims and leased writes: each test runs against every backend
//! (`store_suite!`, `support/stores.rs`).

use std::sync::Arc;
use std::time::Duration;

use kesoku::store::StoreError;
use kesoku::{Role, Status};

#[macro_use]
#[path = "support/stores.rs"]
mod stores;
use stores::{Fixture, at, msg};

store_suite!(
    leases_are_exclusive_until_they_expire,
    a_broken_lease_is_not_taken_back_by_its_old_holder,
    renewals_extend_only_a_live_lease_of_its_holder,
    leases_follow_their_model_under_random_operations,
    leased_inserts_need_a_live_lease,
    leased_transitions_need_a_live_lease,
    a_lost_lease_orders_the_old_holders_writes_first,
    expired_turns_are_requeued,
    claim_next_takes_each_prompt_once_in_order,
    insert_claimed_stores_and_leases_at_once_or_not_at_all,
    finish_turn_posts_settles_and_releases_at_once_or_not_at_all,
);

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

/// Issue 18's repro: A leases; the lease is broken (as `Agent::recover`
/// does); B leases and releases. A's renewal must not take the lease back,
/// and A's fenced writes must be refused: another worker may have
/// answered the turn meanwhile.
async fn a_broken_lease_is_not_taken_back_by_its_old_holder(f: Fixture) {
    let other = (f.handle)().await;
    let long = Duration::from_secs(30);
    let mut prompt = msg("p", "s", Role::User, "hi", at(0, 0));
    prompt.status = Status::Processing;
    f.store.insert(&prompt).await.unwrap();
    assert!(f.store.lease("s", "A", long).await.unwrap());
    assert!(other.break_lease("s").await.unwrap());
    assert!(other.lease("s", "B", long).await.unwrap());
    assert!(other.release("s", "B").await.unwrap());
    assert!(
        !f.store.renew("s", "A", long).await.unwrap(),
        "A's renewal took back the lease it lost"
    );
    let answer = msg("a", "s", Role::Assistant, "stale", at(1, 0));
    assert!(
        matches!(
            f.store.insert_leased(&answer, "A").await,
            Err(StoreError::LeaseLost { .. })
        ),
        "A's leased post was accepted"
    );
    assert!(matches!(
        f.store
            .transition_leased("p", &[Status::Processing], Status::Processed, "A")
            .await,
        Err(StoreError::LeaseLost { .. })
    ));
    assert_eq!(f.store.get("a").await.unwrap(), None);
    assert_eq!(
        f.store.get("p").await.unwrap().unwrap().status,
        Status::Processing
    );
    // Broken and not yet taken by anyone: still not A's to renew.
    assert!(f.store.lease("s2", "A", long).await.unwrap());
    assert!(other.break_lease("s2").await.unwrap());
    assert!(!f.store.renew("s2", "A", long).await.unwrap());
    // The session is free for whoever acquires it next.
    assert!(other.lease("s2", "C", long).await.unwrap());
}

/// `renew` extends its holder's live lease (past the old expiry), and
/// nothing else: not another holder's, not an expired one (even when no
/// one took it), not a released one, not one never taken.
async fn renewals_extend_only_a_live_lease_of_its_holder(f: Fixture) {
    let other = (f.handle)().await;
    let short = Duration::from_millis(600);
    let long = Duration::from_secs(30);
    assert!(!f.store.renew("never", "A", long).await.unwrap());
    assert!(
        other.lease("never", "B", long).await.unwrap(),
        "renew made a lease"
    );
    assert!(f.store.lease("s", "A", short).await.unwrap());
    assert!(
        !other.renew("s", "B", long).await.unwrap(),
        "B renewed A's lease"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(f.store.renew("s", "A", short).await.unwrap());
    // Past the first expiry, the renewed lease still holds.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !other.lease("s", "B", long).await.unwrap(),
        "the renewal did not extend it"
    );
    // Expired, with no one else holding it: lost all the same.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!f.store.renew("s", "A", long).await.unwrap());
    assert!(other.lease("s", "B", long).await.unwrap());
    assert!(other.renew("s", "B", long).await.unwrap());
    assert!(other.release("s", "B").await.unwrap());
    assert!(!other.renew("s", "B", long).await.unwrap());
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

/// One operation of the lease fuzz harness, on session `s` (of 2) and
/// holder `h` (of 3); `live` picks a long lease, else one that expires at
/// once (a TTL of zero: expired by the next call).
#[derive(Debug, Clone)]
enum Op {
    Lease { s: usize, h: usize, live: bool },
    Renew { s: usize, h: usize, live: bool },
    Release { s: usize, h: usize },
    Break { s: usize },
    Post { s: usize, h: usize },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..2_usize, 0..3_usize, any::<bool>()).prop_map(|(s, h, live)| Op::Lease { s, h, live }),
        (0..2_usize, 0..3_usize, any::<bool>()).prop_map(|(s, h, live)| Op::Renew { s, h, live }),
        (0..2_usize, 0..3_usize).prop_map(|(s, h)| Op::Release { s, h }),
        (0..2_usize).prop_map(|s| Op::Break { s }),
        (0..2_usize, 0..3_usize).prop_map(|(s, h)| Op::Post { s, h }),
    ]
}

/// Fuzz harness of the lease boundary: random runs of `lease`, `renew`,
/// `release`, `break_lease` and leased posts by three holders, checked
/// against a model of what each must answer (a renewal never creates or
/// takes back a lease; a post lands only under its holder's live lease).
/// 24 runs of up to 40 operations each in `cargo test`; set
/// `PROPTEST_CASES` for more.
async fn leases_follow_their_model_under_random_operations(f: Fixture) {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let run = std::sync::atomic::AtomicUsize::new(0);
    let handle = tokio::runtime::Handle::current();
    let other = (f.handle)().await;
    let stores = [f.store.clone(), other];
    let strategy = proptest::collection::vec(op(), 1..40);
    let result = runner.run(&strategy, |ops| {
        // Each run on sessions of its own.
        let n = run.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let session = |s: usize| format!("fuzz{n}-s{s}");
        let holder = |h: usize| format!("h{h}");
        let long = Duration::from_secs(60);
        let ttl = |live: bool| if live { long } else { Duration::ZERO };
        // The model: session → (holder, live).
        let mut model: [Option<(usize, bool)>; 2] = [None, None];
        for (i, op) in ops.iter().enumerate() {
            // Ops alternate between the two handles (two processes).
            let store = &stores[i % 2];
            let check = |what: &str, got: bool, want: bool| {
                if got == want {
                    Ok(())
                } else {
                    Err(TestCaseError::fail(format!(
                        "op {i} {op:?} ({what}): got {got}, the model says {want}; ops {ops:?}"
                    )))
                }
            };
            tokio::task::block_in_place(|| {
                handle.block_on(async {
                    match *op {
                        Op::Lease { s, h, live } => {
                            let want = model[s].is_none_or(|(held, alive)| held == h || !alive);
                            let got = store
                                .lease(&session(s), &holder(h), ttl(live))
                                .await
                                .unwrap();
                            if want {
                                model[s] = Some((h, live));
                            }
                            check("lease", got, want)
                        }
                        Op::Renew { s, h, live } => {
                            let want = model[s] == Some((h, true));
                            let got = store
                                .renew(&session(s), &holder(h), ttl(live))
                                .await
                                .unwrap();
                            if want {
                                model[s] = Some((h, live));
                            }
                            check("renew", got, want)
                        }
                        Op::Release { s, h } => {
                            let want = model[s].is_some_and(|(held, _)| held == h);
                            let got = store.release(&session(s), &holder(h)).await.unwrap();
                            if want {
                                model[s] = None;
                            }
                            check("release", got, want)
                        }
                        Op::Break { s } => {
                            let want = model[s].is_some();
                            let got = store.break_lease(&session(s)).await.unwrap();
                            model[s] = None;
                            check("break", got, want)
                        }
                        Op::Post { s, h } => {
                            let want = model[s] == Some((h, true));
                            let m = msg(
                                &format!("fuzz{n}-{i}"),
                                &session(s),
                                Role::Assistant,
                                "x",
                                at(0, 0),
                            );
                            let got = match store.insert_leased(&m, &holder(h)).await {
                                Ok(_) => true,
                                Err(StoreError::LeaseLost { .. }) => false,
                                Err(e) => panic!("{e}"),
                            };
                            check("post", got, want)
                        }
                    }
                })
            })?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// `insert_claimed` stores a prompt and leases its session in one step:
/// refused (`None`, nothing written) while another holder's lease is
/// live; a duplicate id takes no lease; once stored, the holder's lease
/// fences its writes and no one else can lease the session.
async fn insert_claimed_stores_and_leases_at_once_or_not_at_all(f: Fixture) {
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

/// `finish_turn` posts the turn's last messages, settles its prompt and
/// releases the lease, all or nothing: a lost lease or a duplicate post
/// writes nothing, and leaves the prompt as it was.
async fn finish_turn_posts_settles_and_releases_at_once_or_not_at_all(f: Fixture) {
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
