//! `complete` returns a `Send` future: a call can run on a spawned task,
//! through `Arc<dyn Llm>` or a concrete backend, with owned inputs. This
//! file fails to compile if that regresses.

use std::sync::Arc;

use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    AssistantTurn, ClaudeLlm, GeminiLlm, Llm, LlmError, LlmOptions, OpenAiLlm, ToolDeclaration,
};
use serde_json::json;
use tokio::task::JoinHandle;
mod common;
use common::server_answering;

/// Runs one call on its own task, owning everything it borrows.
fn spawn_call<L: Llm + ?Sized + 'static>(
    llm: Arc<L>,
) -> JoinHandle<Result<AssistantTurn, LlmError>> {
    let sid = String::from("s");
    let msgs = vec![Message::new("s", Role::User, MessageType::Text, "Hi")];
    let tools = vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Reports the weather.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }];
    let opts = LlmOptions::new("m");
    tokio::spawn(async move { llm.complete(&sid, &msgs, &tools, &opts).await })
}

/// Spawns the call through the concrete type and through `dyn Llm`.
async fn both_ways<L: Llm + 'static>(llm: L) {
    let llm = Arc::new(llm);
    let concrete = spawn_call(Arc::clone(&llm)).await.unwrap().unwrap();
    let dynamic: Arc<dyn Llm> = llm;
    let erased = spawn_call(dynamic).await.unwrap().unwrap();
    assert!(!concrete.text.is_empty());
    assert_eq!(concrete.text, erased.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_calls_run_on_spawned_tasks() {
    let server = server_answering("anthropic/text.json", 2).await;
    both_ways(ClaudeLlm::new("k").with_base_url(server.uri())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_calls_run_on_spawned_tasks() {
    let server = server_answering("openai/text.json", 2).await;
    both_ways(OpenAiLlm::new("k").with_base_url(server.uri())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_calls_run_on_spawned_tasks() {
    let server = server_answering("gemini/text.json", 2).await;
    both_ways(GeminiLlm::new("k").with_base_url(server.uri())).await;
}
