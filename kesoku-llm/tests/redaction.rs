//! A key the provider echoes in an error is redacted; a short key (a
//! local server's placeholder) only where it stands as a whole token, so
//! the rest of the error still reads.

use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{ClaudeLlm, HttpOptions, Llm, LlmOptions};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The error `complete` returns when the server answers 401 with `message`.
async fn error_for(key: &str, message: &str) -> String {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error",
            "error": {"type": "authentication_error", "message": message}
        })))
        .mount(&server)
        .await;
    let llm = ClaudeLlm::new(key)
        .with_base_url(server.uri())
        .with_http_options(HttpOptions {
            max_retries: 0,
            ..HttpOptions::default()
        });
    let history = [Message::new("s", Role::User, MessageType::Text, "Hi")];
    llm.complete("s", &history, &[], &LlmOptions::new("m"))
        .await
        .unwrap_err()
        .to_string()
}

#[tokio::test]
async fn a_short_key_is_not_redacted_out_of_words() {
    let err = error_for("k", "too many tokens; key k rejected").await;
    assert!(
        err.ends_with("too many tokens; key [redacted] rejected"),
        "{err}"
    );
}

#[tokio::test]
async fn a_real_key_is_redacted_wherever_it_is_quoted() {
    let key = "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2";
    let message = format!(
        "GET /v1?key={key}&alt=json; {{\"api_key\":\"{key}\"}}; \
         Authorization: Bearer {key}; x-api-key: {key}; \
         encoded %22{key}%22; glued {key}suffix; ends {key}."
    );
    let err = error_for(key, &message).await;
    assert!(!err.contains(&key[..12]), "{err}");
    assert_eq!(err.matches("[redacted]").count(), 7, "{err}");
    assert!(err.contains("Bearer [redacted];"), "{err}");
    assert!(err.contains("?key=[redacted]&alt"), "{err}");
}
