//! `ClaudeLlm` against a real HTTP server on loopback (wiremock), which
//! checks what the backend sends and answers in the documented format.

use std::time::Duration;

use kesoku_core::{
    DynamicTool, Message, MessageType, Role, ToolContext, ToolOutput, ToolRegistry, ToolRunner,
};
use kesoku_llm::{
    ClaudeLlm, ContentBlock, HttpOptions, Llm, LlmError, LlmOptions, StopReason, ToolDeclaration,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

mod common;
use common::{fixture, fixture_text, sent};

fn fast_retries(max_retries: u32) -> HttpOptions {
    HttpOptions {
        max_retries,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(50),
        ..HttpOptions::default()
    }
}

fn claude(server: &MockServer) -> ClaudeLlm {
    ClaudeLlm::new("sk-ant-test-key")
        .with_base_url(server.uri())
        .with_http_options(fast_retries(3))
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city."}},
        "required": ["city"],
        "additionalProperties": false
    });
    let weather = DynamicTool::new(
        "get_weather",
        "Reports the weather.",
        schema,
        |args, _| async move {
            Ok(ToolOutput::new(json!(format!(
                "sunny in {}",
                args["city"].as_str().unwrap_or("?")
            ))))
        },
    )
    .unwrap();
    r.register(weather).unwrap();
    r
}

fn user(text: &str) -> Message {
    Message::new("s", Role::User, MessageType::Text, text)
}

async fn body_of(server: &MockServer, i: usize) -> Value {
    let requests: Vec<Request> = server.received_requests().await.unwrap();
    serde_json::from_slice(&requests[i].body).unwrap()
}

#[tokio::test]
async fn text_only_sends_the_documented_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("content-type", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let mut options = LlmOptions::new("claude-test");
    options.system = Some("Be brief.".into());
    options.temperature = Some(0.5);
    let system = Message::new("s", Role::System, MessageType::Text, "Answer in English.");
    let history = [system, user("Hi")];
    let turn = claude(&server)
        .complete("s", &history, &[], &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (12, 7));
    assert!(turn.calls.is_empty());
    assert_eq!(turn.messages().count(), 1);
    assert_eq!(turn.messages().next().unwrap().role, Role::Assistant);

    let body = body_of(&server, 0).await;
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 4096,
            "system": "Be brief.\n\nAnswer in English.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
        })
    );
}

#[tokio::test]
async fn tools_are_declared_and_a_tool_call_comes_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/one_call.json")))
        .mount(&server)
        .await;
    let tools = ToolDeclaration::all(&registry());
    let turn = claude(&server)
        .complete(
            "s",
            &[user("Weather in Oslo?")],
            &tools,
            &LlmOptions::new("claude-test"),
        )
        .await
        .unwrap();
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.calls.len(), 1);
    assert_eq!(turn.calls[0].request.id, "toolu_1");
    assert_eq!(turn.calls[0].request.arguments, json!({"city": "Oslo"}));
    assert_eq!(turn.messages().count(), 1, "no empty text message");
    assert_eq!(turn.calls[0].message.kind, MessageType::ToolCall);

    let body = body_of(&server, 0).await;
    assert_eq!(body["tools"][0]["name"], "get_weather");
    assert_eq!(body["tools"][0]["description"], "Reports the weather.");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["city"])
    );
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
}

#[tokio::test]
async fn parallel_calls_run_and_their_results_go_back_paired_in_one_user_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/two_calls.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .mount(&server)
        .await;
    let llm = claude(&server);
    let registry = registry();
    let tools = ToolDeclaration::all(&registry);
    let options = LlmOptions::new("claude-test");
    let mut history = vec![user("Weather in Oslo and Lima?")];

    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    assert_eq!(turn.calls.len(), 2);
    history.extend(turn.messages().cloned());
    let runner = ToolRunner::new(registry, ToolContext::new("s"));
    let calls = turn.call_pairs();
    let results = runner.execute_all(&calls, None).await;
    history.extend(results);

    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    assert_eq!(turn.text, "Hello!");

    let second = body_of(&server, 1).await;
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{second:#}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_B", "name": "get_weather", "input": {"city": "Lima"}}
        ])
    );
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(
        messages[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "sunny in Oslo"},
            {"type": "tool_result", "tool_use_id": "toolu_B", "content": "sunny in Lima"}
        ])
    );
}

#[tokio::test]
async fn errors_are_flagged_and_media_falls_back_to_a_reported_note() {
    let request = kesoku_core::ToolRequest::new("toolu_9", "get_weather", json!({}));
    let call = Message::tool_call("s", &request);
    let mut result = Message::new(
        "s",
        Role::Tool,
        MessageType::ToolResult,
        "Error: argument `city` is required",
    )
    .with_parent(call.id.clone());
    result
        .metadata
        .insert("tool_error".into(), json!("argument `city` is required"));
    let mut photo = user("What is in these?");
    photo.metadata.insert(
        "content_blocks".into(),
        serde_json::to_value([
            ContentBlock::image("image/png", vec![1, 2, 3]),
            ContentBlock::document("application/pdf", b"%PDF".to_vec()),
            ContentBlock::media("audio/wav", vec![0; 10]),
        ])
        .unwrap(),
    );
    let (body, turn) = sent(
        |t| ClaudeLlm::new("k").with_transport(t),
        "anthropic/text.json",
        &[photo.clone(), call, result],
        &[],
        &LlmOptions::new("m"),
    )
    .await;
    let messages = body["messages"].as_array().unwrap();
    let content = &messages[0]["content"];
    assert_eq!(
        content[1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AQID"}})
    );
    assert_eq!(content[2]["source"]["media_type"], "application/pdf");
    assert_eq!(
        content[3]["text"],
        "[media attachment (audio/wav, 10 bytes) omitted: Claude does not accept this kind of content]"
    );
    assert_eq!(turn.fallbacks.len(), 1);
    assert_eq!(turn.fallbacks[0].message_id, photo.id);
    assert_eq!(messages[2]["content"][0]["is_error"], true);
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_9");
}

#[tokio::test]
async fn an_error_body_becomes_a_typed_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(fixture("anthropic/error_invalid_request.json")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let err = claude(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::Api {
            provider: "Claude",
            status: 400,
            error_type: Some("invalid_request_error".into()),
            message: "max_tokens: must be positive".into(),
            attempts: 1,
        }
    );
    assert!(!err.to_string().contains("sk-ant-test-key"));
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0.05")
                .set_body_json(fixture("anthropic/error_rate_limit.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let turn = claude(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "retry-after was honoured"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_500_storm_exhausts_the_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(500).set_body_json(fixture("anthropic/error_server.json")),
        )
        .expect(4)
        .mount(&server)
        .await;
    let err = claude(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Claude returned HTTP 500 (api_error): Internal server error (after 4 attempts)"
    );
}

#[tokio::test]
async fn other_4xx_are_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let err = claude(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Api {
                status: 401,
                attempts: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_and_truncated_bodies_are_clear_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(fixture_text("anthropic/malformed_truncated.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>not json</html>"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"id": "msg", "type": "message"})),
        )
        .mount(&server)
        .await;
    let llm = claude(&server);
    let opts = LlmOptions::new("m");
    let truncated = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        truncated
            .starts_with("Claude sent a response that cannot be read (HTTP 200): truncated JSON"),
        "{truncated}"
    );
    let malformed = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        malformed.contains("malformed JSON") && malformed.contains("<html>not json</html>"),
        "{malformed}"
    );
    let shapeless = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        shapeless.ends_with("the response has no `content` array"),
        "{shapeless}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error_without_the_key() {
    let llm = ClaudeLlm::new("sk-ant-secret")
        .with_base_url("http://127.0.0.1:9")
        .with_http_options(fast_retries(1));
    let err = llm
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Transport { attempts: 2, .. }),
        "{err}"
    );
    assert!(!format!("{err} {err:?} {llm:?}").contains("sk-ant-secret"));
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_returns_the_error_at_once() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3600")
                .set_body_json(fixture("anthropic/error_rate_limit.json")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let err = claude(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::Api {
                status: 429,
                attempts: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Provider parameters reach the body as given (Anthropic's extended
/// thinking), beside kesoku's own fields; the history's key is refused.
#[tokio::test]
async fn provider_params_are_merged_into_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .mount(&server)
        .await;
    let options = LlmOptions::new("claude-test")
        .with_param(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
        )
        .with_param("max_tokens", json!(2048));
    claude(&server)
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    let body = body_of(&server, 0).await;
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
        })
    );
    let err = claude(&server)
        .complete(
            "s",
            &[user("Hi")],
            &[],
            &LlmOptions::new("claude-test").with_param("messages", json!([])),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`messages` is the history's own key"),
        "{err}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}
