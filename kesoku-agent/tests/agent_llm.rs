//! The agent over a real backend on loopback HTTP: what it asks the
//! provider for when the caller names no model; a turn on OpenAI's
//! Responses API, its reasoning stored and sent back.

use kesoku_agent::Agent;
use kesoku_llm::{ClaudeLlm, Llm};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// An agent built without options asks for the model its `Llm` names as
/// its default, through a `Box<dyn Llm>` too.
#[tokio::test]
async fn an_agent_without_options_asks_for_the_backends_default_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Hello!"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 7}
        })))
        .mount(&server)
        .await;
    let model: Box<dyn Llm> = Box::new(ClaudeLlm::new("k").with_base_url(server.uri()));
    assert_eq!(model.default_model(), "claude-sonnet-4-5");
    let agent = Agent::builder(model).streaming(false).build().unwrap();
    let outcome = agent.send("s", "Hi").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Hello!"));
    let requests = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["model"], "claude-sonnet-4-5");
}

/// An agent over OpenAI's Responses API, streamed: the model's reasoning
/// comes back encrypted, is stored with the turn's messages, and goes
/// back on the next request of the turn, each item before the message or
/// call it preceded, then the tools' results.
#[tokio::test]
async fn an_agent_on_the_responses_api_sends_the_reasoning_back() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../kesoku-llm/tests/fixtures");
    let read = |name: &str| std::fs::read_to_string(format!("{fixtures}/{name}")).unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(read("openai_responses/stream/two_calls.sse")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let answer: Value = serde_json::from_str(&read("openai_responses/text.json")).unwrap();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&server)
        .await;
    let mut registry = kesoku_core::ToolRegistry::new();
    let weather = kesoku_core::DynamicTool::new(
        "get_weather",
        "Weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |args, _| async move {
            Ok(kesoku_core::ToolOutput::new(json!(format!(
                "sunny in {}",
                args["city"].as_str().unwrap_or("?")
            ))))
        },
    )
    .unwrap();
    registry.register(weather).unwrap();
    let model = kesoku_llm::OpenAiResponsesLlm::new("k").with_base_url(server.uri());
    let agent = Agent::builder(model).registry(registry).build().unwrap();
    let outcome = agent.send("s", "Weather in Oslo and Lima?").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Hello!"));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    let items: Vec<String> = second["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let id = i["id"].as_str().or(i["call_id"].as_str()).unwrap_or("");
            format!("{}:{id}", i["type"].as_str().unwrap_or("?"))
        })
        .collect();
    assert_eq!(
        items,
        [
            "message:",
            "reasoning:rs_01",
            "message:msg_01",
            "function_call:fc_01",
            "reasoning:rs_02",
            "function_call:fc_02",
            "function_call_output:call_A",
            "function_call_output:call_B",
        ]
    );
    assert_eq!(second["input"][1]["encrypted_content"], "gAAAAABoEnc-01");
    assert_eq!(second["input"][6]["output"], "sunny in Oslo");
    assert_eq!(second["store"], false);
}
