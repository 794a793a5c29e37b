//! Shared by the backend tests: response fixtures, which CI also checks
//! against the official SDKs' types (`tools/conformance`).

#![allow(dead_code)]

use serde_json::Value;

/// The fixture at `tests/fixtures/<path>`, parsed.
pub(crate) fn fixture(path: &str) -> Value {
    serde_json::from_str(&fixture_text(path)).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// The fixture at `tests/fixtures/<path>`, as text (for malformed ones).
pub(crate) fn fixture_text(path: &str) -> String {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// A server answering every POST with the fixture at `path`, expecting
/// `calls` of them (checked when it is dropped).
pub(crate) async fn server_answering(path: &str, calls: u64) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(fixture(path)))
        .expect(calls)
        .mount(&server)
        .await;
    server
}

/// What a backend sends for `messages`, encoded whole (the first request
/// of a session), through a transport answering every request with the
/// fixture at `reply`; and the turn it read from that answer.
pub(crate) async fn sent<L: kesoku_llm::Llm>(
    build: impl FnOnce(std::sync::Arc<kesoku_llm::testing::CaptureTransport>) -> L,
    reply: &str,
    messages: &[kesoku_core::Message],
    tools: &[kesoku_llm::ToolDeclaration],
    options: &kesoku_llm::LlmOptions,
) -> (Value, kesoku_llm::AssistantTurn) {
    let capture = std::sync::Arc::new(kesoku_llm::testing::CaptureTransport::json(&fixture(reply)));
    let llm = build(std::sync::Arc::clone(&capture));
    let turn = llm
        .complete("whole", messages, tools, options)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (capture.last_json().expect("a request was sent"), turn)
}
