//! [`TowerTransport`]: any tower [`Service`] over `http` types as an
//! [`HttpTransport`], so tower's layers (timeouts, rate and concurrency
//! limits, tracing) apply to a backend's requests (feature `tower`).

use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use tower::{Service, ServiceExt as _};

use crate::future::LlmFuture;
use crate::http::{BoxError, HttpRequest, HttpResponse, HttpTransport, TransportError};

/// A tower [`Service`] from `http::Request<Bytes>` to `http::Response<B>`
/// as a backend's transport: put it in with `with_transport`, and every
/// layer of the service (a [`tower::timeout::TimeoutLayer`], a rate or
/// concurrency limit, `tower-http`'s tracing) applies to the backend's
/// requests, under the backend's own retries.
///
/// Each request clones the service, waits until it is ready and calls it,
/// as tower's services expect; the response's body is read chunk by chunk,
/// so a streamed reply streams through. Errors become [`TransportError`]s:
/// a tower timeout (its `Elapsed`, anywhere in the error's sources) or an
/// I/O error that timed out is [`Timeout`](TransportError::Timeout), a
/// refused connection is [`Connect`](TransportError::Connect), both tried
/// again by the backend's retry policy; anything else is
/// [`Other`](TransportError::Other). A timeout layer bounds the wait for
/// the response's head; a streamed body may rightly take longer.
///
/// A client whose body type is not `Bytes` (hyper's, say) takes a
/// `map_request` to it, such as `|r: http::Request<Bytes>| r.map(Full::new)`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use kesoku_core::{Message, MessageType, Role};
/// use kesoku_llm::{ClaudeLlm, Llm, LlmOptions, TowerTransport};
/// use tower::ServiceBuilder;
///
/// let reply = serde_json::json!({
///     "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
///     "content": [{"type": "text", "text": "Hello!"}],
///     "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}
/// });
/// // A stand-in for an HTTP client, under a timeout and a concurrency limit.
/// let service = ServiceBuilder::new()
///     .timeout(Duration::from_secs(30))
///     .concurrency_limit(4)
///     .service_fn(move |request: http::Request<Bytes>| {
///         assert_eq!(request.uri().path(), "/v1/messages");
///         let body = Full::new(Bytes::from(reply.to_string()));
///         async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
///     });
/// let claude = ClaudeLlm::new("key").with_transport(TowerTransport::new(service));
/// let history = [Message::new("s", Role::User, MessageType::Text, "Hi")];
/// let turn = claude.complete("s", &history, &[], &LlmOptions::new("m")).await.unwrap();
/// assert_eq!(turn.text, "Hello!");
/// # });
/// ```
#[derive(Debug)]
pub struct TowerTransport<S> {
    // Behind a lock so that the transport is `Sync` (as `HttpTransport`
    // must be) whatever the service: many are only `Send`
    // (`BoxCloneService`). Held only to clone it, never across a wait.
    service: Mutex<S>,
}

impl<S> TowerTransport<S> {
    /// `service` as a transport.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body_util::Empty;
    /// use kesoku_llm::{OpenAiLlm, TowerTransport};
    ///
    /// let service = tower::service_fn(|_: http::Request<Bytes>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(Empty::<Bytes>::new()))
    /// });
    /// let llm = OpenAiLlm::new("key").with_transport(TowerTransport::new(service));
    /// # let _ = llm;
    /// ```
    pub fn new(service: S) -> Self {
        TowerTransport {
            service: Mutex::new(service),
        }
    }

    /// The service back.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body_util::Empty;
    /// use kesoku_llm::TowerTransport;
    ///
    /// let service = tower::service_fn(|_: http::Request<Bytes>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(Empty::<Bytes>::new()))
    /// });
    /// let transport = TowerTransport::new(service);
    /// let service = transport.into_inner();
    /// # let _ = service;
    /// ```
    pub fn into_inner(self) -> S {
        self.service
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S, B> HttpTransport for TowerTransport<S>
where
    S: Service<http::Request<Bytes>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<tower::BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<tower::BoxError>,
{
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        // The clone is the one that is made ready and called, as tower's
        // services expect: readiness is per handle (a limit's permit).
        let service = self
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move {
            let request = to_http(request)?;
            let response = service
                .oneshot(request)
                .await
                .map_err(|e| error(e.into()))?;
            let (head, body) = response.into_parts();
            let body = body
                .into_data_stream()
                .map(|chunk| chunk.map_err(|e| error(e.into())))
                .boxed();
            Ok(HttpResponse::new(head.status, head.headers, body))
        })
    }
}

/// A request URL that `http` cannot read as a URI.
#[derive(Debug, thiserror::Error)]
#[error("the request URL is not a valid URI: {0}")]
struct InvalidUrl(#[source] http::uri::InvalidUri);

/// The request in `http`'s types.
fn to_http(request: HttpRequest) -> Result<http::Request<Bytes>, TransportError> {
    let HttpRequest {
        method,
        url,
        headers,
        body,
        streaming: _,
    } = request;
    let uri: http::Uri = url
        .parse()
        .map_err(|e| TransportError::Other(Arc::new(InvalidUrl(e))))?;
    let mut out = http::Request::new(body);
    *out.method_mut() = method;
    *out.uri_mut() = uri;
    *out.headers_mut() = headers;
    Ok(out)
}

/// The service's error as ours, its kind read from its sources so that
/// the retry layer tries again what is worth it.
fn error(e: tower::BoxError) -> TransportError {
    let e: BoxError = Arc::from(e);
    let mut source: Option<&(dyn StdError + 'static)> = Some(&*e);
    while let Some(s) = source {
        if s.is::<tower::timeout::error::Elapsed>() {
            return TransportError::Timeout(e);
        }
        let mut next = s.source();
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::TimedOut => return TransportError::Timeout(e),
                std::io::ErrorKind::ConnectionRefused => return TransportError::Connect(e),
                // An I/O error hides the error it wraps from `source`.
                _ => next = io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            }
        }
        source = next;
    }
    TransportError::Other(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped")]
    struct Wrapped(#[source] std::io::Error);

    #[test]
    fn errors_are_read_through_their_sources() {
        let elapsed: tower::BoxError = Box::new(tower::timeout::error::Elapsed::new());
        assert!(matches!(error(elapsed), TransportError::Timeout(_)));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let wrapped: tower::BoxError = Box::new(Wrapped(refused));
        assert!(matches!(error(wrapped), TransportError::Connect(_)));
        let inner: tower::BoxError = Box::new(tower::timeout::error::Elapsed::new());
        let in_io: tower::BoxError = Box::new(std::io::Error::other(inner));
        assert!(matches!(error(in_io), TransportError::Timeout(_)));
        let other: tower::BoxError = "no".into();
        assert!(matches!(error(other), TransportError::Other(_)));
    }

    #[test]
    fn an_invalid_url_is_an_error_naming_it() {
        let request = HttpRequest::post("http://bad host/", http::HeaderMap::new(), "{}");
        let err = to_http(request).unwrap_err();
        assert!(err.to_string().contains("not a valid URI"), "{err}");
    }
}
