//! [`Retry`]: a layer over any [`HttpTransport`] that tries a request
//! again, by a [`RetryPolicy`], when the answer is worth another try: a
//! connection that failed, a timeout, a rate limit, an overload.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;
use kesoku_core::Backoff;

use crate::future::LlmFuture;
use crate::http::{HttpRequest, HttpResponse, HttpTransport, TransportError};

/// When a request is tried again, and how long to wait first.
///
/// The wait is the server's `retry-after` when it gave one, else an
/// exponential [`Backoff`] with full jitter; both capped at
/// the longest wait ([`with_backoff`](Self::with_backoff)). A server that asks for longer than
/// that gets its error back at once.
///
/// ```
/// use std::time::Duration;
/// use kesoku_llm::{ClaudeLlm, RetryPolicy};
///
/// let policy = RetryPolicy::default()
///     .with_max_retries(2)
///     .with_backoff(Duration::from_millis(100), Duration::from_secs(5))
///     .with_statuses([429, 503]);
/// assert!(policy.retries_status(503) && !policy.retries_status(500));
/// let claude = ClaudeLlm::new("key").with_retry_policy(policy);
/// # let _ = claude;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    statuses: Vec<u16>,
}

/// Statuses worth another try: rate limits, overload and gateway trouble.
const RETRYABLE: [u16; 6] = [429, 500, 502, 503, 504, 529];

impl Default for RetryPolicy {
    /// Four retries, from 500 ms doubling up to 60 s, on 429, 500, 502,
    /// 503, 504 and 529 (Anthropic's overload), and on failed connections
    /// and timeouts.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            statuses: RETRYABLE.to_vec(),
        }
    }
}

impl RetryPolicy {
    /// No retries: every request is sent once.
    #[must_use]
    pub fn none() -> Self {
        RetryPolicy::default().with_max_retries(0)
    }

    /// At most `retries` tries after the first.
    #[must_use]
    pub fn with_max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The first backoff (it doubles each retry) and the longest wait.
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The statuses worth another try (failed connections and timeouts
    /// always are).
    #[must_use]
    pub fn with_statuses(mut self, statuses: impl IntoIterator<Item = u16>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// Tries after the first.
    #[must_use]
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Whether an answer with `status` is tried again.
    #[must_use]
    pub fn retries_status(&self, status: u16) -> bool {
        self.statuses.contains(&status)
    }

    /// How long to wait before try `attempt + 1`: `retry_after` when the
    /// server gave one, else exponential backoff with full jitter; both
    /// capped at the longest wait.
    #[must_use]
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_backoff);
        }
        // `attempt` counts tries (the first retry follows try 1), the
        // backoff its delays from 0. A fresh one per call (this takes
        // `&self`): the delay depends on `attempt` alone.
        Backoff::new(self.initial_backoff, self.max_backoff).delay(attempt.saturating_sub(1))
    }
}

/// A transport that tries again, by its [`RetryPolicy`], what is worth
/// trying again. The backends put one over their transport; it is public
/// so a transport of one's own can be used the same way elsewhere.
///
/// ```
/// use kesoku_llm::{Retry, RetryPolicy, ReqwestTransport, HttpOptions};
///
/// let transport = Retry::new(ReqwestTransport::new(&HttpOptions::default()), RetryPolicy::default());
/// # let _ = transport;
/// ```
#[derive(Debug, Clone)]
pub struct Retry<T> {
    inner: T,
    policy: RetryPolicy,
}

impl<T: HttpTransport> Retry<T> {
    /// `inner`, tried again by `policy`.
    pub fn new(inner: T, policy: RetryPolicy) -> Self {
        Retry { inner, policy }
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The transport under the layer.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Sends until an answer is not worth retrying, and says how many
    /// tries were made (for errors that report it).
    pub async fn send_counting(
        &self,
        request: HttpRequest,
    ) -> (Result<HttpResponse, TransportError>, u32) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt > self.policy.max_retries;
            let response = match self.inner.send(request.clone()).await {
                Ok(r) => r,
                Err(e) if !last && e.is_transient() => {
                    tracing::warn!(url = request.path(), attempt, error = %e, "transport error, retrying");
                    tokio::time::sleep(self.policy.backoff(attempt, None)).await;
                    continue;
                }
                Err(e) => return (Err(e), attempt),
            };
            let status = response.status.as_u16();
            let asked = retry_after(&response.headers);
            // A server that asks for longer than we may wait gets its
            // error back now, rather than a retry before it is ready.
            let too_long = asked.is_some_and(|d| d > self.policy.max_backoff);
            if self.policy.retries_status(status) && !last && !too_long {
                let wait = self.policy.backoff(attempt, asked);
                tracing::warn!(
                    url = request.path(),
                    attempt,
                    status,
                    ?wait,
                    "retryable status, retrying"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            return (Ok(response), attempt);
        }
    }
}

impl<T: HttpTransport> HttpTransport for Retry<T> {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(async move { self.send_counting(request).await.0 })
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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
        let policy =
            RetryPolicy::default().with_backoff(Duration::from_millis(100), Duration::from_secs(1));
        for attempt in 1..10 {
            let d = policy.backoff(attempt, None);
            let ceiling =
                Duration::from_millis(100 * (1 << (attempt - 1))).min(Duration::from_secs(1));
            assert!(d <= ceiling, "attempt {attempt}: {d:?} > {ceiling:?}");
        }
        assert_eq!(
            policy.backoff(1, Some(Duration::from_secs(5))),
            Duration::from_secs(1)
        );
        assert_eq!(
            policy.backoff(1, Some(Duration::from_millis(5))),
            Duration::from_millis(5)
        );
    }
}
