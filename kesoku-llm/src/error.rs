//! [`LlmError`]: why a model call failed. No variant ever holds an API key.

/// Why a call to a model failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider answered with an error status.
    #[error("{provider} returned HTTP {status}{}: {message}{}", .error_type.as_ref().map(|t| format!(" ({t})")).unwrap_or_default(), attempts_note(*.attempts))]
    Api {
        /// The provider.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's error type, such as `rate_limit_error`.
        error_type: Option<String>,
        /// The provider's message.
        message: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider refused the request as longer than the model's context
    /// window: Anthropic's `prompt is too long`, OpenAI's
    /// `context_length_exceeded`, Gemini's `INVALID_ARGUMENT` on the input
    /// token count. Not retried: the same request would be refused again.
    /// The sizes are those the provider named, when it named them.
    ///
    /// ```
    /// use kesoku_llm::LlmError;
    ///
    /// let e = LlmError::ContextOverflow {
    ///     provider: "Claude",
    ///     tokens: Some(209_353),
    ///     limit: Some(200_000),
    ///     message: "prompt is too long: 209353 tokens > 200000 maximum".into(),
    /// };
    /// assert_eq!(
    ///     e.to_string(),
    ///     "Claude refused the request as longer than the model's context window \
    ///      (209353 tokens, over its limit of 200000): prompt is too long: 209353 tokens > 200000 maximum"
    /// );
    /// ```
    #[error("{provider} refused the request as longer than the model's context window{}: {message}", sizes_note(*.tokens, *.limit))]
    ContextOverflow {
        /// The provider.
        provider: &'static str,
        /// The request's size in tokens, as the provider counted it.
        tokens: Option<u64>,
        /// The model's limit in tokens.
        limit: Option<u64>,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached, or did not answer in time.
    ///
    /// The message names the provider and the URL; why is the transport's
    /// error, the [`source`](std::error::Error::source) (not repeated
    /// here, so a chain of errors says it once). Where no chain is
    /// printed, [`ErrorChain`](kesoku_core::ErrorChain) gives the whole:
    /// the agent stores a failed call's note that way.
    #[error("could not reach {provider} at {url}{}", attempts_note(*.attempts))]
    Transport {
        /// The provider.
        provider: &'static str,
        /// The URL called (never with a key in it).
        url: String,
        /// What went wrong.
        #[source]
        source: crate::http::TransportError,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The provider's answer could not be read: malformed, truncated, or
    /// not in the documented shape.
    #[error("{provider} sent a response that cannot be read (HTTP {status}): {message}")]
    Malformed {
        /// The provider.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// What is wrong, with the start of the body.
        message: String,
    },
    /// A tool's schema has a part this provider cannot represent, and the
    /// backend was built with `deny_unsupported_schemas(true)`: nothing
    /// was sent.
    #[error("{provider} cannot take the schema of tool `{tool}` at {}: {reason}", if .path.is_empty() { "the root" } else { .path.as_str() })]
    UnsupportedSchema {
        /// The provider.
        provider: &'static str,
        /// The tool whose schema it is.
        tool: String,
        /// A JSON pointer into the tool's original schema, down to the
        /// keyword; empty for the root.
        path: String,
        /// Why it cannot be represented.
        reason: String,
    },
    /// The typed answer asked for has a schema this provider's
    /// structured-output mode cannot take: nothing was sent.
    #[error("{provider} cannot take the answer type `{output}` at {}: {reason}", if .path.is_empty() { "the root" } else { .path.as_str() })]
    UnsupportedOutput {
        /// The provider.
        provider: &'static str,
        /// The answer's shape ([`OutputSchema::name`](kesoku_core::OutputSchema::name)).
        output: String,
        /// A JSON pointer into its original schema, down to the keyword;
        /// empty for the root.
        path: String,
        /// Why it cannot be represented.
        reason: String,
    },
    /// The backend is missing something it needs, such as an API key.
    #[error("{provider} is not configured: {message}")]
    Config {
        /// The provider.
        provider: &'static str,
        /// What is missing.
        message: String,
    },
    /// A streamed reply failed after it began: an error event, a dropped
    /// connection, an event that does not read, or an end before the reply
    /// was complete. Not retried (part of the reply was already given).
    #[error("{provider}'s streamed reply failed: {message}")]
    Stream {
        /// The provider.
        provider: &'static str,
        /// What happened.
        message: String,
    },
    /// A streamed reply sent an event holding more bytes than
    /// [`HttpOptions::max_event_bytes`](crate::HttpOptions::max_event_bytes).
    #[error(
        "{provider} sent a streamed event over the limit of {limit} bytes (HttpOptions::max_event_bytes)"
    )]
    EventTooLarge {
        /// The provider.
        provider: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The call took longer than
    /// [`HttpOptions::call_timeout`](crate::HttpOptions::call_timeout).
    #[error(
        "{provider}'s reply did not finish within the call's limit of {limit:?} (HttpOptions::call_timeout)"
    )]
    CallTimeout {
        /// The provider.
        provider: &'static str,
        /// The limit.
        limit: std::time::Duration,
    },
    /// The provider's address answered with a redirect to another origin
    /// (scheme, host or port), which was not followed so that the API key
    /// is not sent there. Redirects within the origin are followed.
    #[error(
        "{provider} at {url} redirected the call to another origin, {location}: not followed, so the API key is not sent there"
    )]
    CrossOriginRedirect {
        /// The provider.
        provider: &'static str,
        /// The URL called.
        url: String,
        /// The origin it redirected to.
        location: String,
    },
}

impl LlmError {
    /// A 200 response whose JSON is not in the documented shape.
    pub(crate) fn malformed(provider: &'static str, message: String) -> Self {
        LlmError::Malformed {
            provider,
            status: 200,
            message,
        }
    }
}

fn sizes_note(tokens: Option<u64>, limit: Option<u64>) -> String {
    match (tokens, limit) {
        (Some(tokens), Some(limit)) => format!(" ({tokens} tokens, over its limit of {limit})"),
        (Some(tokens), None) => format!(" ({tokens} tokens)"),
        (None, Some(limit)) => format!(" (its limit is {limit} tokens)"),
        (None, None) => String::new(),
    }
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}
