//! `GeminiLlm` against a real HTTP server on loopback (wiremock).

#![allow(clippy::needless_pass_by_value)]

use std::time::Duration;

use kesoku_core::{
    DynamicTool, Message, MessageType, Role, ToolContext, ToolOutput, ToolRegistry, ToolRunner,
};
use kesoku_llm::{
    ContentBlock, GeminiLlm, HttpOptions, Llm, LlmError, LlmOptions, StopReason, ToolDeclaration,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::{fixture, fixture_text, sent};
use kesoku_llm::testing::CaptureTransport;
use std::sync::Arc;

fn llm(server: &MockServer) -> GeminiLlm {
    GeminiLlm::new("gemini-test-key")
        .with_base_url(server.uri())
        .with_http_options(HttpOptions {
            max_retries: 2,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(50),
            ..HttpOptions::default()
        })
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": false
    });
    r.register(
        DynamicTool::new(
            "get_weather",
            "Reports the weather.",
            schema,
            |args, _| async move {
                Ok(ToolOutput::new(
                    json!({"sky": "sunny", "city": args["city"]}),
                ))
            },
        )
        .unwrap(),
    )
    .unwrap();
    r
}

fn user(text: &str) -> Message {
    Message::new("s", Role::User, MessageType::Text, text)
}

async fn body_of(server: &MockServer, i: usize) -> Value {
    serde_json::from_slice(&server.received_requests().await.unwrap()[i].body).unwrap()
}

#[tokio::test]
async fn text_only_with_media() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-test:generateContent"))
        .and(header("x-goog-api-key", "gemini-test-key"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let mut photo = user("What is this?");
    photo.metadata.insert(
        "content_blocks".into(),
        serde_json::to_value([
            ContentBlock::image("image/jpeg", vec![255, 216]),
            ContentBlock::media("video/mp4", vec![0]),
        ])
        .unwrap(),
    );
    let mut options = LlmOptions::new("gemini-test");
    options.system = Some("Be brief.".into());
    let turn = llm(&server)
        .complete("s", &[photo], &[], &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "A cat.");
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(turn.usage.input_tokens, 11);
    assert!(turn.fallbacks.is_empty(), "Gemini takes video too");
    assert_eq!(
        body_of(&server, 0).await,
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "/9g="}},
                {"inlineData": {"mimeType": "video/mp4", "data": "AA=="}}
            ]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "generationConfig": {"maxOutputTokens": 4096}
        })
    );
}

#[tokio::test]
async fn parallel_calls_keep_ids_and_signatures_per_part_and_results_pair_up() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/two_calls.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/text.json")))
        .mount(&server)
        .await;
    let registry = registry();
    let tools = ToolDeclaration::all(&registry);
    let llm = llm(&server);
    let options = LlmOptions::new("gemini-test");
    let mut history = vec![user("Weather in Oslo and Lima?")];
    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.calls[0].request.id, "fc_1");
    assert!(
        turn.calls[1].request.id.starts_with("gemini-call-1-"),
        "a made-up id for pairing"
    );
    history.extend(turn.messages().cloned());
    let runner = ToolRunner::new(registry, ToolContext::new("s"));
    let pairs = turn.call_pairs();
    history.extend(runner.execute_all(&pairs, None).await);
    llm.complete("s", &history, &tools, &options).await.unwrap();

    let first = body_of(&server, 0).await;
    assert!(first["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].is_object());
    assert!(
        first["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]
            .get("$schema")
            .is_none()
    );
    assert_eq!(
        first["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
    let second = body_of(&server, 1).await;
    let contents = second["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{second:#}");
    // The model's parts go back unchanged: the signature on its own call only.
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}, "id": "fc_1"}, "thoughtSignature": "c2lnLUE="},
            {"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}
        ]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": {"sky": "sunny", "city": "Oslo"}}, "id": "fc_1"}},
            {"functionResponse": {"name": "get_weather", "response": {"output": {"sky": "sunny", "city": "Lima"}}}}
        ]})
    );
}

#[tokio::test]
async fn legacy_parameters_are_sanitized() {
    let tools = ToolDeclaration::all(&registry());
    let (body, _) = sent(
        |t| {
            GeminiLlm::new("k")
                .with_legacy_parameters(true)
                .with_transport(t)
        },
        "gemini/text.json",
        &[user("x")],
        &tools,
        &LlmOptions::new("m"),
    )
    .await;
    let decl = &body["tools"][0]["functionDeclarations"][0];
    assert!(decl.get("parametersJsonSchema").is_none());
    let params = &decl["parameters"];
    assert!(params.get("additionalProperties").is_none(), "{params}");
    assert!(params.get("$schema").is_none(), "{params}");
}

#[tokio::test]
async fn errors_retries_and_bad_bodies() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(fixture("gemini/error_rate_limit.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/text.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400).set_body_json(fixture("gemini/error_invalid_argument.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string(""))
        .up_to_n_times(3)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(fixture_text("gemini/malformed_truncated.json")),
        )
        .mount(&server)
        .await;
    let llm = llm(&server);
    let opts = LlmOptions::new("m");
    assert_eq!(
        llm.complete("s", &[user("Hi")], &[], &opts)
            .await
            .unwrap()
            .text,
        "A cat."
    );
    let e = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Gemini returned HTTP 400 (INVALID_ARGUMENT): Invalid JSON payload received."
    );
    let e = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, LlmError::Api { status: 500, attempts: 3, message, .. } if message == "(empty body)"),
        "{e}"
    );
    let e = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("truncated JSON"), "{e}");
}

#[tokio::test]
async fn one_tool_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/one_call.json")))
        .mount(&server)
        .await;
    let tools = ToolDeclaration::all(&registry());
    let turn = llm(&server)
        .complete(
            "s",
            &[user("Weather in Oslo?")],
            &tools,
            &LlmOptions::new("m"),
        )
        .await
        .unwrap();
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.calls.len(), 1);
    assert_eq!(turn.calls[0].request.name, "get_weather");
    assert_eq!(turn.messages().count(), 1);
    assert_eq!(turn.calls[0].message.kind, MessageType::ToolCall);
    let args = turn.calls[0]
        .request
        .parse_arguments()
        .unwrap()
        .into_owned();
    assert_eq!(args, json!({"city": "Oslo"}));
}

#[tokio::test]
async fn the_model_parts_are_replayed_unchanged() {
    let parts = json!([
        {"text": "Let me look.", "thoughtSignature": "c2lnMQ=="},
        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2lnMg=="},
        {"text": " One moment.", "thoughtSignature": "c2lnMw=="}
    ]);
    let body = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]});
    let capture = Arc::new(CaptureTransport::json(&body));
    let llm = GeminiLlm::new("k").with_transport(Arc::clone(&capture));
    let tools = ToolDeclaration::all(&registry());
    let options = LlmOptions::new("m");
    let turn = llm
        .complete("s", &[user("Weather?")], &tools, &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "Let me look. One moment.");
    assert_eq!(turn.calls.len(), 1);
    let mut history = vec![user("Weather?")];
    history.extend(turn.messages().cloned());
    llm.complete("s", &history, &tools, &options).await.unwrap();
    let replay = capture.last_json().unwrap();
    assert_eq!(replay["contents"][1]["role"], "model");
    assert_eq!(replay["contents"][1]["parts"], parts);
    assert_eq!(replay["contents"].as_array().unwrap().len(), 2);
}

/// Provider parameters are merged into the body member by member: Gemini's
/// `thinkingConfig` joins the `generationConfig` kesoku writes, which
/// keeps its `maxOutputTokens`.
#[tokio::test]
async fn provider_params_are_merged_into_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("gemini/text.json")))
        .mount(&server)
        .await;
    let options = LlmOptions::new("gemini-test").with_param(
        "generationConfig",
        json!({"thinkingConfig": {"thinkingBudget": 0}}),
    );
    llm(&server)
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    assert_eq!(
        body_of(&server, 0).await,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "generationConfig": {
                "maxOutputTokens": 4096,
                "thinkingConfig": {"thinkingBudget": 0}
            }
        })
    );
}
