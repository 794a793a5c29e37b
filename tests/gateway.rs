//! The gateway: saved before delivered; a listener gets the stored matches,
//! then the live ones, with no gap and no duplicate; a slow listener
//! catches up from the store; messages posted through another gateway on
//! the same store (another process) arrive too; a claim succeeds once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kesoku::gateway::{Filter, Gateway};
use kesoku::store::{MemoryStore, Store};
use kesoku::{Message, MessageType, Role, Status};

fn prompt(session: &str, text: &str) -> Message {
    Message::new(session, Role::User, MessageType::Text, text).with_status(Status::PendingAgent)
}

async fn next(listener: &mut kesoku::gateway::Listener) -> Message {
    tokio::time::timeout(Duration::from_secs(5), listener.next())
        .await
        .expect("a message within 5 s")
        .expect("the stream goes on")
        .expect("no store error")
        .message
}

#[tokio::test]
async fn posting_saves_before_it_delivers() {
    let gateway = Gateway::in_memory();
    let mut all = gateway.listen(Filter::new()).await.unwrap();
    let posted = prompt("s", "hello");
    gateway.post(posted.clone()).await.unwrap();
    let got = next(&mut all).await;
    assert_eq!(got, posted);
    // The listener saw it, so it is stored already.
    assert_eq!(gateway.history("s").await.unwrap(), vec![posted]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_then_live_has_no_gap_and_no_duplicate() {
    let gateway = Gateway::in_memory();
    for i in 0..50 {
        gateway
            .post(prompt("s", &format!("old {i}")))
            .await
            .unwrap();
    }
    // Posting goes on while the listener subscribes and replays.
    let poster = gateway.clone();
    let posting = tokio::spawn(async move {
        for i in 0..200 {
            poster.post(prompt("s", &format!("new {i}"))).await.unwrap();
            if i % 16 == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    let mut waiting = gateway
        .listen(Filter::new().status(Status::PendingAgent))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 250 {
        seen.push(next(&mut waiting).await.content);
    }
    posting.await.unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 250, "no duplicate");
    let expected: Vec<String> = (0..50)
        .map(|i| format!("old {i}"))
        .chain((0..200).map(|i| format!("new {i}")))
        .collect();
    assert_eq!(seen, expected, "every message, in order");
    // And nothing more arrives.
    let extra = tokio::time::timeout(Duration::from_millis(300), waiting.next()).await;
    assert!(extra.is_err(), "unexpected extra message: {extra:?}");
}

#[tokio::test]
async fn a_slow_listener_catches_up_from_the_store() {
    let gateway = Gateway::in_memory();
    let mut all = gateway.listen(Filter::new()).await.unwrap();
    // Far more than the live channel holds, before the listener reads one.
    for i in 0..3000 {
        gateway.post(prompt("s", &i.to_string())).await.unwrap();
    }
    for i in 0..3000 {
        assert_eq!(next(&mut all).await.content, i.to_string());
    }
}

#[tokio::test]
async fn filters_select_by_session_status_and_role() {
    let gateway = Gateway::in_memory();
    let mut session_b = gateway
        .listen(Filter::new().session("b").roles([Role::Assistant]))
        .await
        .unwrap();
    gateway.post(prompt("a", "not b")).await.unwrap();
    gateway.post(prompt("b", "a user message")).await.unwrap();
    let answer = Message::new("b", Role::Assistant, MessageType::Text, "the answer");
    gateway.post(answer.clone()).await.unwrap();
    assert_eq!(next(&mut session_b).await, answer);
}

#[tokio::test]
async fn messages_from_another_process_arrive_through_the_store() {
    // Two gateways on one store stand for two processes on one database:
    // they share no channel, only the store.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let here = Gateway::from_arc(Arc::clone(&store)).with_poll_interval(Duration::from_millis(10));
    let there = Gateway::from_arc(store);
    let mut waiting = here
        .listen(Filter::new().status(Status::PendingAgent))
        .await
        .unwrap();
    for i in 0..5 {
        there.post(prompt("s", &i.to_string())).await.unwrap();
    }
    for i in 0..5 {
        assert_eq!(next(&mut waiting).await.content, i.to_string());
    }
}

#[tokio::test]
async fn a_local_message_does_not_hide_an_earlier_one_from_another_process() {
    // The live message has the larger `Seq`; the earlier one reaches this
    // process only through the store, after it.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let here = Gateway::from_arc(Arc::clone(&store)).with_poll_interval(Duration::from_millis(20));
    let there = Gateway::from_arc(store);
    let mut waiting = here.listen(Filter::new()).await.unwrap();
    // Let the interval's immediate first tick pass, so the live message
    // is read before the store is.
    tokio::time::sleep(Duration::from_millis(5)).await;
    there.post(prompt("s", "earlier")).await.unwrap();
    here.post(prompt("s", "later")).await.unwrap();
    let mut got = vec![
        next(&mut waiting).await.content,
        next(&mut waiting).await.content,
    ];
    got.sort();
    assert_eq!(got, ["earlier", "later"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_posts_from_two_processes_reach_every_listener_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let gateways = [
        Gateway::from_arc(Arc::clone(&store)).with_poll_interval(Duration::from_millis(3)),
        Gateway::from_arc(store).with_poll_interval(Duration::from_millis(3)),
    ];
    let mut listeners = Vec::new();
    for g in &gateways {
        listeners.push(g.listen(Filter::new()).await.unwrap());
    }
    let per_task = 50;
    let mut posters = Vec::new();
    for task in 0..8 {
        let gateway = gateways[task % 2].clone();
        posters.push(tokio::spawn(async move {
            for i in 0..per_task {
                gateway
                    .post(prompt("s", &format!("{task}-{i}")))
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for p in posters {
        p.await.unwrap();
    }
    for mut listener in listeners {
        let mut got = HashSet::new();
        for _ in 0..8 * per_task {
            assert!(got.insert(next(&mut listener).await.content), "a duplicate");
        }
        assert_eq!(got.len(), 8 * per_task);
    }
}

#[tokio::test]
async fn after_replays_from_a_position() {
    let gateway = Gateway::in_memory();
    let first = gateway.post(prompt("s", "one")).await.unwrap();
    gateway.post(prompt("s", "two")).await.unwrap();
    let mut from_second = gateway.listen(Filter::new().after(first)).await.unwrap();
    assert_eq!(next(&mut from_second).await.content, "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_succeeds_exactly_once() {
    let gateway = Gateway::in_memory();
    let mut ids = Vec::new();
    for i in 0..100 {
        let m = prompt("s", &i.to_string());
        ids.push(m.id.clone());
        gateway.post(m).await.unwrap();
    }
    let ids = Arc::new(ids);
    let claimants: Vec<_> = (0..4)
        .map(|_| {
            let gateway = gateway.clone();
            let ids = Arc::clone(&ids);
            tokio::spawn(async move {
                let mut won = Vec::new();
                for id in ids.iter() {
                    if gateway.claim(id).await.unwrap() {
                        won.push(id.clone());
                    }
                }
                won
            })
        })
        .collect();
    let mut all = Vec::new();
    for c in claimants {
        all.extend(c.await.unwrap());
    }
    all.sort();
    let mut expected = ids.to_vec();
    expected.sort();
    assert_eq!(all, expected, "every message claimed exactly once");
    let history = gateway.history("s").await.unwrap();
    assert!(history.iter().all(|m| m.status == Status::Processing));
}
