//! A panic inside a turn (issue 18, item 7): a model call or a tool that
//! panics never leaves a prompt `processing` nor a call without its one
//! result; the turn is settled as failed and serving goes on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{
    Agent, AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, ToolDeclaration,
    TurnStatus,
};
use kesoku::store::{MemoryStore, MessageLog as _};
use kesoku::{DynamicTool, Message, MessageType, Role, Status, ToolRegistry};
use serde_json::json;

#[path = "support/turns.rs"]
mod turns;
use turns::{adder, assert_paired, history_of_at_least};

/// A model that answers from its script, but panics on call `panic_on`
/// (counted from 1).
struct PanicsOnCall {
    inner: ScriptedLlm,
    calls: AtomicUsize,
    panic_on: usize,
}

impl Llm for PanicsOnCall {
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
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            assert_ne!(n, self.panic_on, "the decoder fell over (call {n})");
            self.inner
                .complete(session_id, messages, tools, options)
                .await
        })
    }
}

fn panicking_agent(store: Arc<MemoryStore>, panic_on: usize) -> Agent {
    let script = json!([
        {"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "2 + 3 = {{c1}}"}
    ]);
    let model = PanicsOnCall {
        inner: ScriptedLlm::from_json(script).unwrap(),
        calls: AtomicUsize::new(0),
        panic_on,
    };
    Agent::builder(model)
        .registry(adder())
        .store(store)
        .build()
        .unwrap()
}

/// Issue 18, item 7: a model call that panics (a backend, a stream's
/// decoder) no longer panics `send` and leaves the prompt `processing`:
/// the turn fails, its prompt is settled `error`, an assistant message
/// says why, and every call it made has its one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_model_call_settles_the_prompt_as_failed() {
    let store = Arc::new(MemoryStore::new());
    let agent = panicking_agent(Arc::clone(&store), 2);
    let sent = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "add").await })
    };
    let outcome = tokio::time::timeout(Duration::from_secs(5), sent)
        .await
        .expect("the send never returned")
        .expect("the send panicked")
        .unwrap();
    assert_eq!(outcome.status, TurnStatus::Failed);
    let history = agent.history("s").await.unwrap();
    assert_eq!(history[0].status, Status::Error);
    let last = history.last().unwrap();
    assert_eq!((last.role, last.kind), (Role::Assistant, MessageType::Text));
    assert!(
        last.content.contains("the decoder fell over"),
        "{}",
        last.content
    );
    assert!(last.metadata.contains_key("error"));
    assert_eq!(history.len(), 4, "{history:#?}");
    assert_paired(&history);
    // Settled for good: nothing to resume (and panic again) once the
    // lease is gone.
    assert!(
        store
            .with_status(Status::Processing)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The same through `serve`: the panicking turn's prompt is settled, and
/// the next prompt of the session is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_turn_that_panics_settles_its_prompt_and_serving_goes_on() {
    let store = Arc::new(MemoryStore::new());
    let agent = panicking_agent(Arc::clone(&store), 1);
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    // One after the other: a newer prompt would interrupt the first turn.
    for (text, messages) in [("first", 2), ("second", 6)] {
        let prompt = Message::new("s", Role::User, MessageType::Text, text)
            .with_status(Status::PendingAgent);
        agent.gateway().post(prompt).await.unwrap();
        history_of_at_least(&agent, messages, Instant::now() + Duration::from_secs(10)).await;
    }
    let history = agent.history("s").await.unwrap();
    server.abort();
    let users: Vec<(&str, Status)> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.content.as_str(), m.status))
        .collect();
    assert_eq!(
        users,
        [("first", Status::Error), ("second", Status::Processed)],
        "{history:#?}"
    );
    assert_eq!(history.last().unwrap().content, "2 + 3 = 5");
    assert_paired(&history);
}

/// A tool that panics gets a result saying so, and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_gets_its_result_and_the_turn_goes_on() {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            DynamicTool::new(
                "boom",
                "Panics.",
                json!({"type": "object"}),
                |_, _| async move { panic!("the tool fell over") },
            )
            .unwrap(),
        )
        .unwrap();
    let script = json!([
        {"tool_calls": [{"id": "c1", "name": "boom", "arguments": {}}]},
        {"text": "after the panic"}
    ]);
    let agent = Agent::builder(ScriptedLlm::from_json(script).unwrap())
        .registry(tools)
        .build()
        .unwrap();
    let outcome = agent.send("s", "go").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("after the panic"));
    let history = agent.history("s").await.unwrap();
    assert!(
        history[2].content.contains("the tool fell over"),
        "{}",
        history[2].content
    );
    assert_paired(&history);
}
