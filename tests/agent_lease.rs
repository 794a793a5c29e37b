//! A worker that loses its session's lease mid-turn (it stalled past the
//! lease, and another worker took the session) posts nothing more: every
//! post of a turn is fenced by its lease, in the store's own transaction.
//! The turn is resumed by whoever takes the session next.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{
    Agent, AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, ToolDeclaration,
};
use kesoku::store::{MemoryStore, Store};
use kesoku::{Message, MessageType, Role, Status, ToolRegistry};
use serde_json::json;

/// A model whose first answer comes after another worker ("thief") took
/// the session's lease from under the turn, as if this worker had
/// stalled past it.
struct StolenDuringFirstCall {
    inner: ScriptedLlm,
    store: Arc<MemoryStore>,
    calls: Arc<AtomicUsize>,
    lease: Duration,
}

impl Llm for StolenDuringFirstCall {
    fn provider(&self) -> &'static str {
        "test"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        Box::pin(async move {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                assert!(self.store.break_lease(session_id).await.unwrap());
                assert!(
                    self.store
                        .lease(session_id, "thief", self.lease)
                        .await
                        .unwrap()
                );
            }
            self.inner
                .complete(session_id, messages, tools, options)
                .await
        })
    }
}

/// An agent (300 ms leases) whose first model call loses its lease, and
/// its model calls' count. Its script answers "stale answer", then
/// "fresh answer".
fn stolen_agent() -> (Agent, Arc<AtomicUsize>) {
    let store = Arc::new(MemoryStore::new());
    let lease = Duration::from_millis(300);
    let calls = Arc::new(AtomicUsize::new(0));
    let model = StolenDuringFirstCall {
        inner: ScriptedLlm::from_json(json!([{"text": "stale answer"}, {"text": "fresh answer"}]))
            .unwrap(),
        store: Arc::clone(&store),
        calls: Arc::clone(&calls),
        lease,
    };
    let agent = Agent::builder(model)
        .registry(ToolRegistry::new())
        .store(store)
        .lease(lease)
        .build()
        .unwrap();
    (agent, calls)
}

/// Session `s`'s history once it holds `n` messages and every prompt is
/// settled (an answer is stored before its prompt is marked), or as it is
/// at `deadline`.
async fn history_of_at_least(agent: &Agent, n: usize, deadline: Instant) -> Vec<Message> {
    loop {
        let history = agent.history("s").await.unwrap();
        let settled = history.iter().all(|m| {
            m.role != Role::User || !matches!(m.status, Status::Processing | Status::PendingAgent)
        });
        if (history.len() >= n && settled) || Instant::now() > deadline {
            return history;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_lost_its_lease_posts_nothing_and_is_resumed() {
    let (agent, calls) = stolen_agent();
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let prompt =
        Message::new("s", Role::User, MessageType::Text, "hi").with_status(Status::PendingAgent);
    agent.gateway().post(prompt).await.unwrap();

    // The thief never runs the turn: once its lease expires, the turn is
    // requeued and this agent resumes it with a second model call.
    let history = history_of_at_least(&agent, 2, Instant::now() + Duration::from_secs(10)).await;
    server.abort();
    let contents: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents,
        ["hi", "fresh answer"],
        "the answer written after the lease was lost was stored"
    );
    assert_eq!(history[0].status, Status::Processed);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_turn_lost_its_lease_resumes_it_without_a_server() {
    let (agent, calls) = stolen_agent();
    // No agent serves: the send itself puts its turn back once the
    // thief's lease expires, and runs it.
    let outcome = tokio::time::timeout(Duration::from_secs(10), agent.send("s", "hi"))
        .await
        .expect("the send never returned")
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("fresh answer"));
    let contents: Vec<String> = agent
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, ["hi", "fresh answer"]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A prompt posted for a session whose turn a `send` runs here waits for
/// that turn's lease; `serve` claims it as soon as the lease is given up,
/// not at its next sweep (half a lease: 30 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_a_prompt_as_soon_as_a_sends_turn_releases_its_session() {
    let model = ScriptedLlm::from_json(json!([{"text": "first"}, {"text": "second"}]))
        .unwrap()
        .with_latency(Duration::from_millis(300));
    // One turn at a time: the send's turn gives its permit back before it
    // wakes `serve`, which needs the permit to claim.
    let agent = Agent::builder(model)
        .registry(ToolRegistry::new())
        .lease(Duration::from_secs(60))
        .max_concurrent_turns(1)
        .build()
        .unwrap();
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let sent = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "one").await })
    };
    // Once the send's turn has its lease, a front end posts a newer prompt:
    // it interrupts that turn, which then gives up the session.
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.history("s").await.unwrap().first().map(|m| m.status) != Some(Status::Processing) {
        assert!(Instant::now() < deadline, "the send's turn never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let posted = Instant::now();
    let prompt =
        Message::new("s", Role::User, MessageType::Text, "two").with_status(Status::PendingAgent);
    agent.gateway().post(prompt).await.unwrap();
    let first = sent.await.unwrap().unwrap();
    assert_eq!(first.status, kesoku::llm::TurnStatus::Interrupted);
    let history = history_of_at_least(&agent, 3, posted + Duration::from_secs(10)).await;
    server.abort();
    let contents: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents,
        ["one", "two", "first"],
        "the waiting prompt was not taken"
    );
}
