//! Streamed replies over HTTP, from each provider's recorded stream
//! (`tests/fixtures/<provider>/stream/`): the request asks for a stream,
//! the events come in order, and the last is the turn `complete` gives for
//! the same reply; an error before the first byte is retried, one after it
//! is an error, as are a stream cut short and a connection reset.

use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    AssistantTurn, ClaudeLlm, GeminiLlm, HttpOptions, Llm, LlmError, LlmOptions, OpenAiLlm,
    StreamEvent, ToolDeclaration,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::{fixture, fixture_text};

fn fast() -> HttpOptions {
    HttpOptions {
        max_retries: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(20),
        ..HttpOptions::default()
    }
}

fn tools() -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }]
}

fn history() -> Vec<Message> {
    vec![Message::new(
        "s",
        Role::User,
        MessageType::Text,
        "Weather in Oslo and Lima?",
    )]
}

/// Which provider, its backend at `base`, and where it posts a stream.
fn backend(provider: &str, base: &str) -> (Box<dyn Llm>, &'static str) {
    match provider {
        "anthropic" => (
            Box::new(
                ClaudeLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(fast()),
            ),
            "/v1/messages",
        ),
        "openai" => (
            Box::new(
                OpenAiLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(fast()),
            ),
            "/chat/completions",
        ),
        _ => (
            Box::new(
                GeminiLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(fast()),
            ),
            "/v1beta/models/m:streamGenerateContent",
        ),
    }
}

/// A turn as JSON, random message ids replaced by positions.
fn normalized(turn: &AssistantTurn) -> Value {
    let mut text = serde_json::to_string(&turn.messages).unwrap();
    for (i, m) in turn.messages.iter().enumerate() {
        text = text.replace(&m.id, &format!("message-{i}"));
    }
    let mut messages: Value = serde_json::from_str(&text).unwrap();
    for m in messages.as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("timestamp");
    }
    json!({"text": turn.text, "stop": format!("{:?}", turn.stop_reason),
           "usage": [turn.usage.input_tokens, turn.usage.output_tokens], "messages": messages})
}

async fn collect(llm: &dyn Llm) -> Vec<Result<StreamEvent, LlmError>> {
    let history = history();
    let tools = tools();
    let options = LlmOptions::new("m");
    llm.stream("s", &history, &tools, &options).collect().await
}

#[tokio::test]
async fn each_backend_streams_the_turn_complete_gives() {
    for provider in ["anthropic", "openai", "gemini"] {
        let server = MockServer::start().await;
        let (llm, stream_path) = backend(provider, &server.uri());
        assert!(llm.streams());
        // Claude and OpenAI stream on the one-shot path, when asked.
        let asked = if provider == "gemini" {
            json!({})
        } else {
            json!({"stream": true})
        };
        Mock::given(method("POST"))
            .and(path(stream_path))
            .and(body_partial_json(asked))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/event-stream")
                    .set_body_string(fixture_text(&format!("{provider}/stream/two_calls.sse"))),
            )
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(fixture(&format!("{provider}/stream/two_calls.json"))),
            )
            .mount(&server)
            .await;

        let events: Vec<StreamEvent> = collect(&*llm)
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        let Some(StreamEvent::Done(streamed)) = events.last() else {
            panic!("{provider}: the last event is the turn: {events:?}")
        };
        let options = LlmOptions::new("m");
        let completed = llm
            .complete("s", &history(), &tools(), &options)
            .await
            .unwrap();
        assert_eq!(normalized(streamed), normalized(&completed), "{provider}");
        assert_eq!(streamed.tool_calls.len(), 2, "{provider}");
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, streamed.text, "{provider}");
        assert!(
            matches!(&events[events.len() - 2], StreamEvent::Stop(_)),
            "{provider}"
        );

        // The streamed request asked for a stream.
        let requests = server.received_requests().await.unwrap();
        let sent: Value = serde_json::from_slice(&requests[0].body).unwrap();
        match provider {
            "anthropic" => assert_eq!(sent["stream"], true),
            "openai" => {
                assert_eq!(sent["stream"], true);
                assert_eq!(sent["stream_options"]["include_usage"], true);
            }
            _ => assert_eq!(requests[0].url.query(), Some("alt=sse")),
        }
    }
}

#[tokio::test]
async fn an_error_before_the_first_byte_is_retried_and_one_after_it_is_not() {
    let server = MockServer::start().await;
    let (llm, stream_path) = backend("anthropic", &server.uri());
    Mock::given(method("POST"))
        .and(path(stream_path))
        .respond_with(ResponseTemplate::new(529))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(stream_path))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(fixture_text("anthropic/stream/error.sse")),
        )
        .mount(&server)
        .await;
    let events = collect(&*llm).await;
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2,
        "one retry"
    );
    // The text before the error came; then the error, and no turn.
    assert!(matches!(events.first(), Some(Ok(StreamEvent::Thought(_)))));
    let Some(Err(LlmError::Stream { message, .. })) = events.last() else {
        panic!("{events:?}")
    };
    assert!(message.contains("Overloaded"), "{message}");
    assert!(!events.iter().any(|e| matches!(e, Ok(StreamEvent::Done(_)))));
}

#[tokio::test]
async fn a_stream_cut_short_gives_no_turn() {
    for provider in ["anthropic", "openai", "gemini"] {
        let server = MockServer::start().await;
        let (llm, stream_path) = backend(provider, &server.uri());
        let full = fixture_text(&format!("{provider}/stream/two_calls.sse"));
        // Everything but the last event.
        let blank = if full.contains("\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        let cut = full.trim_end().rfind(blank).unwrap() + blank.len();
        Mock::given(method("POST"))
            .and(path(stream_path))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/event-stream")
                    .set_body_string(&full[..cut]),
            )
            .mount(&server)
            .await;
        let events = collect(&*llm).await;
        let Some(Err(LlmError::Stream { message, .. })) = events.last() else {
            panic!("{provider}: {events:?}")
        };
        assert!(
            message.contains("before the reply was complete"),
            "{provider}: {message}"
        );
        assert!(
            !events.iter().any(|e| matches!(e, Ok(StreamEvent::Done(_)))),
            "{provider}"
        );
    }
}

#[tokio::test]
async fn a_connection_reset_mid_stream_is_an_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let body = fixture_text("anthropic/stream/two_calls.sse");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0; 65536];
        let _ = socket.read(&mut buf).await;
        let half = &body.as_bytes()[..body.len() / 2];
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n", half.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(chunk.as_bytes()).await.unwrap();
        socket.write_all(half).await.unwrap();
        socket.write_all(b"\r\n").await.unwrap();
        socket.flush().await.unwrap();
        // Gone, without the last chunk.
        drop(socket);
    });
    let (llm, _) = backend("anthropic", &base);
    let events = collect(&*llm).await;
    assert!(
        events.iter().any(|e| matches!(e, Ok(StreamEvent::Text(_)))),
        "{events:?}"
    );
    let Some(Err(LlmError::Stream { message, .. })) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        message.contains("broke off") || message.contains("before the reply"),
        "{message}"
    );
}

#[tokio::test]
async fn a_model_that_does_not_stream_gives_its_turn_as_events() {
    let model = kesoku_llm::ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}]}
    ]))
    .unwrap();
    assert!(!model.streams());
    let events: Vec<StreamEvent> = collect(&model)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(
        matches!(&events[0], StreamEvent::ToolCallStart { index: 0, id, name } if id == "c1" && name == "get_weather")
    );
    assert_eq!(
        events[1],
        StreamEvent::ToolCallArguments {
            index: 0,
            delta: r#"{"city":"Oslo"}"#.into()
        }
    );
    assert_eq!(events[2], StreamEvent::ToolCallEnd { index: 0 });
    assert!(matches!(events.last(), Some(StreamEvent::Done(t)) if t.tool_calls.len() == 1));
}
