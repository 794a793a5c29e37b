//! [`ReqwestTransport`]: the default [`HttpTransport`], one pooled reqwest
//! client over rustls, which follows redirects only within the origin
//! called.

use std::sync::OnceLock;

use futures_util::StreamExt as _;

use crate::future::LlmFuture;
use crate::http::{HttpRequest, HttpResponse, HttpTransport, TransportError};
use crate::http_options::HttpOptions;

/// The default transport: reqwest over rustls (ring), connections pooled,
/// with the timeouts of [`HttpOptions`]: `connect_timeout` to connect,
/// `request_timeout` for a whole answer, or, for an answer read as a
/// stream, for each silence in it.
///
/// A redirect is followed only within the origin called: reqwest would
/// follow one to another host dropping only `Authorization` and cookies,
/// so `x-api-key` and `x-goog-api-key` would go with it.
#[derive(Debug)]
pub struct ReqwestTransport {
    options: HttpOptions,
    /// Built on first use and reused, so connections are pooled.
    client: OnceLock<Result<reqwest::Client, String>>,
    /// For streams: no limit on the whole, one on each silence.
    stream_client: OnceLock<Result<reqwest::Client, String>>,
}

impl Default for ReqwestTransport {
    fn default() -> Self {
        ReqwestTransport::new(&HttpOptions::default())
    }
}

impl ReqwestTransport {
    /// A transport with the timeouts of `options`.
    #[must_use]
    pub fn new(options: &HttpOptions) -> Self {
        ReqwestTransport {
            options: *options,
            client: OnceLock::new(),
            stream_client: OnceLock::new(),
        }
    }

    fn client(&self, stream: bool) -> Result<&reqwest::Client, TransportError> {
        let cell = if stream {
            &self.stream_client
        } else {
            &self.client
        };
        cell.get_or_init(|| {
            // reqwest is built without a bundled crypto provider.
            install_crypto_provider();
            let builder = reqwest::Client::builder()
                .connect_timeout(self.options.connect_timeout)
                .redirect(reqwest::redirect::Policy::custom(same_origin_only));
            let builder = if stream {
                builder.read_timeout(self.options.request_timeout)
            } else {
                builder.timeout(self.options.request_timeout)
            };
            builder
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(|e| TransportError::Other(std::sync::Arc::new(std::io::Error::other(e.clone()))))
    }

    async fn send_now(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let client = self.client(request.streaming)?;
        let response = client
            .request(request.method, &request.url)
            .headers(request.headers)
            .body(request.body)
            .send()
            .await
            .map_err(error)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes_stream().map(|c| c.map_err(error)).boxed();
        Ok(HttpResponse::new(status, headers, body))
    }
}

impl HttpTransport for ReqwestTransport {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(self.send_now(request))
    }
}

/// reqwest's error as ours, without the URL (the caller names it), its
/// kind kept for the retry layer and its source kept whole.
fn error(e: reqwest::Error) -> TransportError {
    if let Some(location) = cross_origin(&e) {
        return TransportError::CrossOriginRedirect { location };
    }
    let transient_connect = e.is_connect();
    let timeout = e.is_timeout();
    let e = std::sync::Arc::new(e.without_url());
    if transient_connect {
        TransportError::Connect(e)
    } else if timeout {
        TransportError::Timeout(e)
    } else {
        TransportError::Other(e)
    }
}

/// A redirect to another origin than the one called, by its origin.
#[derive(Debug)]
struct CrossOrigin(String);

impl std::fmt::Display for CrossOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a redirect to another origin, {}, not followed", self.0)
    }
}

impl std::error::Error for CrossOrigin {}

/// Follows redirects within the origin called (as many as reqwest's
/// default policy does), and refuses one to another origin (scheme, host
/// or port).
fn same_origin_only(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    let called = attempt.previous().first().map(reqwest::Url::origin);
    if called.is_some_and(|o| o != attempt.url().origin()) {
        let to = attempt.url().origin().ascii_serialization();
        return attempt.error(CrossOrigin(to));
    }
    reqwest::redirect::Policy::default().redirect(attempt)
}

/// The origin a refused redirect led to, if that is what `e` is.
fn cross_origin(e: &reqwest::Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(CrossOrigin(to)) = s.downcast_ref() {
            return Some(to.clone());
        }
        source = s.source();
    }
    None
}

/// Installs rustls's ring crypto provider as the process's default, unless
/// one is installed already; whether this call installed it.
///
/// kesoku builds reqwest without a provider of its own
/// (`rustls-no-provider`), so that a program links one crypto library,
/// ring, not two. Cargo unifies features: every reqwest 0.13 client in the
/// program, another crate's too (an OTLP exporter's), is then built
/// without one, and panics with "No rustls crypto provider is configured"
/// unless one is installed first. kesoku's own clients call this as they
/// are built; a program that builds another client before them (an
/// OpenTelemetry exporter, first thing in `main`) calls it first.
///
/// ```
/// kesoku_llm::install_crypto_provider();
/// assert!(rustls::crypto::CryptoProvider::get_default().is_some());
/// // A second call finds it there.
/// assert!(!kesoku_llm::install_crypto_provider());
/// ```
pub fn install_crypto_provider() -> bool {
    rustls::crypto::CryptoProvider::get_default().is_none()
        && rustls::crypto::ring::default_provider()
            .install_default()
            .is_ok()
}
