//! Each provider's token counts, read from its documented response over
//! loopback HTTP (one-shot and streamed), stored with the turn's first
//! message; and each provider's refusal of a request over the model's
//! context window, read as one typed error and not retried.

use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    ClaudeLlm, GeminiLlm, HttpOptions, Llm, LlmError, LlmOptions, OpenAiLlm, StreamEvent, Usage,
};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::{fixture, fixture_text};

/// Retries as fast as they go, so that a retried refusal would show in
/// the request count at once.
fn http() -> HttpOptions {
    HttpOptions {
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..HttpOptions::default()
    }
}

fn backend(provider: &str, base: &str) -> Box<dyn Llm> {
    match provider {
        "anthropic" => Box::new(
            ClaudeLlm::new("k")
                .with_base_url(base)
                .with_http_options(http()),
        ),
        "openai" => Box::new(
            OpenAiLlm::new("k")
                .with_base_url(base)
                .with_http_options(http()),
        ),
        _ => Box::new(
            GeminiLlm::new("k")
                .with_base_url(base)
                .with_http_options(http()),
        ),
    }
}

fn history() -> Vec<Message> {
    vec![Message::new("s", Role::User, MessageType::Text, "Hi again")]
}

/// The usage each provider's cached reply reports, in kesoku's terms: the
/// whole request as input (Claude's cached parts added back to its
/// uncached count), Gemini's thinking counted as output.
fn expected(provider: &str) -> Usage {
    match provider {
        "anthropic" => Usage::new(21 + 188 + 2048, 9).with_cache(Some(2048), Some(188)),
        "openai" => Usage::new(2257, 9).with_cache(Some(2048), None),
        _ => Usage::new(2257, 9 + 40).with_cache(Some(2048), None),
    }
}

#[tokio::test]
async fn each_provider_s_counts_with_its_cache_are_read_and_stored() {
    for provider in ["anthropic", "openai", "gemini"] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(fixture(&format!("{provider}/text_cached.json"))),
            )
            .expect(1)
            .mount(&server)
            .await;
        let llm = backend(provider, &server.uri());
        let turn = llm
            .complete("s", &history(), &[], &LlmOptions::new("m"))
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(turn.usage, expected(provider), "{provider}");
        let first = turn.messages().next().unwrap();
        assert_eq!(Usage::of(first), Some(expected(provider)), "{provider}");
    }
}

#[tokio::test]
async fn claude_s_streamed_counts_are_those_of_its_one_shot_reply() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(fixture_text("anthropic/stream/cached.sse")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let llm = backend("anthropic", &server.uri());
    let events: Vec<_> = llm
        .stream("s", &history(), &[], &LlmOptions::new("m"))
        .collect()
        .await;
    let usage = events.iter().find_map(|e| match e {
        Ok(StreamEvent::Usage(u)) => Some(*u),
        _ => None,
    });
    assert_eq!(usage, Some(expected("anthropic")));
    let Some(Ok(StreamEvent::Done(turn))) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(turn.text, "Hello again!");
    assert_eq!(
        Usage::of(turn.messages().next().unwrap()),
        Some(expected("anthropic"))
    );
}

#[tokio::test]
async fn each_provider_s_context_refusal_is_one_typed_error_sent_once() {
    let cases = [
        (
            "anthropic",
            "anthropic/error_prompt_too_long.json",
            209_353,
            200_000,
        ),
        (
            "openai",
            "openai/error_context_length.json",
            130_412,
            128_000,
        ),
        (
            "gemini",
            "gemini/error_token_count.json",
            1_200_293,
            1_048_576,
        ),
    ];
    for (provider, body, want_tokens, want_limit) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(400).set_body_json(fixture(body)))
            // One call, one stream: neither retried.
            .expect(2)
            .mount(&server)
            .await;
        let llm = backend(provider, &server.uri());
        let error = llm
            .complete("s", &history(), &[], &LlmOptions::new("m"))
            .await
            .unwrap_err();
        let LlmError::ContextOverflow { tokens, limit, .. } = &error else {
            panic!("{provider}: {error:?}");
        };
        assert_eq!(
            (*tokens, *limit),
            (Some(want_tokens), Some(want_limit)),
            "{provider}"
        );
        assert!(
            error
                .to_string()
                .contains("longer than the model's context window"),
            "{provider}: {error}"
        );
        // Streamed, the refusal comes before the first byte: the same error.
        let events: Vec<_> = llm
            .stream("s", &history(), &[], &LlmOptions::new("m"))
            .collect()
            .await;
        assert!(
            matches!(events.last(), Some(Err(LlmError::ContextOverflow { .. }))),
            "{provider}: {events:?}"
        );
    }
}

/// The windows each backend knows, by the names its provider documents;
/// none for a name it does not know (a compatible server's model).
#[test]
fn each_backend_knows_its_model_families_windows() {
    let openai = OpenAiLlm::new("k");
    for (model, window) in [
        ("gpt-4.1-mini", Some(1_047_576)),
        ("gpt-4o-2024-08-06", Some(128_000)),
        ("gpt-4-turbo-2024-04-09", Some(128_000)),
        ("gpt-4-0125-preview", Some(128_000)),
        ("gpt-4-32k", Some(32_768)),
        ("gpt-4", Some(8_192)),
        ("gpt-4-0613", Some(8_192)),
        ("gpt-5", Some(272_000)),
        ("gpt-5-chat-latest", Some(128_000)),
        ("o1-mini", Some(128_000)),
        ("o3-mini", Some(200_000)),
        ("gpt-3.5-turbo-0125", Some(16_385)),
        ("gpt-3.5-turbo-instruct", Some(4_096)),
        ("llama3.1:8b", None),
        ("gpt-4-something-new", None),
    ] {
        assert_eq!(openai.context_window(model), window, "{model}");
    }
    let claude = ClaudeLlm::new("k");
    assert_eq!(claude.context_window("claude-opus-4-1"), Some(200_000));
    assert_eq!(claude.context_window("m"), None);
    let gemini = GeminiLlm::new("k");
    assert_eq!(gemini.context_window("gemini-1.5-pro-002"), Some(2_097_152));
    assert_eq!(gemini.context_window("gemini-2.5-flash"), Some(1_048_576));
    assert_eq!(gemini.context_window("gemma-3"), None);
}
