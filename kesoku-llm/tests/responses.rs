//! `OpenAiResponsesLlm` against a real HTTP server on loopback (wiremock):
//! what it sends (stateless by default, reasoning replayed in order, tools
//! flat with `strict` always said, a typed answer in `text.format`, media
//! as input parts), what it reads (calls, usage with cached and reasoning
//! tokens, an incomplete or failed response, an overflow), and chaining on
//! `previous_response_id` when asked.

use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku_core::{ContentBlock, Message, MessageType, OutputSchema, Role, ToolRequest, keys};
use kesoku_llm::{
    HttpOptions, Llm, LlmError, LlmOptions, OpenAiResponsesLlm, StopReason, ToolChoice,
    ToolDeclaration,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::fixture;

fn llm(server: &MockServer) -> OpenAiResponsesLlm {
    OpenAiResponsesLlm::new("sk-responses-test")
        .with_base_url(format!("{}/v1", server.uri()))
        .with_http_options(HttpOptions {
            max_retries: 0,
            initial_backoff: Duration::from_millis(1),
            ..HttpOptions::default()
        })
}

fn tools() -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }),
    }]
}

fn user(text: &str) -> Message {
    Message::new("s", Role::User, MessageType::Text, text)
}

async fn answering(fixtures: &[&str]) -> MockServer {
    let server = MockServer::start().await;
    for (i, f) in fixtures.iter().enumerate() {
        let mock = Mock::given(method("POST"))
            .and(path("/v1/responses"))
            .and(header("authorization", "Bearer sk-responses-test"))
            .respond_with(ResponseTemplate::new(200).set_body_json(fixture(f)));
        if i + 1 < fixtures.len() {
            mock.up_to_n_times(1).mount(&server).await;
        } else {
            mock.mount(&server).await;
        }
    }
    server
}

async fn body_of(server: &MockServer, i: usize) -> Value {
    serde_json::from_slice(&server.received_requests().await.unwrap()[i].body).unwrap()
}

#[tokio::test]
async fn text_only_is_stateless_with_the_reasoning_asked_for() {
    let server = answering(&["openai_responses/text.json"]).await;
    let mut options = LlmOptions::new("gpt-5");
    options.system = Some("Be brief.".into());
    let turn = llm(&server)
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(turn.response_id.as_deref(), Some("resp_text"));
    assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (9, 4));
    assert_eq!(
        body_of(&server, 0).await,
        json!({
            "input": [{"type": "message", "role": "user", "content": "Hi"}],
            "model": "gpt-5",
            "max_output_tokens": 4096,
            "instructions": "Be brief.",
            "store": false,
            "include": ["reasoning.encrypted_content"],
        })
    );
}

/// The turn's reasoning goes back in order, each item before the message
/// or call it preceded, encrypted content included; results follow.
#[tokio::test]
async fn calls_and_their_reasoning_round_trip_in_order() {
    let server = answering(&[
        "openai_responses/two_calls.json",
        "openai_responses/text.json",
    ])
    .await;
    let llm = llm(&server);
    let tools = tools();
    let mut options = LlmOptions::new("gpt-5");
    options.tool_choice = ToolChoice::Tool("get_weather".into());
    let mut history = vec![user("Weather in Oslo and Lima?")];
    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::ToolUse);
    assert_eq!(turn.text, "Checking both — Oslo and Lima.");
    let ids: Vec<_> = turn.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_A", "call_B"]);
    assert_eq!(
        turn.calls[0].request.arguments,
        json!("{\"city\": \"Oslo\"}")
    );
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.usage.cache_read_tokens,
            turn.usage.reasoning_tokens
        ),
        (1200, 95, Some(1024), Some(64))
    );
    history.extend(turn.messages().cloned());
    for (call, city) in turn.calls.iter().zip(["Oslo", "Lima"]) {
        history.push(
            Message::new(
                "s",
                Role::Tool,
                MessageType::ToolResult,
                format!("sunny in {city}"),
            )
            .with_parent(call.message.id.clone()),
        );
    }
    llm.complete("s", &history, &tools, &options).await.unwrap();

    let first = body_of(&server, 0).await;
    assert_eq!(
        first["tools"],
        json!([{
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": tools[0].parameters,
            "strict": false,
        }])
    );
    assert_eq!(
        first["tool_choice"],
        json!({"type": "function", "name": "get_weather"})
    );
    let second = body_of(&server, 1).await;
    let input = second["input"].as_array().unwrap();
    let kinds: Vec<String> = input
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["type"].as_str().unwrap(),
                i["id"].as_str().or(i["call_id"].as_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
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
    assert_eq!(input[1]["encrypted_content"], "gAAAAABoEnc-01");
    assert_eq!(input[4]["encrypted_content"], "gAAAAABoEnc-02");
    assert_eq!(input[3]["call_id"], "call_A");
    assert_eq!(input[3]["arguments"], "{\"city\": \"Oslo\"}");
    assert_eq!(input[6]["output"], "sunny in Oslo");
    assert_eq!(
        input[2]["content"][0],
        json!({"type": "output_text", "text": "Checking both — Oslo and Lima.", "annotations": []})
    );
}

/// Tools, an image and a typed answer together: the image as an input
/// part, the tools strict when asked, the answer's shape flat in
/// `text.format`.
#[tokio::test]
async fn tools_an_image_and_a_typed_answer() {
    let server = answering(&["openai_responses/text.json"]).await;
    let llm = llm(&server).with_strict(true);
    let mut photo = user("What is in this?");
    photo.metadata.insert(
        keys::CONTENT_BLOCKS.into(),
        serde_json::to_value([
            ContentBlock::image("image/png", vec![137, 80, 78, 71]),
            ContentBlock::document("application/pdf", b"%PDF".to_vec()),
        ])
        .unwrap(),
    );
    let output = OutputSchema::new(
        "Answer",
        json!({"type": "object", "properties": {"thing": {"type": "string"}}, "required": ["thing"], "additionalProperties": false}),
    )
    .unwrap();
    let options = LlmOptions::new("gpt-5").with_output(output);
    llm.complete("s", &[photo], &tools(), &options)
        .await
        .unwrap();
    let body = body_of(&server, 0).await;
    assert_eq!(
        body["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "What is in this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw==", "detail": "auto"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERg==", "filename": "document"},
        ])
    );
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    assert_eq!(body["text"]["format"]["name"], "Answer");
    assert_eq!(body["text"]["format"]["strict"], true);
    assert_eq!(
        body["text"]["format"]["schema"]["required"],
        json!(["thing"])
    );
}

#[tokio::test]
async fn an_incomplete_response_stops_for_max_tokens_and_drops_lone_reasoning() {
    let server = answering(&["openai_responses/incomplete.json"]).await;
    let turn = llm(&server)
        .complete("s", &[user("Think hard")], &[], &LlmOptions::new("gpt-5"))
        .await
        .unwrap();
    assert_eq!(turn.stop_reason, StopReason::MaxTokens);
    assert_eq!(turn.usage.reasoning_tokens, Some(16));
    let text = turn.text_message.unwrap();
    // A reasoning item with nothing after it would be refused if sent back.
    assert!(text.metadata["provider"].get("output_items").is_none());
}

#[tokio::test]
async fn a_context_overflow_is_typed_one_shot_and_streamed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(fixture("openai_responses/error_context_length.json")),
        )
        .mount(&server)
        .await;
    let err = llm(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("gpt-5"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::ContextOverflow { .. }), "{err:?}");

    let streamed = MockServer::start().await;
    let sse = "event: error\ndata: {\"type\": \"error\", \"code\": \"context_length_exceeded\", \"message\": \"Your input exceeds the context window of this model.\", \"param\": \"input\", \"sequence_number\": 0}\n\n";
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        )
        .mount(&streamed)
        .await;
    let llm = llm(&streamed);
    let history = [user("Hi")];
    let options = LlmOptions::new("gpt-5");
    let events: Vec<_> = llm.stream("s", &history, &[], &options).collect().await;
    assert!(
        matches!(events.last(), Some(Err(LlmError::ContextOverflow { .. }))),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_failed_response_is_an_error_naming_its_code() {
    let server = MockServer::start().await;
    let mut failed = fixture("openai_responses/text.json");
    failed["status"] = "failed".into();
    failed["error"] = json!({"code": "server_error", "message": "Something broke."});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(failed))
        .mount(&server)
        .await;
    let err = llm(&server)
        .complete("s", &[user("Hi")], &[], &LlmOptions::new("gpt-5"))
        .await
        .unwrap_err();
    let LlmError::Api {
        error_type,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(error_type.as_deref(), Some("server_error"));
    assert!(message.contains("Something broke."), "{message}");
}

/// Chained, a request sends only what came after the newest stored
/// response, and names it.
#[tokio::test]
async fn previous_response_id_chains_on_the_stored_response() {
    let server = answering(&[
        "openai_responses/two_calls.json",
        "openai_responses/text.json",
    ])
    .await;
    let llm = llm(&server).with_previous_response_id(true);
    let tools = tools();
    let options = LlmOptions::new("gpt-5");
    let mut history = vec![user("Weather?")];
    let turn = llm.complete("s", &history, &tools, &options).await.unwrap();
    history.extend(turn.messages().cloned());
    let call = &turn.calls[0].message;
    history.push(
        Message::new("s", Role::Tool, MessageType::ToolResult, "sunny")
            .with_parent(call.id.clone()),
    );
    llm.complete("s", &history, &tools, &options).await.unwrap();
    let first = body_of(&server, 0).await;
    assert_eq!(first["store"], true);
    assert!(first.get("previous_response_id").is_none());
    assert!(first.get("include").is_none());
    let second = body_of(&server, 1).await;
    assert_eq!(second["previous_response_id"], "resp_0a1b2c");
    assert_eq!(
        second["input"],
        json!([{"type": "function_call_output", "call_id": "call_A", "output": "sunny"}])
    );
}

/// A response made without `store` (by an unchained backend) cannot be
/// gone on from: a chained backend then sends the history whole.
#[tokio::test]
async fn an_unstored_response_is_not_chained_on() {
    let server = answering(&[
        "openai_responses/two_calls.json",
        "openai_responses/text.json",
    ])
    .await;
    let options = LlmOptions::new("gpt-5");
    let mut history = vec![user("Weather?")];
    let turn = llm(&server)
        .complete("s", &history, &tools(), &options)
        .await
        .unwrap();
    history.extend(turn.messages().cloned());
    for call in &turn.calls {
        history.push(
            Message::new("s", Role::Tool, MessageType::ToolResult, "sunny")
                .with_parent(call.message.id.clone()),
        );
    }
    llm(&server)
        .with_previous_response_id(true)
        .complete("s", &history, &tools(), &options)
        .await
        .unwrap();
    let second = body_of(&server, 1).await;
    assert!(second.get("previous_response_id").is_none(), "{second:#}");
    assert_eq!(second["input"].as_array().unwrap().len(), 8);
}

/// Another provider's history (no output items kept) is sent as plain
/// items; a built-in tool is offered as given.
#[tokio::test]
async fn a_plain_history_and_a_builtin_tool() {
    let server = answering(&["openai_responses/text.json"]).await;
    let llm = llm(&server).with_builtin_tool(json!({"type": "web_search"}));
    let call = Message::tool_call(
        "s",
        &ToolRequest::new("c1", "get_weather", json!({"city": "Oslo"})),
    );
    let result = Message::new("s", Role::Tool, MessageType::ToolResult, "sunny")
        .with_parent(call.id.clone());
    let history = [
        user("Weather?"),
        Message::new("s", Role::Assistant, MessageType::Text, "Looking."),
        call,
        result,
    ];
    llm.complete("s", &history, &tools(), &LlmOptions::new("gpt-5"))
        .await
        .unwrap();
    let body = body_of(&server, 0).await;
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": "Weather?"},
            {"type": "message", "role": "assistant", "content": "Looking."},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ])
    );
    assert_eq!(body["tools"][1], json!({"type": "web_search"}));
}

/// A built-in tool's call and result (run by OpenAI, never by kesoku) are
/// kept, as they came, with the message they preceded, and sent back with
/// it in order.
#[tokio::test]
async fn builtin_tool_items_are_kept_and_sent_back_in_order() {
    let server = answering(&[
        "openai_responses/builtin_tools.json",
        "openai_responses/text.json",
    ])
    .await;
    let llm = llm(&server).with_builtin_tool(json!({"type": "web_search"}));
    let options = LlmOptions::new("gpt-5");
    let mut history = vec![user("Weather in Oslo, and 2 + 2?")];
    let turn = llm.complete("s", &history, &[], &options).await.unwrap();
    assert_eq!(turn.text, "Sunny in Oslo; 2 + 2 = 4.");
    assert!(turn.calls.is_empty(), "OpenAI ran them");
    let kept: Vec<&str> = turn.text_message.as_ref().unwrap().metadata["provider"]["output_items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kept,
        [
            "reasoning",
            "web_search_call",
            "code_interpreter_call",
            "message"
        ]
    );
    history.extend(turn.messages().cloned());
    history.push(user("Thanks"));
    llm.complete("s", &history, &[], &options).await.unwrap();
    let second = body_of(&server, 1).await;
    let sent: Vec<&str> = second["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(sent, ["-", "rs_b1", "ws_b1", "ci_b1", "msg_b1", "-"]);
    assert_eq!(second["input"][2]["action"]["query"], "weather Oslo");
    assert_eq!(
        second["input"][4]["content"][0]["annotations"][0]["type"],
        "url_citation"
    );
    assert_eq!(second["tools"], json!([{"type": "web_search"}]));
}
