//! `AzureOpenAiLlm` and `AzureResponsesLlm` against a real HTTP server on
//! loopback (wiremock): Azure's addresses (a deployment's with a dated
//! `api-version`, or the v1 API's), the `api-key` header or an Entra ID
//! bearer token (fixed, or asked of a provider before each request), and
//! neither ever printed: not in `Debug`, and redacted from an error that
//! quotes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt as _;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    AzureOpenAiLlm, AzureResponsesLlm, BoxError, HttpOptions, Llm, LlmError, LlmOptions,
    StreamEvent, ToolDeclaration,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::{fixture, fixture_text};

const KEY: &str = "azure-key-0123456789abcdef";

fn no_retries() -> HttpOptions {
    HttpOptions {
        max_retries: 0,
        ..HttpOptions::default()
    }
}

fn hi() -> Vec<Message> {
    vec![Message::new("s", Role::User, MessageType::Text, "Hi")]
}

async fn body_of(server: &MockServer, i: usize) -> Value {
    serde_json::from_slice(&server.received_requests().await.unwrap()[i].body).unwrap()
}

#[tokio::test]
async fn chat_goes_to_the_deployment_with_the_api_version_and_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/gpt-4o-prod/chat/completions"))
        .and(query_param("api-version", "2024-10-21"))
        .and(header("api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let llm = AzureOpenAiLlm::new(format!("{}/", server.uri()), KEY)
        .with_api_version("2024-10-21")
        .with_http_options(no_retries());
    assert_eq!(llm.provider(), "Azure OpenAI");
    let turn = llm
        .complete("s", &hi(), &[], &LlmOptions::new("gpt-4o-prod"))
        .await
        .unwrap();
    assert_eq!(turn.text, "Hello!");
    assert_eq!(turn.text_message.unwrap().sender, "Azure OpenAI");
    let request = &server.received_requests().await.unwrap()[0];
    assert!(request.headers.get("authorization").is_none());
    assert_eq!(body_of(&server, 0).await["model"], "gpt-4o-prod");
}

#[tokio::test]
async fn without_a_dated_version_both_apis_use_v1_with_the_deployment_as_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/openai/v1/responses"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(fixture("openai_responses/text.json")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let chat = AzureOpenAiLlm::new(server.uri(), KEY).with_deployment("my-deployment");
    let responses = AzureResponsesLlm::new(server.uri(), KEY).with_api_version("v1");
    let options = LlmOptions::new("gpt-5");
    chat.complete("s", &hi(), &[], &options).await.unwrap();
    responses.complete("s", &hi(), &[], &options).await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert!(requests.iter().all(|r| r.url.query().is_none()));
    assert_eq!(body_of(&server, 0).await["model"], "my-deployment");
    let sent = body_of(&server, 1).await;
    assert_eq!(sent["model"], "gpt-5");
    assert_eq!(sent["store"], false);
}

/// Responses with a dated version go where the official SDK sends them,
/// streamed too, with a fixed Entra ID token as the bearer.
#[tokio::test]
async fn responses_with_a_dated_version_and_an_entra_token_stream() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/responses"))
        .and(query_param("api-version", "2025-04-01-preview"))
        .and(header("authorization", "Bearer entra-token-0123456789"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(fixture_text("openai_responses/stream/two_calls.sse")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let llm = AzureResponsesLlm::with_entra_token(server.uri(), "entra-token-0123456789")
        .with_api_version("2025-04-01-preview");
    let tools = vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Weather.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }];
    let history = hi();
    let options = LlmOptions::new("gpt-5");
    let events: Vec<_> = llm.stream("s", &history, &tools, &options).collect().await;
    let Some(Ok(StreamEvent::Done(turn))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(turn.calls.len(), 2);
    let request = &server.received_requests().await.unwrap()[0];
    assert!(request.headers.get("api-key").is_none());
    assert_eq!(body_of(&server, 0).await["stream"], true);
}

/// A token provider is asked before each request, and its token is sent.
#[tokio::test]
async fn a_token_provider_is_asked_for_each_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .mount(&server)
        .await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let llm = AzureOpenAiLlm::with_token_provider(server.uri(), move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move { Ok::<_, BoxError>(format!("token-{n}")) }
    })
    .with_api_version("2024-10-21");
    let options = LlmOptions::new("dep");
    llm.complete("s", &hi(), &[], &options).await.unwrap();
    llm.complete("t", &hi(), &[], &options).await.unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    let requests = server.received_requests().await.unwrap();
    let bearer = |i: usize| {
        requests[i].headers["authorization"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        (bearer(0), bearer(1)),
        ("Bearer token-1".into(), "Bearer token-2".into())
    );

    // A provider that fails fails the call, before anything is sent.
    let failing = AzureOpenAiLlm::with_token_provider(server.uri(), || async {
        Err::<String, BoxError>(Arc::new(std::io::Error::other("no identity")))
    });
    let err = failing
        .complete("s", &hi(), &[], &options)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Config { message, .. } if message.contains("no identity")),
        "{err:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

/// The key, or a provider's token, quoted by an error body is redacted;
/// neither shows in `Debug`.
#[tokio::test]
async fn the_key_and_the_token_are_never_printed() {
    let token = "entra-token-ABCDEFGHIJKLMNOP";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": {
                "code": "401",
                "message": format!("Access denied: api-key {KEY} / Bearer {token} is invalid.")
            }
        })))
        .mount(&server)
        .await;
    let keyed = AzureOpenAiLlm::new(server.uri(), KEY).with_http_options(no_retries());
    let by_provider = AzureResponsesLlm::with_token_provider(server.uri(), move || async move {
        Ok::<_, BoxError>(token.to_owned())
    })
    .with_http_options(no_retries());
    let fixed = AzureResponsesLlm::with_entra_token(server.uri(), token);
    for shown in [
        format!("{keyed:?}"),
        format!("{by_provider:?}"),
        format!("{fixed:?}"),
    ] {
        assert!(!shown.contains(KEY) && !shown.contains(token), "{shown}");
    }
    let options = LlmOptions::new("dep");
    let err = keyed
        .complete("s", &hi(), &[], &options)
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains(KEY), "{err}");
    assert!(err.contains("api-key [redacted]"), "{err}");
    let err = by_provider
        .complete("s", &hi(), &[], &options)
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains(token), "{err}");
    assert!(err.contains("Bearer [redacted]"), "{err}");
}

/// In a process of its own (the environment is the process's), the
/// backend `from_env` makes: it calls once, and says what it got.
#[tokio::test]
async fn from_env_child() {
    let Ok(expect) = std::env::var("KESOKU_AZURE_ENV_CHILD") else {
        return;
    };
    match AzureOpenAiLlm::from_env() {
        Ok(llm) => {
            assert_eq!(expect, "ok");
            llm.complete("s", &hi(), &[], &LlmOptions::new("dep"))
                .await
                .unwrap();
        }
        Err(e) => assert_eq!(expect, format!("error: {e}")),
    }
}

/// `from_env` reads what the official SDK reads: the endpoint, an Entra ID
/// token before a key, and the API version.
#[tokio::test]
async fn from_env_reads_the_sdks_variables() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("openai/text.json")))
        .mount(&server)
        .await;
    let run = |vars: &[(&str, &str)], expect: &str| {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "from_env_child", "--test-threads=1"])
            .env_remove("AZURE_OPENAI_ENDPOINT")
            .env_remove("AZURE_OPENAI_API_KEY")
            .env_remove("AZURE_OPENAI_AD_TOKEN")
            .env_remove("OPENAI_API_VERSION")
            .env("KESOKU_AZURE_ENV_CHILD", expect);
        for (k, v) in vars {
            child.env(k, v);
        }
        let out = child.output().unwrap();
        assert!(
            out.status.success(),
            "{vars:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    };
    let uri = server.uri();
    run(
        &[
            ("AZURE_OPENAI_ENDPOINT", &uri),
            ("AZURE_OPENAI_API_KEY", KEY),
            ("AZURE_OPENAI_AD_TOKEN", "entra-env-token"),
            ("OPENAI_API_VERSION", "2024-10-21"),
        ],
        "ok",
    );
    run(
        &[
            ("AZURE_OPENAI_ENDPOINT", &uri),
            ("AZURE_OPENAI_API_KEY", KEY),
        ],
        "ok",
    );
    run(
        &[("AZURE_OPENAI_ENDPOINT", &uri)],
        "error: Azure OpenAI is not configured: set AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN \
         (or pass a key, a token or a token provider to a constructor)",
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer entra-env-token"
    );
    assert!(requests[0].headers.get("api-key").is_none());
    assert_eq!(
        requests[0].url.path(),
        "/openai/deployments/dep/chat/completions"
    );
    assert_eq!(requests[0].url.query(), Some("api-version=2024-10-21"));
    assert_eq!(requests[1].headers["api-key"], KEY);
    assert_eq!(requests[1].url.path(), "/openai/v1/chat/completions");
}

/// Azure's Chat Completions stream starts with a chunk of prompt filter
/// results and no choices, and carries filter results on its chunks: the
/// turn is read as OpenAI's.
#[tokio::test]
async fn an_azure_chat_stream_with_filter_results_gives_its_turn() {
    let chunk = |v: Value| format!("data: {v}\n\n");
    let filters = json!({"hate": {"filtered": false, "severity": "safe"}});
    let sse = chunk(
        json!({"choices": [], "created": 0, "id": "", "model": "", "object": "",
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": filters}]}),
    ) + &chunk(
        json!({"id": "chatcmpl-1", "model": "gpt-4o", "object": "chat.completion.chunk", "created": 1,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": null,
                         "content_filter_results": filters}]}),
    ) + &chunk(
        json!({"id": "chatcmpl-1", "model": "gpt-4o", "object": "chat.completion.chunk", "created": 1,
            "choices": [{"index": 0, "delta": {"content": "lo!"}, "finish_reason": "stop",
                         "content_filter_results": {}}]}),
    ) + &chunk(
        json!({"id": "chatcmpl-1", "model": "gpt-4o", "object": "chat.completion.chunk", "created": 1,
            "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}),
    ) + "data: [DONE]\n\n";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/gpt-4o/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        )
        .mount(&server)
        .await;
    let llm = AzureOpenAiLlm::new(server.uri(), KEY).with_api_version("2024-10-21");
    let history = hi();
    let options = LlmOptions::new("gpt-4o");
    let events: Vec<_> = llm.stream("s", &history, &[], &options).collect().await;
    let Some(Ok(StreamEvent::Done(turn))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(turn.text, "Hello!");
    assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (9, 2));
    assert_eq!(turn.response_id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(turn.response_model.as_deref(), Some("gpt-4o"));
    let sent = body_of(&server, 0).await;
    assert_eq!(sent["stream_options"]["include_usage"], true);
}
