//! The agent loop: multi-step turns, parallel calls, the step limit, a
//! failing model, the empty-answer nudge, orphan healing, interruption with
//! real concurrency, `serve`, and two agents sharing one store.

use kesoku::store::MessageLog;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::{MemoryStore, Store};
use kesoku::{Message, MessageType, Role, Status, ToolContext, ToolRegistry, tool};
use serde_json::json;
use tokio::sync::Notify;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn agent_add(a: i64, b: i64) -> i64 {
    a + b
}

/// Multiplies two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
async fn agent_mul(a: i64, b: i64) -> i64 {
    tokio::task::yield_now().await;
    a * b
}

/// Signals that the slow tool started.
static SLOW_STARTED: Notify = Notify::const_new();

/// Waits until cancelled, or a minute.
///
/// # Arguments
/// * `label` - What it waits for.
#[tool]
async fn agent_slow(label: String, context: ToolContext) -> String {
    SLOW_STARTED.notify_one();
    tokio::select! {
        () = context.cancellation().cancelled() => format!("{label}: cancelled"),
        () = tokio::time::sleep(Duration::from_secs(60)) => format!("{label}: done"),
    }
}

static WAIT_STARTED: Notify = Notify::const_new();

/// Waits until cancelled, or a minute.
#[tool]
async fn agent_wait(context: ToolContext) -> String {
    WAIT_STARTED.notify_one();
    tokio::select! {
        () = context.cancellation().cancelled() => "cancelled".to_owned(),
        () = tokio::time::sleep(Duration::from_secs(60)) => "done".to_owned(),
    }
}

fn tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(agent_add::TOOL).unwrap();
    r.register(agent_mul::TOOL).unwrap();
    r.register(agent_slow::TOOL).unwrap();
    r.register(agent_wait::TOOL).unwrap();
    r
}

fn model(script: serde_json::Value) -> ScriptedLlm {
    ScriptedLlm::from_json(script).unwrap()
}

fn agent(script: serde_json::Value) -> Agent {
    Agent::builder(model(script))
        .registry(tools())
        .build()
        .unwrap()
}

/// Every tool call in `history` has exactly one result, pointing at it.
fn assert_paired(history: &[Message]) {
    let mut results: HashMap<&str, usize> = HashMap::new();
    for m in history.iter().filter(|m| m.kind == MessageType::ToolResult) {
        *results.entry(m.parent_id.as_deref().unwrap()).or_default() += 1;
    }
    for call in history.iter().filter(|m| m.kind == MessageType::ToolCall) {
        assert_eq!(
            results.get(call.id.as_str()),
            Some(&1),
            "call {} ({}) has one result",
            call.id,
            call.content
        );
    }
    assert_eq!(
        results.values().sum::<usize>(),
        history
            .iter()
            .filter(|m| m.kind == MessageType::ToolCall)
            .count(),
        "no result without a call"
    );
}

#[tokio::test]
async fn a_multi_step_turn_with_parallel_calls_answers_and_keeps_everything() {
    use MessageType::{Text, ToolCall, ToolResult};

    let agent = agent(json!([
        {"tool_calls": [
            {"id": "c1", "name": "agent_add", "arguments": {"a": 2, "b": 3}},
            {"id": "c2", "name": "agent_mul", "arguments": "{\"a\": 4, \"b\": 5}"}
        ]},
        {"tool_calls": [{"id": "c3", "name": "agent_add", "arguments": {"a": 5, "b": 20}}]},
        {"text": "2+3={{c1}}, 4*5={{c2}}, total {{c3}}"}
    ]));
    let outcome = agent.send("s", "Do the sums").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("2+3=5, 4*5=20, total 25"));

    let history = agent.history("s").await.unwrap();
    let kinds: Vec<(Role, MessageType)> = history.iter().map(|m| (m.role, m.kind)).collect();
    assert_eq!(
        kinds,
        [
            (Role::User, Text),
            (Role::Assistant, ToolCall),
            (Role::Assistant, ToolCall),
            (Role::Tool, ToolResult),
            (Role::Tool, ToolResult),
            (Role::Assistant, ToolCall),
            (Role::Tool, ToolResult),
            (Role::Assistant, Text),
        ]
    );
    assert_eq!(history[0].status, Status::Processed);
    assert_paired(&history);
    // The outcome lists what the turn posted: everything after the prompt.
    assert_eq!(outcome.messages, history[1..]);
    assert_eq!(history[7].status, Status::Pending);
    assert_eq!(
        history[7].parent_id.as_deref(),
        Some(history[0].id.as_str())
    );
}

#[tokio::test]
async fn a_wrong_argument_gets_the_error_back_and_the_model_corrects_it() {
    let agent = agent(json!([
        {"tool_calls": [{"id": "bad", "name": "agent_add", "arguments": {"a": 2}}]},
        {"tool_calls": [{"id": "good", "name": "agent_add", "arguments": {"a": 2, "b": 2}}]},
        {"text": "{{good}}"}
    ]));
    let outcome = agent.send("s", "2+2?").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("4"));
    let history = agent.history("s").await.unwrap();
    let error = history
        .iter()
        .find(|m| m.meta_str("call_id") == Some("bad") && m.kind == MessageType::ToolResult)
        .unwrap();
    assert!(
        error.content.contains("argument `b` is required"),
        "{}",
        error.content
    );
}

#[tokio::test]
async fn the_step_limit_ends_the_turn_visibly() {
    let call =
        json!({"tool_calls": [{"id": "c", "name": "agent_add", "arguments": {"a": 1, "b": 1}}]});
    let agent = Agent::builder(model(json!([call.clone(), call.clone(), call])))
        .registry(tools())
        .max_steps(2)
        .build()
        .unwrap();
    let outcome = agent.send("s", "loop").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::StepLimit);
    assert_eq!(outcome.answer, None);
    let history = agent.history("s").await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert!(last.content.contains("step limit"), "{}", last.content);
    assert_eq!(history[0].status, Status::Processed);
    assert_eq!(
        history
            .iter()
            .filter(|m| m.kind == MessageType::ToolCall)
            .count(),
        2
    );
    assert_paired(&history);
}

#[tokio::test]
async fn a_failing_model_fails_the_turn_and_keeps_what_was_posted() {
    // One turn of calls, then the script runs out: the second model call fails.
    let agent = agent(json!([
        {"tool_calls": [{"id": "c", "name": "agent_add", "arguments": {"a": 1, "b": 1}}]}
    ]));
    let outcome = agent.send("s", "go").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Failed);
    let history = agent.history("s").await.unwrap();
    assert_eq!(history[0].status, Status::Error);
    assert_paired(&history);
    let note = history.last().unwrap();
    assert_eq!(note.role, Role::Assistant);
    assert!(note.content.contains("has no turn 2"), "{}", note.content);
    assert_eq!(history.len(), 4, "prompt, call, result, error note");
}

#[tokio::test]
async fn an_empty_answer_gets_one_nudge() {
    let agent = agent(json!([{"text": ""}, {"text": "Here it is."}]));
    let outcome = agent.send("s", "hello").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Here it is."));
    let history = agent.history("s").await.unwrap();
    assert_eq!(history[1].role, Role::System);
    assert!(history[1].content.contains("empty"));
}

#[tokio::test]
async fn a_later_send_sees_the_earlier_turns() {
    let agent = agent(json!([{"text": "first answer"}, {"text": "second answer"}]));
    agent.send("s", "one").await.unwrap();
    let second = agent.send("s", "two").await.unwrap();
    assert_eq!(second.answer.as_deref(), Some("second answer"));
    let contents: Vec<String> = agent
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, ["one", "first answer", "two", "second answer"]);
}

#[tokio::test]
async fn orphaned_calls_are_healed_before_the_model_sees_them() {
    let store = Arc::new(MemoryStore::new());
    // A crashed turn: a prompt, and a call that never got its result.
    let prompt = Message::new("s", Role::User, MessageType::Text, "old").with_status(Status::Error);
    let call = Message::tool_call("s", &kesoku::ToolRequest::new("c0", "agent_add", json!({})));
    store.insert(&prompt).await.unwrap();
    store.insert(&call).await.unwrap();
    let agent = Agent::builder(model(json!([{"text": "ok"}])))
        .registry(tools())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let outcome = agent.send("s", "new").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let healed = &outcome.messages[0];
    assert_eq!(healed.parent_id.as_deref(), Some(call.id.as_str()));
    assert!(healed.content.contains("interrupted"), "{}", healed.content);
    assert_paired(&agent.history("s").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_prompt_interrupts_a_running_tool() {
    let agent = agent(json!([
        {"tool_calls": [{"id": "slow", "name": "agent_slow", "arguments": {"label": "job"}}]},
        {"text": "second: {{slow}}"}
    ]));
    let first = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "start the job").await })
    };
    tokio::time::timeout(Duration::from_secs(5), SLOW_STARTED.notified())
        .await
        .expect("the slow tool started");
    let started = Instant::now();
    let second = agent.send("s", "never mind").await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status, TurnStatus::Interrupted);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The waiting tool was cancelled, and its call still has its result.
    assert_eq!(second.status, TurnStatus::Completed);
    assert_eq!(
        second.answer.as_deref(),
        Some("second: Error: tool `agent_slow` was cancelled")
    );

    let history = agent.history("s").await.unwrap();
    assert_paired(&history);
    let prompts: Vec<(&str, Status)> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.content.as_str(), m.status))
        .collect();
    assert_eq!(
        prompts,
        [
            ("start the job", Status::Interrupted),
            ("never mind", Status::Processed)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_prompt_drops_the_model_call_in_flight() {
    let slow_model =
        model(json!([{"text": "the answer"}])).with_latency(Duration::from_millis(400));
    let agent = Agent::builder(slow_model)
        .registry(tools())
        .build()
        .unwrap();
    let first = {
        let agent = agent.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (agent.send("s", "one").await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = agent.send("s", "two").await.unwrap();
    let (first, took) = first.await.unwrap();
    assert_eq!(first.unwrap().status, TurnStatus::Interrupted);
    assert!(
        took < Duration::from_millis(350),
        "interrupted after {took:?}"
    );
    // The dropped call posted nothing and played no turn of the script.
    assert_eq!(second.answer.as_deref(), Some("the answer"));
    let contents: Vec<String> = agent
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, ["one", "two", "the answer"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_what_front_ends_post() {
    let agent = agent(json!([{"text": "served"}]));
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let prompt =
        Message::new("s", Role::User, MessageType::Text, "hi").with_status(Status::PendingAgent);
    agent.gateway().post(prompt.clone()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // The answer is stored before its prompt is marked processed: wait for
    // both (or the deadline), then check them.
    let history = loop {
        let history = agent.history("s").await.unwrap();
        let settled = history
            .first()
            .is_some_and(|m| m.status == Status::Processed);
        if (history.len() == 2 && settled) || Instant::now() > deadline {
            break history;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(history.len(), 2, "no answer: {history:?}");
    assert_eq!(history[1].content, "served");
    assert_eq!(history[0].status, Status::Processed);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_one_store_never_take_the_same_message() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let answered = Arc::new(AtomicUsize::new(0));
    let mut servers = Vec::new();
    let mut agents = Vec::new();
    for _ in 0..2 {
        let script = json!([{"tool_calls": [{"id": "c", "name": "agent_add", "arguments": {"a": 1, "b": 1}}]}, {"text": "{{c}}"}]);
        // Each agent has its own gateway on the shared store, as two
        // processes on one database would.
        let gateway = kesoku::Gateway::from_arc(Arc::clone(&store))
            .with_poll_interval(Duration::from_millis(5));
        let agent = Agent::builder(model(script))
            .registry(tools())
            .gateway(gateway)
            .build()
            .unwrap();
        let server = agent.clone();
        servers.push(tokio::spawn(async move { server.serve().await }));
        agents.push(agent);
    }
    let sessions = 40;
    for i in 0..sessions {
        let prompt = Message::new(format!("s{i}"), Role::User, MessageType::Text, "1+1?")
            .with_status(Status::PendingAgent);
        agents[i % 2].gateway().post(prompt).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..sessions {
        loop {
            let history = store.history(&format!("s{i}")).await.unwrap();
            if history
                .first()
                .is_some_and(|m| m.status == Status::Processed)
            {
                assert_paired(&history);
                let answers: Vec<&Message> = history
                    .iter()
                    .filter(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
                    .collect();
                assert_eq!(answers.len(), 1, "answered once: {history:#?}");
                assert_eq!(answers[0].content, "2");
                answered.fetch_add(1, Ordering::SeqCst);
                break;
            }
            assert!(Instant::now() < deadline, "session s{i} not answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(answered.load(Ordering::SeqCst), sessions);
    for s in servers {
        s.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_stops_the_running_turn_and_the_next_prompt_runs() {
    let agent = agent(json!([
        {"tool_calls": [{"id": "w", "name": "agent_wait", "arguments": {}}]},
        {"text": "after: {{w}}"}
    ]));
    assert!(!agent.interrupt("s"), "nothing runs yet");
    let first = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "wait").await })
    };
    tokio::time::timeout(Duration::from_secs(5), WAIT_STARTED.notified())
        .await
        .expect("the tool started");
    assert!(agent.interrupt("s"));
    let first = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("the turn ends at once")
        .unwrap()
        .unwrap();
    assert_eq!(first.status, TurnStatus::Interrupted);
    assert!(!agent.interrupt("s"), "nothing runs any more");

    // The next prompt runs, and its model sees the cancelled call's result.
    let second = agent.send("s", "go on").await.unwrap();
    assert_eq!(second.status, TurnStatus::Completed);
    assert_eq!(
        second.answer.as_deref(),
        Some("after: Error: tool `agent_wait` was cancelled")
    );
    let history = agent.history("s").await.unwrap();
    assert_paired(&history);
    let prompts: Vec<Status> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.status)
        .collect();
    assert_eq!(prompts, [Status::Interrupted, Status::Processed]);
}
