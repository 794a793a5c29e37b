//! `OpenAiLlm` against a real HTTP server on loopback (wiremock).

#![allow(clippy::needless_pass_by_value)]

use std::time::Duration;

use kesoku_core::{
    DynamicTool, Message, MessageType, Role, ToolContext, ToolOutput, ToolRegistry, ToolRunner,
};
use kesoku_llm::{
    HttpOptions, Llm, LlmError, LlmOptions, OpenAiLlm, StopReason, ToolChoice, ToolDeclaration,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::{fixture, fixture_text, sent};

fn llm(server: &MockServer) -> OpenAiLlm {
    OpenAiLlm::new("sk-openai-test")
        .with_base_url(format!("{}/v1", server.uri()))
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
        "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
        "required": ["city"],
        "additionalProperties": false
    });
    r.register(
        DynamicTool::new(
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
async fn text_only() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-openai-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let mut options = LlmOptions::new("gpt-test");
    options.system = Some("Be brief.".into());
    let turn = llm(&server)
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (9, 4));
    assert_eq!(
        body_of(&server, 0).await,
        json!({
            "model": "gpt-test",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_completion_tokens": 4096
        })
    );
}

#[tokio::test]
async fn parallel_calls_round_trip_with_string_arguments() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/two_calls.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .mount(&server)
        .await;
    let registry = registry();
    let tools = ToolDeclaration::all(&registry);
    let llm = llm(&server);
    let mut options = LlmOptions::new("gpt-test");
    options.tool_choice = ToolChoice::Tool("get_weather".into());
    let mut history = vec![user("Weather in Oslo and Lima?")];
    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.calls.len(), 2);
    history.extend(turn.messages().cloned());
    let runner = ToolRunner::new(registry, ToolContext::new("s"));
    let pairs = turn.call_pairs();
    let results = runner.execute_all(&pairs, None).await;
    // The truncated arguments became the runner's error result, not a failure.
    assert_eq!(results[1].meta_str("error_kind"), Some("truncated_json"));
    history.extend(results);
    llm.complete("s", &history, &tools, &options).await.unwrap();

    let first = body_of(&server, 0).await;
    assert_eq!(first["tools"][0]["type"], "function");
    assert_eq!(first["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        first["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    let second = body_of(&server, 1).await;
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{second:#}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        "{\"city\": \"Oslo\"}"
    );
    assert_eq!(messages[1]["tool_calls"][1]["id"], "call_B");
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "call_A", "content": "sunny in Oslo"})
    );
    assert_eq!(messages[3]["tool_call_id"], "call_B");
    assert!(messages[3]["content"].as_str().unwrap().contains("cut off"));
}

#[tokio::test]
async fn strict_mode_and_compatible_servers() {
    let tools = ToolDeclaration::all(&registry());
    let (strict, _) = sent(
        |t| OpenAiLlm::new("k").with_strict(true).with_transport(t),
        "openai/text.json",
        &[user("x")],
        &tools,
        &LlmOptions::new("m"),
    )
    .await;
    let f = &strict["tools"][0]["function"];
    assert_eq!(f["strict"], true);
    assert_eq!(f["parameters"]["required"], json!(["city", "unit"]));
    let (ollama, _) = sent(
        |t| OpenAiLlm::compatible("http://localhost:11434/v1").with_transport(t),
        "openai/text.json",
        &[user("x")],
        &tools,
        &LlmOptions::new("m"),
    )
    .await;
    assert!(ollama.get("tool_choice").is_none());
    assert_eq!(ollama["max_tokens"], 4096);
}

#[tokio::test]
async fn errors_retries_and_bad_bodies() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(fixture("openai/error_rate_limit.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400).set_body_json(fixture("openai/error_invalid_request.json")),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream down"))
        .up_to_n_times(3)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(fixture_text("openai/malformed_truncated.json")),
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
        "Hello!"
    );
    let e = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "OpenAI returned HTTP 400 (invalid_request_error): Invalid 'messages'"
    );
    let e = llm
        .complete("s", &[user("Hi")], &[], &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Api {
                status: 503,
                attempts: 3,
                ..
            }
        ),
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
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/one_call.json")))
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

/// Provider parameters reach the body as given (OpenAI's
/// `reasoning_effort`), beside kesoku's own fields, streamed or not.
#[tokio::test]
async fn provider_params_are_merged_into_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .mount(&server)
        .await;
    let options = LlmOptions::new("o4-mini")
        .with_param("reasoning_effort", json!("low"))
        .with_param("stream_options", json!({"include_obfuscation": false}));
    llm(&server)
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    let body = body_of(&server, 0).await;
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["model"], "o4-mini");
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(
        body["stream_options"],
        json!({"include_obfuscation": false})
    );
}
