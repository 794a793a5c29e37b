//! The agent over a real backend on loopback HTTP: what it asks the
//! provider for when the caller names no model.

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
