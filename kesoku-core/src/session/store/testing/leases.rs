//! The leases' checks: exclusive until they expire, renewed and released
//! only by their holder, and fencing the writes made under them.

use std::time::Duration;

use super::fixture::{Fixture, at, msg};
use crate::store::StoreError;
use crate::{Role, Status};

/// A session's lease is held by one holder at a time, renewed by it,
/// released only by it, and free for another once it expires.
pub async fn leases_are_exclusive_until_they_expire(f: Fixture) {
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
pub async fn a_broken_lease_is_not_taken_back_by_its_old_holder(f: Fixture) {
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
pub async fn renewals_extend_only_a_live_lease_of_its_holder(f: Fixture) {
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
pub async fn leased_inserts_need_a_live_lease(f: Fixture) {
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
pub async fn leased_transitions_need_a_live_lease(f: Fixture) {
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
pub async fn a_lost_lease_orders_the_old_holders_writes_first(f: Fixture) {
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

/// One operation of the lease fuzz harness, on session `s` (of 2) and
/// holder `h` (of 3); `live` picks a long lease, else one that expires at
/// once (a TTL of zero: expired by the next call).
#[derive(Debug, Clone, Copy)]
enum Op {
    Lease { s: usize, h: usize, live: bool },
    Renew { s: usize, h: usize, live: bool },
    Release { s: usize, h: usize },
    Break { s: usize },
    Post { s: usize, h: usize },
}

impl Op {
    fn random(rng: &mut fastrand::Rng) -> Op {
        let (s, h, live) = (rng.usize(0..2), rng.usize(0..3), rng.bool());
        match rng.u8(0..5) {
            0 => Op::Lease { s, h, live },
            1 => Op::Renew { s, h, live },
            2 => Op::Release { s, h },
            3 => Op::Break { s },
            _ => Op::Post { s, h },
        }
    }
}

/// Fuzz harness of the lease boundary: random runs of `lease`, `renew`,
/// `release`, `break_lease` and leased posts by three holders, alternating
/// between two handles, checked against a model of what each must answer
/// (a renewal never creates or takes back a lease; a post lands only
/// under its holder's live lease). 24 runs of up to 40 operations each;
/// `KESOKU_STORE_FUZZ_RUNS` sets another count. A failure names the seed
/// and the operations; `KESOKU_STORE_FUZZ_SEED` replays a seed.
pub async fn leases_follow_their_model_under_random_operations(f: Fixture) {
    let runs: u64 = std::env::var("KESOKU_STORE_FUZZ_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24);
    let other = (f.handle)().await;
    let stores = [f.store.clone(), other];
    let seed = std::env::var("KESOKU_STORE_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    for run in 0..runs {
        let ops: Vec<Op> = (0..rng.usize(1..40))
            .map(|_| Op::random(&mut rng))
            .collect();
        // Each run on sessions of its own.
        let session = |s: usize| format!("fuzz{run}-s{s}");
        let holder = |h: usize| format!("h{h}");
        let ttl = |live: bool| {
            if live {
                Duration::from_secs(60)
            } else {
                Duration::ZERO
            }
        };
        // The model: session → (holder, live).
        let mut model: [Option<(usize, bool)>; 2] = [None, None];
        for (i, &op) in ops.iter().enumerate() {
            let store = &stores[i % 2];
            let (what, got, want) = match op {
                Op::Lease { s, h, live } => {
                    let want = model[s].is_none_or(|(held, alive)| held == h || !alive);
                    let got = store
                        .lease(&session(s), &holder(h), ttl(live))
                        .await
                        .unwrap();
                    if want {
                        model[s] = Some((h, live));
                    }
                    ("lease", got, want)
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
                    ("renew", got, want)
                }
                Op::Release { s, h } => {
                    let want = model[s].is_some_and(|(held, _)| held == h);
                    let got = store.release(&session(s), &holder(h)).await.unwrap();
                    if want {
                        model[s] = None;
                    }
                    ("release", got, want)
                }
                Op::Break { s } => {
                    let want = model[s].is_some();
                    let got = store.break_lease(&session(s)).await.unwrap();
                    model[s] = None;
                    ("break", got, want)
                }
                Op::Post { s, h } => {
                    let want = model[s] == Some((h, true));
                    let m = msg(
                        &format!("fuzz{run}-{i}"),
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
                    ("post", got, want)
                }
            };
            assert_eq!(
                got, want,
                "seed {seed}, run {run}, op {i} {op:?} ({what}): the model says {want}; ops {ops:?}"
            );
        }
    }
}
