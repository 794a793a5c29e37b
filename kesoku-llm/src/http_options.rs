//! [`HttpOptions`]: timeouts, the retry policy, and the limits of one call.

use std::time::Duration;

use crate::retry::RetryPolicy;

/// Timeouts, the retry policy, and the limits of one call, as every
/// backend takes them (`with_http_options`).
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
    /// call fails with [`LlmError::CallTimeout`](crate::LlmError::CallTimeout). `None` (the default) sets
    /// no limit: then a streamed reply whose server keeps sending (if only
    /// keep-alive comments) runs as long as it does.
    pub call_timeout: Option<Duration>,
    /// The most bytes one server-sent event of a streamed reply may hold
    /// while it is read; past it the call fails with
    /// [`LlmError::EventTooLarge`](crate::LlmError::EventTooLarge). 64 MiB by default: Gemini sends each
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

impl HttpOptions {
    /// The retry policy these options set: `max_retries`, from
    /// `initial_backoff` doubling up to `max_backoff`, on the default
    /// statuses.
    #[must_use]
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::default()
            .with_max_retries(self.max_retries)
            .with_backoff(self.initial_backoff, self.max_backoff)
    }
}
