//! Tool policies on an agent: a cap on how many calls of one step run at
//! once (measured), and a per-tool limit of uses per turn, from
//! `#[tool(max_uses = N)]` or the agent's default.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::{DynamicTool, MessageType, ToolOutput, ToolRegistry, keys, tool};
use serde_json::json;

/// Looks a word up, once per turn at most.
///
/// # Arguments
/// * `word` - The word.
#[tool(max_uses = 1)]
fn look_up(word: String) -> String {
    format!("{word}: a word")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_never_runs_more_calls_at_once_than_the_cap() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let slow = DynamicTool::new(
        "slow",
        "Takes a while.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let (running, most) = (Arc::clone(&r), Arc::clone(&m));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::new(json!("done")))
            }
        },
    )
    .unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(slow).unwrap();
    let calls: Vec<_> = (0..8)
        .map(|i| json!({"id": format!("c{i}"), "name": "slow", "arguments": {}}))
        .collect();
    let model =
        ScriptedLlm::from_json(json!([{"tool_calls": calls}, {"text": "All done."}])).unwrap();
    let agent = Agent::builder(model)
        .registry(tools)
        .max_parallel_calls(3)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Go").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let results = outcome
        .messages
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .count();
    assert_eq!(results, 8);
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "the cap, and no fewer: they ran side by side"
    );
    let err = Agent::builder(ScriptedLlm::from_json(json!([])).unwrap())
        .max_parallel_calls(0)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("max_parallel_calls"), "{err}");
}

#[tokio::test]
async fn a_call_past_a_tools_limit_gets_an_error_naming_it() {
    let mut tools = ToolRegistry::new();
    tools.register(look_up::TOOL).unwrap();
    let counted = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&counted);
    let search = DynamicTool::new(
        "search",
        "Searches.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolOutput::new(json!("found"))) }
        },
    )
    .unwrap();
    tools.register(search).unwrap();
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [
            {"id": "a", "name": "look_up", "arguments": {"word": "kesoku"}},
            {"id": "b", "name": "search", "arguments": {}},
            {"id": "c", "name": "search", "arguments": {}}
        ]},
        {"tool_calls": [
            {"id": "d", "name": "look_up", "arguments": {"word": "again"}},
            {"id": "e", "name": "search", "arguments": {}}
        ]},
        {"text": "Enough."}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .registry(tools)
        .max_uses_per_turn(2)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Look it up").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let result = |call: &str| {
        outcome
            .messages
            .iter()
            .find(|m| m.kind == MessageType::ToolResult && m.meta_str(keys::CALL_ID) == Some(call))
            .unwrap()
            .content
            .clone()
    };
    assert_eq!(result("a"), "kesoku: a word");
    assert!(
        result("d").contains("`look_up` may be called at most 1 time in one turn"),
        "{}",
        result("d")
    );
    assert_eq!(result("c"), "found");
    assert!(
        result("e").contains("`search` may be called at most 2 times in one turn"),
        "{}",
        result("e")
    );
    assert_eq!(
        counted.load(Ordering::SeqCst),
        2,
        "the refused call did not run"
    );
    // A new turn starts counting again.
    assert_eq!(look_up::TOOL.schema().max_uses, Some(1));
}

/// Calls running now and the most seen at once, per tool.
#[derive(Default)]
struct Gauge {
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Gauge {
    async fn hold(&self) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The gauges of `fetch` and of an uncapped tool (the agent's state
/// holds a clone).
#[derive(Clone, Default)]
struct Gauges {
    fetch: Arc<Gauge>,
    other: Arc<Gauge>,
}

/// Fetches a page; two at a time, whatever the agent's cap.
///
/// # Arguments
/// * `page` - Which page.
#[tool(register = false, max_parallel = 2)]
async fn fetch(page: u32, gauges: kesoku::State<Gauges>) -> String {
    gauges.0.fetch.hold().await;
    format!("page {page}")
}

/// Does something else, within the agent's cap.
#[tool(register = false)]
async fn other(gauges: kesoku::State<Gauges>) -> String {
    gauges.0.other.hold().await;
    "done".to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_own_cap_replaces_the_steps_cap_for_its_calls() {
    for step_cap in [1, 8] {
        let gauges = Gauges::default();
        let mut tools = ToolRegistry::new();
        tools.register(fetch::TOOL).unwrap();
        tools.register(other::TOOL).unwrap();
        let mut calls: Vec<_> = (0..5)
            .map(|i| json!({"id": format!("f{i}"), "name": "fetch", "arguments": {"page": i}}))
            .collect();
        calls.extend(
            (0..3).map(|i| json!({"id": format!("o{i}"), "name": "other", "arguments": {}})),
        );
        let model =
            ScriptedLlm::from_json(json!([{"tool_calls": calls}, {"text": "All done."}])).unwrap();
        let agent = Agent::builder(model)
            .registry(tools)
            .state(gauges.clone())
            .max_parallel_calls(step_cap)
            .build()
            .unwrap();
        let outcome = agent.send("s", "Go").await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        let results: Vec<&str> = outcome
            .messages
            .iter()
            .filter(|m| m.kind == MessageType::ToolResult)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(
            results,
            [
                "page 0", "page 1", "page 2", "page 3", "page 4", "done", "done", "done"
            ],
            "one result per call, in call order"
        );
        // Two at once: above a step cap of 1, below one of 8.
        assert_eq!(
            gauges.fetch.most.load(Ordering::SeqCst),
            2,
            "cap {step_cap}"
        );
        assert_eq!(
            gauges.other.most.load(Ordering::SeqCst),
            step_cap.min(3),
            "cap {step_cap}"
        );
    }
}
