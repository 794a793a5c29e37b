//! A backend over `TowerTransport`: a hyper client over loopback answers
//! through tower's layers; a streamed reply arrives chunk by chunk; a tower
//! timeout is a timeout the retry layer tries again; a refused connection
//! is a connection error; concurrency and rate limits hold.

#![cfg(feature = "tower")]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{Full, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{
    ClaudeLlm, Llm, LlmError, LlmOptions, RetryPolicy, StreamEvent, TowerTransport, TransportError,
};
use tower::ServiceBuilder;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};
mod common;
use common::{fixture, fixture_text};

fn hi() -> [Message; 1] {
    [Message::new("s", Role::User, MessageType::Text, "Hi")]
}

/// Little waiting between tries, so the tests are quick.
fn quick_retries(retries: u32) -> RetryPolicy {
    RetryPolicy::default()
        .with_max_retries(retries)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
}

/// Claude's one-shot answer, as a service's response.
fn text_reply() -> http::Response<Full<Bytes>> {
    let body = fixture("anthropic/text.json").to_string();
    http::Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// A hyper client (the one reqwest is built on) as a tower service over
/// `http::Request<Bytes>`, with a layer that marks each request.
fn hyper_stack() -> impl tower::Service<
    http::Request<Bytes>,
    Response = http::Response<hyper::body::Incoming>,
    Error = hyper_util::client::legacy::Error,
    Future: Send,
> + Clone
+ Send
+ 'static {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    ServiceBuilder::new()
        .map_request(|mut request: http::Request<Bytes>| {
            request
                .headers_mut()
                .insert("x-through", http::HeaderValue::from_static("tower"));
            request.map(Full::new)
        })
        .service(client)
}

#[tokio::test]
async fn a_backend_answers_through_a_hyper_client_and_its_layers_over_loopback() {
    let server = MockServer::start().await;
    // Only a request that went through the layer, with its key, is answered.
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-through", "tower"))
        .and(header("x-api-key", "sk-ant-key"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture("anthropic/text.json")))
        .expect(1)
        .mount(&server)
        .await;
    let claude = ClaudeLlm::new("sk-ant-key")
        .with_base_url(server.uri())
        .with_retry_policy(RetryPolicy::none())
        .with_transport(TowerTransport::new(hyper_stack()));
    let turn = claude
        .complete("s", &hi(), &[], &LlmOptions::new("m"))
        .await
        .unwrap();
    assert!(!turn.text.is_empty());
    let expected = fixture("anthropic/text.json");
    assert_eq!(turn.text, expected["content"][0]["text"].as_str().unwrap());
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error_tried_again() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let claude = ClaudeLlm::new("k")
        .with_base_url(format!("http://{address}"))
        .with_retry_policy(quick_retries(2))
        .with_transport(TowerTransport::new(hyper_stack()));
    let err = claude
        .complete("s", &hi(), &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    let LlmError::Transport {
        source, attempts, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(matches!(source, TransportError::Connect(_)), "{source:?}");
    assert_eq!(*attempts, 3, "the first try and two retries");
}

/// A Claude stream cut in two: the first part ends with the text "Hello".
fn stream_halves() -> (String, String) {
    let whole = fixture_text("anthropic/stream/cached.sse").replace("Hello again!", "Hello");
    let cut = whole.find("event: content_block_stop").unwrap();
    let (first, second) = whole.split_at(cut);
    let second = format!(
        "event: content_block_delta\ndata: {}\n\n{second}",
        r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " again!"}}"#
    );
    (first.to_owned(), second)
}

#[tokio::test]
async fn a_streamed_reply_arrives_chunk_by_chunk() {
    let (first, second) = stream_halves();
    let (chunks, receiver) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let receiver = Arc::new(Mutex::new(Some(receiver)));
    let asked_stream = Arc::new(Mutex::new(None));
    let asked = Arc::clone(&asked_stream);
    let service = tower::service_fn(move |request: http::Request<Bytes>| {
        let body: serde_json::Value = serde_json::from_slice(request.body()).unwrap();
        *asked.lock().unwrap() = Some(body["stream"].clone());
        let receiver = receiver.lock().unwrap().take().expect("one request");
        let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let chunk = receiver.recv().await?;
            Some((Ok::<_, Infallible>(http_body::Frame::data(chunk)), receiver))
        });
        let response = http::Response::builder()
            .header("content-type", "text/event-stream")
            .body(StreamBody::new(frames))
            .unwrap();
        async move { Ok::<_, Infallible>(response) }
    });
    let claude = ClaudeLlm::new("k").with_transport(TowerTransport::new(service));
    let history = hi();
    let options = LlmOptions::new("m");
    let mut events = claude.stream("s", &history, &[], &options);

    chunks.send(Bytes::from(first)).unwrap();
    // The first text comes while the rest of the body is still unsent.
    let text = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.next().await {
                Some(Ok(StreamEvent::Text(text))) => return text,
                Some(Ok(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    })
    .await
    .expect("the first chunk's text, before the second chunk is sent");
    assert_eq!(text, "Hello");
    assert_eq!(*asked_stream.lock().unwrap(), Some(serde_json::json!(true)));

    chunks.send(Bytes::from(second)).unwrap();
    drop(chunks);
    let rest: Vec<StreamEvent> = events.map(Result::unwrap).collect().await;
    assert!(
        rest.contains(&StreamEvent::Text(" again!".into())),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|e| matches!(e, StreamEvent::Stop(_))),
        "{rest:?}"
    );
}

/// A service whose first `slow` calls never answer in time; it counts
/// every call.
fn slow_at_first(
    slow: usize,
    calls: &Arc<AtomicUsize>,
) -> impl tower::Service<
    http::Request<Bytes>,
    Response = http::Response<Full<Bytes>>,
    Error = Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    let calls = Arc::clone(calls);
    tower::service_fn(move |_: http::Request<Bytes>| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if call < slow {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(text_reply())
        }
    })
}

#[tokio::test]
async fn a_tower_timeout_is_a_timeout_the_retry_layer_tries_again() {
    let calls = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(100))
        .service(slow_at_first(2, &calls));
    let claude = ClaudeLlm::new("k")
        .with_retry_policy(quick_retries(4))
        .with_transport(TowerTransport::new(service));
    let turn = claude
        .complete("s", &hi(), &[], &LlmOptions::new("m"))
        .await
        .unwrap();
    assert!(!turn.text.is_empty());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "two timeouts, then the answer"
    );

    // Without retries, the timeout is the error, as a timeout.
    let calls = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(100))
        .service(slow_at_first(1, &calls));
    let claude = ClaudeLlm::new("k")
        .with_retry_policy(RetryPolicy::none())
        .with_transport(TowerTransport::new(service));
    let err = claude
        .complete("s", &hi(), &[], &LlmOptions::new("m"))
        .await
        .unwrap_err();
    let LlmError::Transport { source, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(matches!(source, TransportError::Timeout(_)), "{source:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// A service that takes `delay` to answer, and keeps when each call began
/// and how many were in flight at most.
#[derive(Clone, Default)]
struct Watch {
    started: Arc<Mutex<Vec<Instant>>>,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Watch {
    fn service(
        &self,
        delay: Duration,
    ) -> impl tower::Service<
        http::Request<Bytes>,
        Response = http::Response<Full<Bytes>>,
        Error = Infallible,
        Future: Send,
    > + Clone
    + Send
    + 'static {
        let watch = self.clone();
        tower::service_fn(move |_: http::Request<Bytes>| {
            let watch = watch.clone();
            async move {
                watch.started.lock().unwrap().push(Instant::now());
                let now = watch.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                watch.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                watch.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(text_reply())
            }
        })
    }
}

/// Two calls at once on `llm`; both must succeed.
async fn two_at_once(llm: &ClaudeLlm) {
    let (history, options) = (hi(), LlmOptions::new("m"));
    let (a, b) = tokio::join!(
        llm.complete("a", &history, &[], &options),
        llm.complete("b", &history, &[], &options)
    );
    a.unwrap();
    b.unwrap();
}

#[tokio::test]
async fn a_concurrency_limit_keeps_calls_from_overlapping() {
    let watch = Watch::default();
    // Boxed, as a stack often is: a `BoxCloneService` is `Send` but not
    // `Sync`, and the transport takes it all the same.
    let service = tower::util::BoxCloneService::new(
        ServiceBuilder::new()
            .concurrency_limit(1)
            .service(watch.service(Duration::from_millis(100))),
    );
    let claude = ClaudeLlm::new("k").with_transport(TowerTransport::new(service));
    two_at_once(&claude).await;
    assert_eq!(watch.started.lock().unwrap().len(), 2);
    assert_eq!(watch.most.load(Ordering::SeqCst), 1, "one call at a time");

    // The same without the limit: the two overlap.
    let watch = Watch::default();
    let service = watch.service(Duration::from_millis(100));
    let claude = ClaudeLlm::new("k").with_transport(TowerTransport::new(service));
    two_at_once(&claude).await;
    assert_eq!(watch.most.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_rate_limit_behind_a_buffer_spaces_the_calls() {
    let watch = Watch::default();
    // A rate limit is not `Clone`: one behind a buffer is shared by every
    // clone, so it limits all the calls together.
    let service = ServiceBuilder::new()
        .buffer(8)
        .rate_limit(1, Duration::from_millis(300))
        .service(watch.service(Duration::ZERO));
    let claude = ClaudeLlm::new("k").with_transport(TowerTransport::new(service));
    two_at_once(&claude).await;
    let started = watch.started.lock().unwrap().clone();
    assert_eq!(started.len(), 2);
    let gap = started[1] - started[0];
    assert!(gap >= Duration::from_millis(250), "{gap:?}");
}
