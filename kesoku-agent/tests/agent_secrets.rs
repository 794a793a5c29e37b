//! An API key never appears in any message the agent stores, even when the
//! provider's error echoes it back.

use kesoku_agent::{Agent, TurnStatus};
use kesoku_llm::ClaudeLlm;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-ant-SECRET-123";

#[tokio::test]
async fn a_key_the_provider_echoes_is_not_stored() {
    let server = MockServer::start().await;
    // Providers do this: the 401 body quotes the key it was sent.
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error",
            "error": {
                "type": "authentication_error",
                "message": format!("invalid x-api-key {KEY}")
            }
        })))
        .expect(1)
        .mount(&server)
        .await;
    let agent = Agent::builder(ClaudeLlm::new(KEY).with_base_url(server.uri()))
        .build()
        .unwrap();

    let outcome = agent.send("s", "hello").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Failed);

    let stored = agent.gateway().store().after(0, usize::MAX).await.unwrap();
    assert_eq!(
        stored.len(),
        2,
        "the prompt and the error note: {stored:#?}"
    );
    for (_, m) in &stored {
        let serialized = serde_json::to_string(m).unwrap();
        assert!(
            !serialized.contains(KEY),
            "a stored message holds the key: {serialized}"
        );
    }
    // The note still says what went wrong, with the key blanked out.
    let note = &stored[1].1;
    assert!(
        note.content
            .contains("HTTP 401 (authentication_error): invalid x-api-key [redacted]"),
        "{}",
        note.content
    );
}
