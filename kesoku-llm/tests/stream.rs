//! Streamed replies over HTTP, from each provider's recorded stream
//! (`tests/fixtures/<provider>/stream/`): the request asks for a stream,
//! the events come in order, and the last is the turn `complete` gives for
//! the same reply; an error before the first byte is retried, one after it
//! is an error, as are a stream cut short and a connection reset. What the
//! event-stream format allows (a leading byte-order mark, lines ended by CR
//! alone, events without a name) gives the same turn; an event over
//! `HttpOptions::max_event_bytes` and a call past `HttpOptions::call_timeout`
//! fail with the limit named.

use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    AssistantTurn, ClaudeLlm, GeminiLlm, HttpOptions, Llm, LlmError, LlmOptions, OpenAiLlm,
    OpenAiResponsesLlm, StreamEvent, ToolDeclaration,
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
    backend_with(provider, base, fast())
}

/// As [`backend`], with these HTTP options.
fn backend_with(provider: &str, base: &str, http: HttpOptions) -> (Box<dyn Llm>, &'static str) {
    match provider {
        "anthropic" => (
            Box::new(
                ClaudeLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(http),
            ),
            "/v1/messages",
        ),
        "openai" => (
            Box::new(
                OpenAiLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(http),
            ),
            "/chat/completions",
        ),
        "openai_responses" => (
            Box::new(
                OpenAiResponsesLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(http),
            ),
            "/responses",
        ),
        _ => (
            Box::new(
                GeminiLlm::new("k")
                    .with_base_url(base)
                    .with_http_options(http),
            ),
            "/v1beta/models/m:streamGenerateContent",
        ),
    }
}

/// A turn as JSON, random message ids replaced by positions.
fn normalized(turn: &AssistantTurn) -> Value {
    let all: Vec<_> = turn.messages().collect();
    let mut text = serde_json::to_string(&all).unwrap();
    for (i, m) in all.iter().enumerate() {
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
    for provider in PROVIDERS {
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
        assert_eq!(streamed.calls.len(), 2, "{provider}");
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
            "openai_responses" => {
                assert_eq!(sent["stream"], true);
                assert_eq!(sent["store"], false);
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
    for provider in PROVIDERS {
        let server = MockServer::start().await;
        let (llm, stream_path) = backend(provider, &server.uri());
        let full = fixture_text(&format!("{provider}/stream/two_calls.sse"));
        // Everything before the event that makes the reply whole (for
        // OpenAI the finish reason: `[DONE]` may rightly be missing).
        let blank = if full.contains("\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        let whole = if provider == "openai" {
            full.find("\"finish_reason\": \"tool_calls\"").unwrap()
        } else {
            full.trim_end().len()
        };
        let cut = full[..whole].rfind(blank).unwrap() + blank.len();
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

/// How a [`chunking_server`] ends its answer.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// The last chunk, as HTTP wants.
    Finish,
    /// The connection cut mid-body.
    Cut,
    /// Nothing: the connection held open, as some proxies do.
    Hold,
}

/// A server answering one request with `body` in HTTP chunks of `size`
/// bytes, each written on its own (so lines, events and UTF-8 characters
/// are cut everywhere), ending as `ending` says.
async fn chunking_server(body: String, size: usize, ending: Ending) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket.set_nodelay(true).unwrap();
        let mut buf = vec![0; 1 << 16];
        let _ = socket.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        for piece in body.as_bytes().chunks(size) {
            let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
            framed.extend_from_slice(piece);
            framed.extend_from_slice(b"\r\n");
            if socket.write_all(&framed).await.is_err() {
                return;
            }
            let _ = socket.flush().await;
            tokio::task::yield_now().await;
        }
        match ending {
            Ending::Finish => {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            Ending::Hold => tokio::time::sleep(Duration::from_secs(60)).await,
            Ending::Cut => {}
        }
    });
    base
}

#[tokio::test]
async fn a_server_writing_one_byte_at_a_time_gives_the_same_turn() {
    for provider in PROVIDERS {
        let sse = fixture_text(&format!("{provider}/stream/two_calls.sse"));
        let base = chunking_server(sse, 1, Ending::Finish).await;
        let (llm, _) = backend(provider, &base);
        let events = collect(&*llm).await;
        let Some(Ok(StreamEvent::Done(streamed))) = events.last() else {
            panic!("{provider}: {events:?}")
        };
        let whole: Value = fixture(&format!("{provider}/stream/two_calls.json"));
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(whole))
            .mount(&server)
            .await;
        let (one_shot, _) = backend(provider, &server.uri());
        let completed = one_shot
            .complete("s", &history(), &tools(), &LlmOptions::new("m"))
            .await
            .unwrap();
        assert_eq!(normalized(streamed), normalized(&completed), "{provider}");
    }
}

#[tokio::test]
async fn a_connection_reset_mid_stream_is_an_error() {
    let body = fixture_text("anthropic/stream/two_calls.sse");
    // Half of it, cut at a character boundary (the body is text).
    let cut = (0..=body.len() / 2)
        .rev()
        .find(|&i| body.is_char_boundary(i))
        .unwrap();
    let half = body[..cut].to_owned();
    let base = chunking_server(half, 64, Ending::Cut).await;
    let (llm, _) = backend("anthropic", &base);
    let events = collect(&*llm).await;
    assert!(
        events.iter().any(|e| matches!(e, Ok(StreamEvent::Text(_)))),
        "{events:?}"
    );
    let Some(Err(LlmError::Stream { message, .. })) = events.last() else {
        panic!("{events:?}")
    };
    assert!(message.contains("broke off"), "{message}");
}

#[tokio::test]
async fn a_reply_is_done_at_its_last_event_though_the_connection_stays_open() {
    for provider in ["anthropic", "openai", "openai_responses"] {
        let sse = fixture_text(&format!("{provider}/stream/two_calls.sse"));
        let base = chunking_server(sse, 4096, Ending::Hold).await;
        let (llm, _) = backend(provider, &base);
        let events = tokio::time::timeout(Duration::from_secs(10), collect(&*llm))
            .await
            .unwrap_or_else(|_| panic!("{provider}: waited for the connection to close"));
        assert!(
            matches!(events.last(), Some(Ok(StreamEvent::Done(_)))),
            "{provider}: {events:?}"
        );
    }
}

#[tokio::test]
async fn a_server_that_ignores_the_request_for_a_stream_still_gives_the_turn() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(fixture("openai/stream/two_calls.json")),
        )
        .mount(&server)
        .await;
    let (llm, _) = backend("openai", &server.uri());
    let events: Vec<StreamEvent> = collect(&*llm)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let Some(StreamEvent::Done(turn)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(turn.calls.len(), 2);
    assert!(matches!(&events[0], StreamEvent::Text(t) if t == &turn.text));
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
    assert!(matches!(events.last(), Some(StreamEvent::Done(t)) if t.calls.len() == 1));
}

const PROVIDERS: [&str; 4] = ["anthropic", "openai", "gemini", "openai_responses"];

/// The turn `complete` gives for a provider's recorded reply, normalized.
async fn completed(provider: &str) -> Value {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(fixture(&format!("{provider}/stream/two_calls.json"))),
        )
        .mount(&server)
        .await;
    let (llm, _) = backend(provider, &server.uri());
    let turn = llm
        .complete("s", &history(), &tools(), &LlmOptions::new("m"))
        .await
        .unwrap();
    normalized(&turn)
}

/// The events of `body` streamed by a server writing it in chunks of
/// `size` bytes.
async fn streamed(
    provider: &str,
    body: String,
    size: usize,
    http: HttpOptions,
) -> Vec<Result<StreamEvent, LlmError>> {
    let base = chunking_server(body, size, Ending::Finish).await;
    let (llm, _) = backend_with(provider, &base, http);
    collect(&*llm).await
}

/// `body`, streamed whole and a byte at a time, gives the recorded turn.
async fn assert_streams_the_recorded_turn(provider: &str, body: &str, what: &str) {
    let expected = completed(provider).await;
    for size in [usize::MAX, 1] {
        let events = streamed(provider, body.to_owned(), size, fast()).await;
        let Some(Ok(StreamEvent::Done(turn))) = events.last() else {
            panic!("{provider}, {what}, chunks of {size}: {events:?}")
        };
        assert_eq!(
            normalized(turn),
            expected,
            "{provider}, {what}, chunks of {size}"
        );
    }
}

#[tokio::test]
async fn a_byte_order_mark_before_the_stream_is_read_on_every_provider() {
    // The format allows one; eventsource-stream 0.2.3 panicked on it.
    for provider in PROVIDERS {
        let body = format!(
            "\u{feff}{}",
            fixture_text(&format!("{provider}/stream/two_calls.sse"))
        );
        assert_streams_the_recorded_turn(provider, &body, "a leading BOM").await;
    }
}

#[tokio::test]
async fn a_stream_whose_lines_end_with_cr_alone_is_read_on_every_provider() {
    // Valid SSE; the last event was lost on Claude and Gemini.
    for provider in PROVIDERS {
        let body = fixture_text(&format!("{provider}/stream/two_calls.sse"))
            .replace("\r\n", "\r")
            .replace('\n', "\r");
        assert_streams_the_recorded_turn(provider, &body, "CR line ends").await;
    }
}

#[tokio::test]
async fn claude_ignores_events_without_a_name_or_that_it_does_not_know() {
    // Parsers name an event without an `event:` line "message"; Anthropic's
    // SDK reads only the events it knows, and does not parse the others.
    let recorded = fixture_text("anthropic/stream/two_calls.sse");
    let first = recorded.find("\n\n").unwrap() + 2;
    let body = format!(
        "{}data: \n\ndata: {{\"type\": \"ping\"}}\n\nevent: a_future_event\ndata: not json\n\n{}",
        &recorded[..first],
        &recorded[first..]
    );
    assert_streams_the_recorded_turn("anthropic", &body, "nameless events").await;
}

#[tokio::test]
async fn an_event_over_the_size_limit_fails_the_call_naming_the_limit() {
    // A text delta of 4 KiB in an event, where 1 KiB is allowed: whole or
    // a byte at a time (which cost quadratic work before), the call fails
    // at that event.
    let recorded = fixture_text("anthropic/stream/two_calls.sse");
    let first = recorded.find("\n\n").unwrap() + 2;
    let big = json!({"type": "content_block_start", "index": 9,
        "content_block": {"type": "text", "text": "x".repeat(4096)}});
    let body = format!(
        "{}event: content_block_start\ndata: {big}\n\n{}",
        &recorded[..first],
        &recorded[first..]
    );
    let http = HttpOptions {
        max_event_bytes: 1024,
        ..fast()
    };
    for size in [usize::MAX, 1] {
        let events = streamed("anthropic", body.clone(), size, http).await;
        let Some(Err(e)) = events.last() else {
            panic!("chunks of {size}: {events:?}")
        };
        assert_eq!(
            *e,
            LlmError::EventTooLarge {
                provider: "Claude",
                limit: 1024
            },
            "chunks of {size}"
        );
        assert!(e.to_string().contains("1024 bytes"), "{e}");
        assert!(!events.iter().any(|e| matches!(e, Ok(StreamEvent::Done(_)))));
    }
    // Under the default limit, the same reply is read.
    let events = streamed("anthropic", body, 4096, fast()).await;
    assert!(
        matches!(events.last(), Some(Ok(StreamEvent::Done(_)))),
        "{events:?}"
    );
}

/// A server that answers a stream's headers, then a keep-alive comment
/// every 20 ms for up to 10 s, and never a reply.
async fn keep_alive_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0; 1 << 16];
        let _ = socket.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        for _ in 0..500 {
            let comment = b": keep-alive\n\n";
            let mut framed = format!("{:x}\r\n", comment.len()).into_bytes();
            framed.extend_from_slice(comment);
            framed.extend_from_slice(b"\r\n");
            if socket.write_all(&framed).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    base
}

#[tokio::test]
async fn a_stream_of_keep_alive_comments_is_cut_at_the_call_limit() {
    let limit = Duration::from_millis(300);
    for provider in PROVIDERS {
        let base = keep_alive_server().await;
        let http = HttpOptions {
            call_timeout: Some(limit),
            ..fast()
        };
        let (llm, _) = backend_with(provider, &base, http);
        let events = collect(&*llm).await;
        let [Err(e)] = &events[..] else {
            panic!("{provider}: {events:?}")
        };
        assert_eq!(
            *e,
            LlmError::CallTimeout {
                provider: llm.provider(),
                limit
            },
            "{provider}"
        );
        assert!(e.to_string().contains("300ms"), "{e}");
    }
}

#[tokio::test]
async fn a_call_that_gets_no_answer_is_cut_at_the_call_limit() {
    // `complete` too: the request timeout (5 minutes here) would wait on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (_socket, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
    });
    let limit = Duration::from_millis(300);
    let (llm, _) = backend_with(
        "anthropic",
        &base,
        HttpOptions {
            call_timeout: Some(limit),
            ..fast()
        },
    );
    let e = llm
        .complete("s", &history(), &tools(), &LlmOptions::new("m"))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        LlmError::CallTimeout {
            provider: "Claude",
            limit
        }
    );
}

/// A Responses stream that ends inside an event (the body finished, or the
/// connection cut) fails the call; nothing of the half event is taken.
#[tokio::test]
async fn a_responses_stream_cut_mid_event_fails_cleanly() {
    let full = fixture_text("openai_responses/stream/two_calls.sse");
    // Inside the data of one of the last call's argument deltas.
    let at = full.find("\"delta\": \"ty").unwrap() + 5;
    for ending in [Ending::Finish, Ending::Cut] {
        let base = chunking_server(full[..at].to_owned(), 7, ending).await;
        let (llm, _) = backend("openai_responses", &base);
        let events = collect(&*llm).await;
        let Some(Err(LlmError::Stream { message, .. })) = events.last() else {
            panic!("{events:?}")
        };
        assert!(
            message.contains("before the reply was complete") || message.contains("broke off"),
            "{message}"
        );
        assert!(!events.iter().any(|e| matches!(e, Ok(StreamEvent::Done(_)))));
    }
}
