//! Redirects and the API key: a redirect within the provider's origin is
//! followed, key and all; one to another origin (here 127.0.0.1 to
//! localhost, another host) is not, so no credential header (`x-api-key`,
//! `x-goog-api-key`, `Authorization`) reaches it. reqwest on its own
//! follows it and strips only `Authorization` and cookies.

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{ClaudeLlm, GeminiLlm, HttpOptions, Llm, LlmError, LlmOptions, OpenAiLlm};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

mod common;
use common::fixture;

const KEY: &str = "sk-secret-key";

fn llm(provider: &str, base: &str) -> Box<dyn Llm> {
    let http = HttpOptions {
        max_retries: 0,
        ..HttpOptions::default()
    };
    match provider {
        "anthropic" => Box::new(
            ClaudeLlm::new(KEY)
                .with_base_url(base)
                .with_http_options(http),
        ),
        "openai" => Box::new(
            OpenAiLlm::new(KEY)
                .with_base_url(base)
                .with_http_options(http),
        ),
        _ => Box::new(
            GeminiLlm::new(KEY)
                .with_base_url(base)
                .with_http_options(http),
        ),
    }
}

fn history() -> Vec<Message> {
    vec![Message::new("s", Role::User, MessageType::Text, "Hi")]
}

/// Whether a request carried the key, in any header.
fn carries_key(request: &Request) -> bool {
    request
        .headers
        .values()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(KEY)))
}

/// A server answering every POST with the provider's one-shot reply.
async fn answering(provider: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(fixture(&format!("{provider}/text.json"))),
        )
        .mount(&server)
        .await;
    server
}

/// A server on 127.0.0.1 redirecting every POST (307, which keeps the
/// method and body) to the same path at `to`.
async fn redirecting(to: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |request: &Request| {
            let mut location = format!("{to}{}", request.url.path());
            if let Some(query) = request.url.query() {
                location = format!("{location}?{query}");
            }
            ResponseTemplate::new(307).insert_header("location", location.as_str())
        })
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_and_gets_no_key() {
    for provider in ["anthropic", "openai", "gemini"] {
        let elsewhere = answering(provider).await;
        let port = elsewhere.address().port();
        let origin = format!("http://localhost:{port}");
        let first = redirecting(origin.clone()).await;
        let llm = llm(provider, &first.uri());
        let options = LlmOptions::new("m");

        let e = llm
            .complete("s", &history(), &[], &options)
            .await
            .unwrap_err();
        let LlmError::CrossOriginRedirect { location, .. } = &e else {
            panic!("{provider}: {e}")
        };
        assert_eq!(*location, origin, "{provider}");
        assert!(!e.to_string().contains(KEY), "{provider}: {e}");

        let streamed: Vec<_> = llm.stream("s", &history(), &[], &options).collect().await;
        assert!(
            matches!(&streamed[..], [Err(LlmError::CrossOriginRedirect { .. })]),
            "{provider}: {streamed:?}"
        );

        let reached = elsewhere.received_requests().await.unwrap();
        assert!(
            !reached.iter().any(carries_key),
            "{provider}: the key reached the other host"
        );
        assert!(
            reached.is_empty(),
            "{provider}: {} requests reached the other host",
            reached.len()
        );
        // The provider's own address did get the key, twice.
        let asked = first.received_requests().await.unwrap();
        assert_eq!(asked.len(), 2, "{provider}");
        assert!(asked.iter().all(carries_key), "{provider}");
    }
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed_with_the_key() {
    for provider in ["anthropic", "openai", "gemini"] {
        let server = MockServer::start().await;
        let moved = "/moved";
        Mock::given(method("POST"))
            .and(path(moved))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(fixture(&format!("{provider}/text.json"))),
            )
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(307)
                    .insert_header("location", format!("{}{moved}", server.uri()).as_str()),
            )
            .mount(&server)
            .await;
        let turn = llm(provider, &server.uri())
            .complete("s", &history(), &[], &LlmOptions::new("m"))
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert!(!turn.text.is_empty(), "{provider}");
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 2, "{provider}");
        assert_eq!(requests[1].url.path(), moved, "{provider}");
        assert!(carries_key(&requests[1]), "{provider}");
    }
}
