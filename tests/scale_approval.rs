//! Approval across processes on one PostgreSQL database: turns paused on
//! three agent workers (`agent_worker --approval`), decided by a front
//! end while a worker dies (`tests/scale.rs` has the same workers without
//! approval).
//!
//! They need a server: `KESOKU_TEST_PG_URL` (see `tests/support/pg.rs`).
#![cfg(feature = "postgres")]

#[path = "support/pg.rs"]
mod pg;

#[path = "support/example.rs"]
mod example;

#[path = "support/workers.rs"]
mod workers;
use workers::{Worker, worker_with};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kesoku::gateway::Gateway;
use kesoku::store::{PostgresStore, Store};
use kesoku::{Message, MessageType, Role, Status};

/// Turns paused for approval on three workers; a front end (this process)
/// approves half of them and denies the rest while a worker is killed
/// (the one left to resume them, as it begins an approved call).
/// Every waiting call is answered once, nothing runs unapproved, and each
/// approved call runs at most once (once, unless its worker died running
/// it: then the model reads that it was interrupted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_decides_paused_turns_while_a_worker_dies() {
    const SESSIONS: usize = 24;
    let test = "a_front_end_decides_paused_turns_while_a_worker_dies";
    let Some(url) = pg::fresh_database(test).await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let gateway = Gateway::from_arc(Arc::clone(&store));
    let calls = Arc::default();
    let mut workers = Vec::new();
    for n in 0..3 {
        // Worker 0 dies as it begins running its first approved call.
        let doomed = n == 0;
        workers.push(worker_with(n, &url, 1_000, &calls, None, doomed, &["--approval"]).await);
    }
    let mut prompts = Vec::new();
    for i in 0..SESSIONS {
        let m = Message::new(
            format!("a{i}"),
            Role::User,
            MessageType::Text,
            "Delete note 1",
        )
        .with_status(Status::PendingAgent);
        prompts.push(m.id.clone());
        gateway.post(m).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let paused = store
            .with_status(Status::AwaitingApproval)
            .await
            .unwrap()
            .len();
        if paused == SESSIONS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{paused} of {SESSIONS} paused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        workers.iter().all(|w| w.ran.lock().unwrap().is_empty()),
        "a call ran before it was approved"
    );
    // Only worker 0 takes the decided turns at first, so that it surely
    // dies as it begins an approved call: with all three serving, which
    // worker resumes which turn is a race worker 0 may lose every time
    // (and the test would wait for its death forever). The others go on
    // once it is dead, and finish its turns too.
    for w in &workers[1..] {
        signal(w, "-STOP");
    }
    let front = kesoku::llm::Agent::builder(
        kesoku::llm::ScriptedLlm::from_json(serde_json::json!([])).unwrap(),
    )
    .store(Arc::clone(&store))
    .build()
    .unwrap();
    for i in 0..SESSIONS {
        let waiting = front.pending_approvals(&format!("a{i}")).await.unwrap();
        assert_eq!(waiting.len(), 1, "session a{i}");
        // Whether this decision or a worker's sweep puts the turn back
        // (both may see it decided first) does not matter: one does.
        if i % 2 == 0 {
            front.approve(&waiting[0].id).await.unwrap();
        } else {
            front.deny(&waiting[0].id, Some("keep it")).await.unwrap();
        }
        // A second decision, from any process, is refused.
        assert!(front.approve(&waiting[0].id).await.is_err());
    }
    let status = tokio::time::timeout(Duration::from_secs(60), workers[0].child.wait())
        .await
        .expect("worker 0 did not begin an approved call within 60 s")
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "worker 0 was killed running an approved call"
    );
    for w in &workers[1..] {
        signal(w, "-CONT");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for prompt in &prompts {
        loop {
            let status = store.get(prompt).await.unwrap().unwrap().status;
            if status == Status::Processed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{prompt} is {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let interrupted = check_decided(&*store, &workers, SESSIONS).await;
    assert!(
        interrupted >= 1,
        "no approved call was cut off by the death"
    );
}

/// Sends `sig` (`-STOP`, `-CONT`) to `worker`'s process.
fn signal(worker: &Worker, sig: &str) {
    let pid = worker.child.id().expect("the worker runs").to_string();
    let sent = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {sig} {pid}");
}

/// Each of the `sessions` decided above (`a{i}`, approved when `i` is
/// even): its call answered once, run at most once and only if approved,
/// and the model's answer from its result. How many approved calls a
/// dead worker cut off (answered as interrupted, never run again).
async fn check_decided(store: &dyn Store, workers: &[Worker], sessions: usize) -> usize {
    let mut interrupted = 0;
    let mut ran: HashMap<String, usize> = HashMap::new();
    for w in workers {
        for s in w.ran.lock().unwrap().iter() {
            *ran.entry(s.clone()).or_default() += 1;
        }
    }
    for i in 0..sessions {
        let session = format!("a{i}");
        let history = store.history(&session).await.unwrap();
        let call = history
            .iter()
            .find(|m| m.kind == MessageType::ToolCall)
            .unwrap();
        let results: Vec<&Message> = history
            .iter()
            .filter(|m| {
                m.kind == MessageType::ToolResult
                    && m.parent_id.as_deref() == Some(call.id.as_str())
            })
            .collect();
        assert_eq!(results.len(), 1, "{session}: {history:#?}");
        let answer = &history.last().unwrap().content;
        let runs = ran.get(&session).copied().unwrap_or(0);
        if i % 2 == 0 {
            if answer.contains("interrupted") {
                // Its worker died after marking it begun: it ran then, or
                // (another of that worker's turns set off the kill) not
                // yet; either way never again.
                assert!(runs <= 1, "{session}: approved, so run at most once");
                interrupted += 1;
            } else {
                assert_eq!(runs, 1, "{session}: approved, so run once");
                assert_eq!(answer, "deleted: deleted 1", "{session}");
            }
        } else {
            assert_eq!(runs, 0, "{session} ran, denied");
            assert!(
                answer.contains("not approved: keep it"),
                "{session}: {answer}"
            );
        }
    }
    interrupted
}
