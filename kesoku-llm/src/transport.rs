//! [`Transport`]: how every backend reaches its provider. Where it is and
//! its key; one pooled reqwest client over rustls; timeouts; bounded
//! retries with exponential backoff and jitter that honour `retry-after`;
//! and typed errors that name the provider's error.
//!
//! A streamed call, [`Transport::post_stream`], shares the retry loop with
//! [`Transport::post`] up to the first byte.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use crate::error::LlmError;
use crate::key::ApiKey;

/// Statuses worth another try: rate limits, overload and gateway trouble.
const RETRYABLE: [u16; 6] = [429, 500, 502, 503, 504, 529];

/// What a request for a stream got.
pub(crate) enum Streamed {
    /// A stream, its body unread.
    Events(reqwest::Response),
    /// A whole answer, from a server that does not stream.
    Whole(Value),
}

/// Timeouts and the retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// Time to open a connection.
    pub connect_timeout: Duration,
    /// Time for a whole request, body included; for a streamed reply,
    /// which may rightly take longer, the longest silence between two
    /// pieces of it (see `call_timeout` for a limit on the whole).
    pub request_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; it doubles each retry.
    pub initial_backoff: Duration,
    /// The longest wait between attempts. A `retry-after` longer than this
    /// is not waited for: the error is returned.
    pub max_backoff: Duration,
    /// The longest one model call may take, from its start to the last
    /// event of its reply, retries and their waits included; past it the
    /// call fails with [`LlmError::CallTimeout`]. `None` (the default) sets
    /// no limit: then a streamed reply whose server keeps sending (if only
    /// keep-alive comments) runs as long as it does.
    pub call_timeout: Option<Duration>,
    /// The most bytes one server-sent event of a streamed reply may hold
    /// while it is read; past it the call fails with
    /// [`LlmError::EventTooLarge`]. 64 MiB by default: Gemini sends each
    /// part whole, a generated image included.
    pub max_event_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            call_timeout: None,
            max_event_bytes: 64 << 20,
        }
    }
}

/// A provider's address, key and HTTP client.
#[derive(Debug)]
pub(crate) struct Transport {
    provider: &'static str,
    api_key: Option<ApiKey>,
    base_url: String,
    options: HttpOptions,
    /// Built on first use and reused, so connections are pooled.
    client: OnceLock<Result<reqwest::Client, LlmError>>,
    /// For streams: no limit on the whole, one on each silence.
    stream_client: OnceLock<Result<reqwest::Client, LlmError>>,
}

impl Transport {
    pub(crate) fn new(provider: &'static str, api_key: Option<ApiKey>, base_url: &str) -> Self {
        let mut t = Transport {
            provider,
            api_key,
            base_url: String::new(),
            options: HttpOptions::default(),
            client: OnceLock::new(),
            stream_client: OnceLock::new(),
        };
        t.set_base_url(base_url);
        t
    }

    /// The key from the first set variable of `key_vars`, and the base URL
    /// from `url_var` when it is set, as the official SDKs read them.
    pub(crate) fn from_env(
        provider: &'static str,
        key_vars: &[&str],
        url_var: &str,
        default_url: &str,
    ) -> Result<Self, LlmError> {
        let key = ApiKey::from_env(key_vars).ok_or_else(|| LlmError::Config {
            provider,
            message: format!(
                "set {} (or pass the key to the builder)",
                key_vars.join(" or ")
            ),
        })?;
        let mut t = Transport::new(provider, Some(key), default_url);
        if let Ok(url) = std::env::var(url_var)
            && !url.trim().is_empty()
        {
            t.set_base_url(&url);
        }
        Ok(t)
    }

    pub(crate) fn set_base_url(&mut self, url: &str) {
        url.trim()
            .trim_end_matches('/')
            .clone_into(&mut self.base_url);
    }

    pub(crate) fn set_http_options(&mut self, options: HttpOptions) {
        self.options = options;
        self.client = OnceLock::new();
        self.stream_client = OnceLock::new();
    }

    pub(crate) fn options(&self) -> &HttpOptions {
        &self.options
    }

    pub(crate) fn clear_key(&mut self) {
        self.api_key = None;
    }

    /// The key, for the request header and nothing else.
    pub(crate) fn key(&self) -> Option<&str> {
        self.api_key
            .as_ref()
            .map(ApiKey::expose)
            .filter(|k| !k.is_empty())
    }

    fn client(&self, stream: bool) -> Result<&reqwest::Client, LlmError> {
        let cell = if stream {
            &self.stream_client
        } else {
            &self.client
        };
        cell.get_or_init(|| {
            // reqwest is built without a bundled crypto provider; install
            // ring once (an error only means one is installed already).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let builder = reqwest::Client::builder()
                .connect_timeout(self.options.connect_timeout)
                .redirect(reqwest::redirect::Policy::custom(same_origin_only));
            let builder = if stream {
                builder.read_timeout(self.options.request_timeout)
            } else {
                builder.timeout(self.options.request_timeout)
            };
            builder.build().map_err(|e| LlmError::Config {
                provider: self.provider,
                message: format!("cannot build the HTTP client: {e}"),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// POSTs `body` as JSON to `base_url + path` and returns the JSON
    /// answer, retrying what is worth retrying.
    pub(crate) async fn post(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Value, LlmError> {
        let (response, attempt) = self.send(path, headers, body, false).await?;
        self.read_json(response, attempt).await
    }

    /// POSTs `body` for a streamed answer. A success is returned with its
    /// body unread, to be read as events; or, from a compatible server that
    /// ignored the request for a stream and answered JSON, read whole.
    /// Retries happen only before that: once the first byte of a stream is
    /// read, a failure is the caller's to report.
    pub(crate) async fn post_stream(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Streamed, LlmError> {
        let (response, attempt) = self.send(path, headers, body, true).await?;
        let status = response.status().as_u16();
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        if (200..300).contains(&status) && !json {
            return Ok(Streamed::Events(response));
        }
        self.read_json(response, attempt).await.map(Streamed::Whole)
    }

    /// Reads an answer's JSON body: a provider error for a failed status,
    /// else the JSON, or an error quoting what came instead.
    async fn read_json(
        &self,
        response: reqwest::Response,
        attempt: u32,
    ) -> Result<Value, LlmError> {
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| LlmError::Malformed {
            provider: self.provider,
            status,
            message: format!("the body was cut off or unreadable: {}", e.without_url()),
        })?;
        if !(200..300).contains(&status) {
            return Err(api_error(
                self.provider,
                status,
                &bytes,
                attempt,
                self.key(),
            ));
        }
        serde_json::from_slice(&bytes).map_err(|e| LlmError::Malformed {
            provider: self.provider,
            status,
            message: format!(
                "{} JSON: {e}; the body starts with {}",
                if e.is_eof() { "truncated" } else { "malformed" },
                preview(&bytes, self.key())
            ),
        })
    }

    /// Sends until an answer is not worth retrying; returns it, unread,
    /// with the number of attempts.
    async fn send(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
        stream: bool,
    ) -> Result<(reqwest::Response, u32), LlmError> {
        let client = self.client(stream)?;
        let url = format!("{}{path}", self.base_url);
        let mut header_map = HeaderMap::new();
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|_| LlmError::Config {
                provider: self.provider,
                // Never echo the value: it may be a key.
                message: format!("the `{name}` header value has characters HTTP does not allow"),
            })?;
            header_map.insert(HeaderName::from_static(name), value);
        }
        // Shared by the retries, not copied.
        let body = bytes::Bytes::from(body);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = client
                .post(&url)
                .headers(header_map.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            let last = attempt > self.options.max_retries;
            let response = match sent {
                Ok(r) => r,
                Err(e) if !last && (e.is_connect() || e.is_timeout()) => {
                    tracing::warn!(provider = self.provider, attempt, error = %e, "transport error, retrying");
                    tokio::time::sleep(self.backoff(attempt, None)).await;
                    continue;
                }
                Err(e) => {
                    if let Some(location) = cross_origin(&e) {
                        return Err(LlmError::CrossOriginRedirect {
                            provider: self.provider,
                            url,
                            location,
                        });
                    }
                    return Err(LlmError::Transport {
                        provider: self.provider,
                        url,
                        message: e.without_url().to_string(),
                        attempts: attempt,
                    });
                }
            };
            let status = response.status().as_u16();
            let asked = retry_after(response.headers());
            // A server that asks for longer than we may wait gets its error
            // back now, rather than a retry before it is ready.
            let too_long = asked.is_some_and(|d| d > self.options.max_backoff);
            if RETRYABLE.contains(&status) && !last && !too_long {
                let wait = self.backoff(attempt, asked);
                tracing::warn!(
                    provider = self.provider,
                    attempt,
                    status,
                    ?wait,
                    "retryable status, retrying"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            return Ok((response, attempt));
        }
    }

    /// `retry-after` when the server gave one, else exponential backoff
    /// with full jitter; both capped at `max_backoff`.
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let cap = self.options.max_backoff;
        if let Some(wait) = retry_after {
            return wait.min(cap);
        }
        let exp = self
            .options
            .initial_backoff
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(cap);
        exp.mul_f64(fastrand::f64())
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
/// or port): reqwest would follow it dropping only `Authorization` and
/// cookies, so `x-api-key` and `x-goog-api-key` would go to the other host.
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

/// `retry-after` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = text.parse::<f64>() {
        // try_: a huge value from a broken proxy must not panic.
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

/// Reads the provider's error body: Anthropic `{"error": {"type",
/// "message"}}`, OpenAI `{"error": {"type", "code", "message"}}`, Gemini
/// `{"error": {"status", "message"}}`. Any copy of `key` in it is
/// redacted: providers quote the key they reject, and the error ends up in
/// stored messages and logs.
fn api_error(
    provider: &'static str,
    status: u16,
    body: &[u8],
    attempts: u32,
    key: Option<&str>,
) -> LlmError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let field = |k: &str| {
        error
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let error_type = field("type")
        .or_else(|| field("status"))
        .or_else(|| field("code"));
    let message = field("message").unwrap_or_else(|| {
        if body.is_empty() {
            "(empty body)".to_owned()
        } else {
            preview(body, key)
        }
    });
    LlmError::Api {
        provider,
        status,
        error_type: error_type.map(|t| redact(t, key)),
        message: redact(message, key),
        attempts,
    }
}

/// `text` with every occurrence of `key` replaced by `[redacted]`.
fn redact(text: String, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "[redacted]"),
        _ => text,
    }
}

/// The first 200 characters of a body, quoted, `key` redacted (before
/// the cut, so no part of it is left).
fn preview(body: &[u8], key: Option<&str>) -> String {
    let text = redact(String::from_utf8_lossy(body).into_owned(), key);
    let head: String = text.chars().take(200).collect();
    if head.len() < text.len() {
        format!("{head:?}...")
    } else {
        format!("{head:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("0.25"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        let d = retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(27) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("99999999999999999999"),
        );
        assert_eq!(
            retry_after(&h),
            None,
            "too large to be a duration, and no panic"
        );
        h.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        let mut http = Transport::new("test", None, "http://127.0.0.1:9");
        http.set_http_options(HttpOptions {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..HttpOptions::default()
        });
        for attempt in 1..10 {
            let d = http.backoff(attempt, None);
            let ceiling =
                Duration::from_millis(100 * (1 << (attempt - 1))).min(Duration::from_secs(1));
            assert!(d <= ceiling, "attempt {attempt}: {d:?} > {ceiling:?}");
        }
        assert_eq!(
            http.backoff(1, Some(Duration::from_secs(5))),
            Duration::from_secs(1)
        );
        assert_eq!(
            http.backoff(1, Some(Duration::from_millis(5))),
            Duration::from_millis(5)
        );
    }

    #[test]
    fn error_bodies_of_every_provider_are_read() {
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            api_error("Claude", 529, anthropic, 5, None).to_string(),
            "Claude returned HTTP 529 (overloaded_error): Overloaded (after 5 attempts)"
        );
        let gemini = br#"{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(
            api_error("Gemini", 400, gemini, 1, None).to_string(),
            "Gemini returned HTTP 400 (INVALID_ARGUMENT): Invalid JSON payload"
        );
        assert_eq!(
            api_error("OpenAI", 502, b"<html>bad gateway</html>", 1, None).to_string(),
            "OpenAI returned HTTP 502: \"<html>bad gateway</html>\""
        );
    }

    #[test]
    fn a_key_echoed_in_an_error_body_is_redacted() {
        let key = Some("sk-ant-SECRET-123");
        let json = br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-SECRET-123 (sk-ant-SECRET-123)"}}"#;
        assert_eq!(
            api_error("Claude", 401, json, 1, key).to_string(),
            "Claude returned HTTP 401 (authentication_error): invalid x-api-key [redacted] ([redacted])"
        );
        // A body that is not JSON is quoted as it came: redacted too.
        let text = api_error("OpenAI", 401, b"bad key sk-ant-SECRET-123", 1, key).to_string();
        assert_eq!(text, "OpenAI returned HTTP 401: \"bad key [redacted]\"");
        // Redacted before the preview is cut: no prefix of it is left.
        let long = format!("{}sk-ant-SECRET-123", "x".repeat(190));
        let cut = preview(long.as_bytes(), key);
        assert!(!cut.contains("sk-ant"), "{cut}");
        // No key (a local server), or an empty one, changes nothing.
        assert_eq!(redact("a b".to_owned(), None), "a b");
        assert_eq!(redact("a b".to_owned(), Some("")), "a b");
    }
}
