//! A session recorded over real HTTP (a loopback server) replays without
//! one: the same turns, one-shot and streamed; a request that is not the
//! one recorded, or one too many, fails naming why; no key is written.

use std::sync::Arc;

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::testing::{RecordingTransport, ReplayTransport};
use kesoku_llm::{
    ClaudeLlm, HttpOptions, Llm, LlmError, LlmOptions, ReqwestTransport, StreamEvent,
    TransportError,
};
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, MockServer, ResponseTemplate};
mod common;
use common::{fixture, fixture_text};

const KEY: &str = "sk-ant-RECORDED-KEY";

fn user(text: &str) -> Message {
    Message::new("s", Role::User, MessageType::Text, text)
}

async fn provider() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(serde_json::json!({"stream": true})))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            fixture_text("anthropic/stream/two_calls.sse"),
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .mount(&server)
        .await;
    server
}

/// The last event of a streamed call: the turn.
async fn streamed(llm: &dyn Llm, history: &[Message]) -> kesoku_llm::AssistantTurn {
    let options = LlmOptions::new("m");
    let mut events = llm.stream("s", history, &[], &options);
    let mut last = None;
    while let Some(event) = events.next().await {
        if let StreamEvent::Done(turn) = event.unwrap() {
            last = Some(turn);
        }
    }
    last.expect("a turn")
}

#[tokio::test]
async fn a_recorded_session_replays_without_a_network() {
    let server = provider().await;
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("session.jsonl");
    let recording = ClaudeLlm::new(KEY)
        .with_base_url(server.uri())
        .with_transport(RecordingTransport::new(
            ReqwestTransport::new(&HttpOptions::default()),
            &cassette,
        ));
    let options = LlmOptions::new("m");
    let first = recording
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    let second = streamed(&recording, &[user("Weather?")]).await;
    assert_eq!(second.calls.len(), 2);

    let text = std::fs::read_to_string(&cassette).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains(KEY), "no key is recorded");
    assert!(text.contains("text/event-stream"), "{text}");
    drop(server);

    // No server now: the replay answers, with the same turns.
    let replay = Arc::new(ReplayTransport::open(&cassette).unwrap());
    let replayed = ClaudeLlm::new("another-key")
        .with_base_url("http://127.0.0.1:9")
        .with_transport(Arc::clone(&replay));
    let again = replayed
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();
    assert_eq!((&again.text, again.usage), (&first.text, first.usage));
    let again = streamed(&replayed, &[user("Weather?")]).await;
    assert_eq!(
        again.tool_calls().collect::<Vec<_>>(),
        second.tool_calls().collect::<Vec<_>>()
    );
    assert_eq!(replay.remaining(), 0);

    // One request more than recorded.
    let err = replayed
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap_err();
    let LlmError::Transport {
        source: TransportError::Replay(why),
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(why.contains("has 2 interactions; request 3"), "{why}");
}

#[tokio::test]
async fn a_request_unlike_the_recorded_one_names_the_difference() {
    let server = provider().await;
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("one.jsonl");
    let options = LlmOptions::new("m");
    ClaudeLlm::new(KEY)
        .with_base_url(server.uri())
        .with_transport(RecordingTransport::new(
            ReqwestTransport::default(),
            &cassette,
        ))
        .complete("s", &[user("Hi")], &[], &options)
        .await
        .unwrap();

    let replayed = ClaudeLlm::new("k").with_transport(ReplayTransport::open(&cassette).unwrap());
    let err = replayed
        .complete("s", &[user("Hello")], &[], &options)
        .await
        .unwrap_err();
    // Why is the transport's error, the source (issue 43: said once).
    let err = kesoku_core::ErrorChain(&err).to_string();
    assert!(
        err.contains("request 1 differs from the one recorded")
            && err.contains("/messages/0/content"),
        "{err}"
    );
    // Matching by path alone, the same request is answered.
    let lenient = ClaudeLlm::new("k")
        .with_transport(ReplayTransport::open(&cassette).unwrap().ignoring_bodies());
    let turn = lenient
        .complete("s", &[user("Hello")], &[], &options)
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
}

#[test]
fn a_broken_cassette_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(&path, "{\"method\": \"POST\"}\n").unwrap();
    let err = ReplayTransport::open(&path).unwrap_err().to_string();
    assert!(err.contains("bad.jsonl, line 1"), "{err}");
    let err = ReplayTransport::open(dir.path().join("missing.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.jsonl"), "{err}");
}
