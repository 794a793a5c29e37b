//! Every public async API returns a future that is `Send + 'static` when
//! its inputs are owned, so servers can `tokio::spawn` it. Each test spawns
//! one for real: a regression is a build failure, not a test failure.

use std::sync::Arc;

use kesoku::{
    Gateway, Message, ToolContext, ToolRegistry, ToolRequest, ToolRunner, default_registry, tool,
};
use serde_json::json;

/// Doubles a number.
///
/// # Arguments
/// * `n` - The number.
#[tool]
async fn spawn_double(n: i64) -> i64 {
    tokio::task::yield_now().await;
    n * 2
}

/// Triples a number, on the blocking pool.
///
/// # Arguments
/// * `n` - The number.
#[tool]
fn spawn_triple(n: i64) -> i64 {
    n * 3
}

fn runner() -> Arc<ToolRunner> {
    let mut registry = ToolRegistry::new();
    registry.register(spawn_double::TOOL).unwrap();
    registry.register(spawn_triple::TOOL).unwrap();
    Arc::new(ToolRunner::new(registry, ToolContext::new("s")))
}

fn batch() -> Vec<(ToolRequest, Message)> {
    ["spawn_double", "spawn_triple"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let request = ToolRequest::new(format!("call_{i}"), *name, json!({"n": 7}));
            let call = Message::tool_call("s", &request);
            (request, call)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_all_can_be_spawned() {
    let runner = runner();
    let batch = batch();
    let results = tokio::spawn(async move { runner.execute_all(&batch, None).await })
        .await
        .unwrap();
    let contents: Vec<&str> = results.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["14", "21"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_all_with_an_interruption_check_can_be_spawned() {
    let runner = runner();
    let batch = batch();
    let check: Arc<dyn Fn() -> bool + Send + Sync> = Arc::new(|| true);
    let results = tokio::spawn(async move { runner.execute_all(&batch, Some(&*check)).await })
        .await
        .unwrap();
    assert!(
        results
            .iter()
            .all(|m| m.metadata["error_kind"] == "interrupted")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_can_be_spawned() {
    let runner = runner();
    let (request, call) = batch().remove(1);
    let result = tokio::spawn(async move { runner.execute(&request, &call, None).await })
        .await
        .unwrap();
    assert_eq!(result.content, "21");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_can_be_spawned() {
    let ctx = ToolContext::new("s");
    let out = tokio::spawn(async move {
        let tool = default_registry().get("spawn_double").unwrap();
        tool.call(json!({"n": 4}), &ctx).await
    })
    .await
    .unwrap();
    assert_eq!(out.unwrap().text(), "8");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_post_can_be_spawned() {
    let gateway = Gateway::in_memory();
    let ctx = ToolContext::new("s").with_progress(gateway.clone());
    tokio::spawn(async move { ctx.post("halfway").await })
        .await
        .unwrap()
        .unwrap();
    let stored = gateway.clone();
    let history = tokio::spawn(async move { stored.history("s").await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(history[0].content, "halfway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_futures_can_be_spawned() {
    use kesoku::llm::{Agent, ScriptedLlm};

    let model = ScriptedLlm::from_json(json!([{"text": "hi"}])).unwrap();
    let agent = Agent::builder(model).build().unwrap();
    let sender = agent.clone();
    let outcome = tokio::spawn(async move { sender.send("s", "hello").await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("hi"));
    let reader = agent.clone();
    let history = tokio::spawn(async move { reader.history("s").await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(history.len(), 2);
    let server = agent.clone();
    let serving = tokio::spawn(async move { server.serve().await });
    let listening = {
        let gateway = agent.gateway().clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut all = gateway
                .listen(kesoku::gateway::Filter::new().after(0))
                .await
                .unwrap();
            all.next().await.unwrap().unwrap().message.content
        })
    };
    assert_eq!(listening.await.unwrap(), "hello");
    serving.abort();
}
