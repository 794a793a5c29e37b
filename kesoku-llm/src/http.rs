//! The seam between a backend and the network: [`HttpTransport`] sends one
//! [`HttpRequest`] and returns the [`HttpResponse`] as soon as its head is
//! in, its body still streaming. The backends speak HTTP only through it,
//! so a user can put anything there: another client, a proxy, a recorder,
//! a replay of a recorded session, or a test double.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use http::{HeaderMap, Method, StatusCode};

use crate::future::LlmFuture;

/// Any error, as a transport's own client reports it; shared, so errors
/// that hold one can be cloned.
pub type BoxError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A response body as it comes, chunk by chunk.
pub type HttpBody = BoxStream<'static, Result<Bytes, TransportError>>;

/// Sends HTTP requests for a backend: the default is [`ReqwestTransport`](crate::ReqwestTransport);
/// set another with `with_transport` on any backend.
///
/// A transport sends one request, once: retries are a layer over it
/// ([`Retry`](crate::Retry)), which the backends apply with their
/// [`RetryPolicy`](crate::RetryPolicy). It returns as soon as the status and headers are
/// in; the body is read from [`HttpResponse::body`] as it comes, which is
/// how a streamed reply reaches the caller event by event.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::{Arc, Mutex};
/// use kesoku_core::{Message, MessageType, Role};
/// use kesoku_llm::{
///     ClaudeLlm, HttpRequest, HttpResponse, HttpTransport, Llm, LlmFuture, LlmOptions,
///     TransportError,
/// };
///
/// /// Answers every request with one canned reply, and keeps the bodies sent.
/// #[derive(Default)]
/// struct Canned(Mutex<Vec<serde_json::Value>>);
///
/// impl HttpTransport for Canned {
///     fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
///         self.0.lock().unwrap().push(request.json().unwrap());
///         let reply = serde_json::json!({
///             "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
///             "content": [{"type": "text", "text": "Hello!"}],
///             "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}
///         });
///         Box::pin(async move { Ok(HttpResponse::json(200, &reply)) })
///     }
/// }
///
/// let canned = Arc::new(Canned::default());
/// let claude = ClaudeLlm::new("key").with_transport(Arc::clone(&canned));
/// let history = [Message::new("s", Role::User, MessageType::Text, "Hi")];
/// let turn = claude.complete("s", &history, &[], &LlmOptions::new("m")).await.unwrap();
/// assert_eq!(turn.text, "Hello!");
/// assert_eq!(canned.0.lock().unwrap()[0]["messages"][0]["content"][0]["text"], "Hi");
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP transport",
    note = "implement `kesoku_llm::HttpTransport` for it: one `send` from an `HttpRequest` to an `HttpResponse`"
)]
pub trait HttpTransport: Send + Sync {
    /// Sends `request` once, and returns the response's status and
    /// headers with its body unread.
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>>;
}

impl<T: HttpTransport + ?Sized> HttpTransport for Arc<T> {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        (**self).send(request)
    }
}

impl<T: HttpTransport + ?Sized> HttpTransport for Box<T> {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        (**self).send(request)
    }
}

/// One request a backend sends.
///
/// Header values that carry a key are marked sensitive, so `Debug` shows
/// them as `Sensitive`: a request can be logged without its key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpRequest {
    /// The method (the backends POST).
    pub method: Method,
    /// The whole address.
    pub url: String,
    /// The headers, `content-type` and the key included.
    pub headers: HeaderMap,
    /// The JSON body.
    pub body: Bytes,
    /// Whether the answer is read as a stream of events: a transport
    /// should then bound the silence between two pieces rather than the
    /// whole, which may rightly take minutes.
    pub streaming: bool,
}

impl HttpRequest {
    /// A POST of `body` to `url`.
    #[must_use]
    pub fn post(url: impl Into<String>, headers: HeaderMap, body: impl Into<Bytes>) -> Self {
        HttpRequest {
            method: Method::POST,
            url: url.into(),
            headers,
            body: body.into(),
            streaming: false,
        }
    }

    /// The same request, its answer read as a stream of events or not.
    #[must_use]
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The path and query of [`url`](Self::url): what names the call
    /// whatever the host.
    #[must_use]
    pub fn path(&self) -> &str {
        let after_scheme = self.url.find("://").map_or(0, |i| i + 3);
        self.url[after_scheme..]
            .find('/')
            .map_or("/", |i| &self.url[after_scheme + i..])
    }

    /// The body, parsed as JSON.
    ///
    /// # Errors
    /// If the body is not JSON (a backend's never fails).
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// A response: its status and headers, and its body as it comes.
#[non_exhaustive]
pub struct HttpResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, unread.
    pub body: HttpBody,
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl HttpResponse {
    /// A response whose body streams from `body`.
    #[must_use]
    pub fn new(status: StatusCode, headers: HeaderMap, body: HttpBody) -> Self {
        HttpResponse {
            status,
            headers,
            body,
        }
    }

    /// A response with all of its body at once.
    #[must_use]
    pub fn whole(status: StatusCode, headers: HeaderMap, body: impl Into<Bytes>) -> Self {
        let body = body.into();
        HttpResponse::new(
            status,
            headers,
            futures_util::stream::once(async move { Ok(body) }).boxed(),
        )
    }

    /// A JSON response with this status (an invalid status is a 500).
    #[must_use]
    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        HttpResponse::whole(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            headers,
            value.to_string(),
        )
    }

    /// Whether the body is JSON, by its `content-type`.
    #[must_use]
    pub fn is_json(&self) -> bool {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"))
    }

    /// Reads the whole body.
    ///
    /// # Errors
    /// The first error the body's stream gives.
    pub async fn bytes(mut self) -> Result<Bytes, TransportError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.body.next().await {
            all.extend_from_slice(&chunk?);
        }
        Ok(all.into())
    }
}

/// Why a transport could not send a request or read its answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No connection could be made: worth another try.
    #[error("cannot connect")]
    Connect(#[source] BoxError),
    /// No answer in time: worth another try.
    #[error("timed out")]
    Timeout(#[source] BoxError),
    /// The server redirected to another origin (scheme, host or port),
    /// where the key must not go: not followed.
    #[error("a redirect to another origin, {location}, was not followed")]
    CrossOriginRedirect {
        /// The origin it led to.
        location: String,
    },
    /// A replayed session has no answer for this request (the `testing`
    /// feature's `ReplayTransport`; only with that feature, as nothing
    /// else makes one).
    #[cfg(feature = "testing")]
    #[error("{0}")]
    Replay(String),
    /// Anything else the client reported (its text and its sources are
    /// the client's error's own).
    #[error(transparent)]
    Other(BoxError),
}

/// Two errors are equal when they are of one kind and say the same.
impl PartialEq for TransportError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for TransportError {}

impl TransportError {
    /// Whether another try may succeed: a failed connection or a timeout.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            TransportError::Connect(_) | TransportError::Timeout(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_what_follows_the_host() {
        let at = |url: &str| {
            HttpRequest::post(url, HeaderMap::new(), "")
                .path()
                .to_owned()
        };
        assert_eq!(at("https://api.anthropic.com/v1/messages"), "/v1/messages");
        assert_eq!(
            at("http://127.0.0.1:9/v1beta/models/m:generateContent?alt=sse"),
            "/v1beta/models/m:generateContent?alt=sse"
        );
        assert_eq!(at("http://host"), "/");
    }

    #[test]
    fn a_key_header_is_not_shown() {
        let mut headers = HeaderMap::new();
        let mut key = http::HeaderValue::from_static("sk-secret");
        key.set_sensitive(true);
        headers.insert("x-api-key", key);
        let request = HttpRequest::post("http://h/p", headers, "{}");
        assert!(!format!("{request:?}").contains("sk-secret"));
    }
}
