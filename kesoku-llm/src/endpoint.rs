//! [`Endpoint`]: where a backend's provider is, its key, and the
//! [`HttpTransport`] under a [`Retry`] layer that reaches it; typed errors
//! that name the provider's error and never quote its key.
//!
//! A streamed call, [`Endpoint::post_stream`], shares the retries with
//! [`Endpoint::post`] up to the first byte.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::LlmError;
use crate::http::{HttpBody, HttpRequest, HttpResponse, HttpTransport, TransportError};
use crate::http_options::HttpOptions;
use crate::key::ApiKey;
use crate::reqwest_transport::ReqwestTransport;
use crate::retry::{Retry, RetryPolicy};

/// What a request for a stream got.
pub(crate) enum Streamed {
    /// A stream, its body unread.
    Events(HttpBody),
    /// A whole answer, from a server that does not stream.
    Whole(Value),
}

/// A provider's address, key and transport.
pub(crate) struct Endpoint {
    provider: &'static str,
    api_key: Option<ApiKey>,
    base_url: String,
    options: HttpOptions,
    http: Retry<Arc<dyn HttpTransport>>,
    /// Whether the transport is the caller's (new options then change
    /// only the retries and limits, not it).
    own_transport: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("options", &self.options)
            .field("retry", self.http.policy())
            .field("own_transport", &self.own_transport)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(crate) fn new(provider: &'static str, api_key: Option<ApiKey>, base_url: &str) -> Self {
        let options = HttpOptions::default();
        let mut e = Endpoint {
            provider,
            api_key,
            base_url: String::new(),
            http: Retry::new(
                Arc::new(ReqwestTransport::new(&options)),
                options.retry_policy(),
            ),
            options,
            own_transport: false,
        };
        e.set_base_url(base_url);
        e
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
        let mut e = Endpoint::new(provider, Some(key), default_url);
        if let Ok(url) = std::env::var(url_var)
            && !url.trim().is_empty()
        {
            e.set_base_url(&url);
        }
        Ok(e)
    }

    /// The base URL requests go to (no key is ever part of it).
    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    pub(crate) fn set_base_url(&mut self, url: &str) {
        url.trim()
            .trim_end_matches('/')
            .clone_into(&mut self.base_url);
    }

    /// New timeouts (for the default transport), retries and limits.
    pub(crate) fn set_http_options(&mut self, options: HttpOptions) {
        self.options = options;
        let inner: Arc<dyn HttpTransport> = if self.own_transport {
            Arc::clone(self.http.inner())
        } else {
            Arc::new(ReqwestTransport::new(&options))
        };
        self.http = Retry::new(inner, options.retry_policy());
    }

    pub(crate) fn set_retry_policy(&mut self, policy: RetryPolicy) {
        self.http = Retry::new(Arc::clone(self.http.inner()), policy);
    }

    pub(crate) fn set_transport(&mut self, transport: Arc<dyn HttpTransport>) {
        self.own_transport = true;
        self.http = Retry::new(transport, self.http.policy().clone());
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

    /// POSTs `body` as JSON to `base_url + path` and returns the JSON
    /// answer, retrying what is worth retrying. `secret` is the credential
    /// the headers carry (the key, or a token fetched for this request):
    /// never shown, and redacted from an error body.
    pub(crate) async fn post(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
        secret: Option<&str>,
    ) -> Result<Value, LlmError> {
        let (response, attempt) = self.send(path, headers, body, false, secret).await?;
        self.read_json(response, attempt, secret).await
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
        secret: Option<&str>,
    ) -> Result<Streamed, LlmError> {
        let (response, attempt) = self.send(path, headers, body, true, secret).await?;
        if response.status.is_success() && !response.is_json() {
            return Ok(Streamed::Events(response.body));
        }
        self.read_json(response, attempt, secret)
            .await
            .map(Streamed::Whole)
    }

    /// Reads an answer's JSON body: a provider error for a failed status,
    /// else the JSON, or an error quoting what came instead.
    async fn read_json(
        &self,
        response: HttpResponse,
        attempt: u32,
        secret: Option<&str>,
    ) -> Result<Value, LlmError> {
        let status = response.status.as_u16();
        let bytes = response.bytes().await.map_err(|e| LlmError::Malformed {
            provider: self.provider,
            status,
            message: format!("the body was cut off or unreadable: {e}"),
        })?;
        if !(200..300).contains(&status) {
            return Err(api_error(self.provider, status, &bytes, attempt, secret));
        }
        serde_json::from_slice(&bytes).map_err(|e| LlmError::Malformed {
            provider: self.provider,
            status,
            message: format!(
                "{} JSON: {e}; the body starts with {}",
                if e.is_eof() { "truncated" } else { "malformed" },
                preview(&bytes, secret)
            ),
        })
    }

    /// Sends through the retry layer; returns the answer, unread, with the
    /// number of attempts.
    async fn send(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
        stream: bool,
        secret: Option<&str>,
    ) -> Result<(HttpResponse, u32), LlmError> {
        let url = format!("{}{path}", self.base_url);
        let mut header_map = HeaderMap::with_capacity(headers.len() + 1);
        header_map.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let key = secret.filter(|k| !k.is_empty());
        for (name, value) in headers {
            let mut value = HeaderValue::from_str(value).map_err(|_| LlmError::Config {
                provider: self.provider,
                // Never echo the value: it may be a key.
                message: format!("the `{name}` header value has characters HTTP does not allow"),
            })?;
            // Shown as `Sensitive` wherever a request is printed.
            if key.is_some_and(|k| value.as_bytes().windows(k.len()).any(|w| w == k.as_bytes())) {
                value.set_sensitive(true);
            }
            header_map.insert(HeaderName::from_static(name), value);
        }
        let request = HttpRequest::post(url.clone(), header_map, body).streaming(stream);
        let (sent, attempts) = self.http.send_counting(request).await;
        match sent {
            Ok(response) => Ok((response, attempts)),
            Err(TransportError::CrossOriginRedirect { location }) => {
                Err(LlmError::CrossOriginRedirect {
                    provider: self.provider,
                    url,
                    location,
                })
            }
            Err(source) => Err(LlmError::Transport {
                provider: self.provider,
                url,
                source,
                attempts,
            }),
        }
    }
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
    if (status == 400 || status == 413)
        && let Some((tokens, limit)) = overflow(field("code").as_deref(), &message)
    {
        return LlmError::ContextOverflow {
            provider,
            tokens,
            limit,
            message: redact(message, key),
        };
    }
    LlmError::Api {
        provider,
        status,
        error_type: error_type.map(|t| redact(t, key)),
        message: redact(message, key),
        attempts,
    }
}

/// A request's size and the model's limit, in tokens, where named.
type Sizes = (Option<u64>, Option<u64>);

/// Whether an error is a refusal of the request's length, and the sizes
/// it names (the request's, the limit), read from each provider's wording:
///
/// - Anthropic: `prompt is too long: 209353 tokens > 200000 maximum`;
/// - OpenAI (code `context_length_exceeded`): `This model's maximum
///   context length is 8192 tokens. However, your messages resulted in
///   8227 tokens.` (or `you requested 4120 tokens`), or `Input tokens
///   exceed the configured limit of 24000 tokens. Your messages resulted
///   in 45033 tokens.`;
/// - Gemini (`INVALID_ARGUMENT`): `The input token count (1200293) exceeds
///   the maximum number of tokens allowed (1048576).`
fn overflow(code: Option<&str>, message: &str) -> Option<Sizes> {
    // A number as a provider writes it, thousands grouped or not.
    let number_after = |marker: &str| -> Option<u64> {
        let rest = &message[message.find(marker)? + marker.len()..];
        let digits: String = rest
            .trim_start_matches([' ', '('])
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    if let Some(rest) = message.strip_prefix("prompt is too long") {
        let tokens = number_after(": ");
        let limit = rest.find("> ").and_then(|i| {
            rest[i + 2..]
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
        });
        return Some((tokens, limit));
    }
    // Anthropic, when the input fits but not with the reply's room:
    // `input length and `max_tokens` exceed context limit: 187254 + 20000
    // > 200000, decrease input length or `max_tokens` and try again`.
    if let Some(at) = message.find("exceed context limit:") {
        let sizes = &message[at + "exceed context limit:".len()..];
        let mut numbers = sizes
            .split(|c: char| !c.is_ascii_digit())
            .filter(|n| !n.is_empty())
            .filter_map(|n| n.parse::<u64>().ok());
        let (input, room, limit) = (numbers.next(), numbers.next(), numbers.next());
        let tokens = input.zip(room).map(|(a, b)| a.saturating_add(b));
        return Some((tokens, limit));
    }
    if message.starts_with("The input token count") {
        return Some((
            number_after("The input token count"),
            number_after("tokens allowed"),
        ));
    }
    if code == Some("context_length_exceeded") {
        let tokens = number_after("resulted in").or_else(|| number_after("you requested"));
        // Older models name the window, newer ones a configured limit
        // (`Input tokens exceed the configured limit of 24000 tokens.`).
        let limit = number_after("maximum context length is")
            .or_else(|| number_after("configured limit of"))
            .or_else(|| number_after("limit of"));
        return Some((tokens, limit));
    }
    None
}

/// A key this long is redacted wherever it occurs, even inside a longer
/// run of characters: real provider keys are 32 to 100+ characters, and
/// such a string does not turn up in an error by chance, while a copy
/// glued to other characters (`%22KEY%22` in an encoded URL, a key with
/// a suffix) is still the secret.
const SECRET_KEY_LEN: usize = 16;

/// `text` with each occurrence of `key` replaced by `[redacted]`.
///
/// A key shorter than [`SECRET_KEY_LEN`] (`"k"`, `"ollama"`, a local
/// server's placeholder) is redacted only where it stands as a whole
/// token: replacing it inside words would mangle unrelated text (`"k"`
/// made `tokens` read `to[redacted]ens`) and would tell the key's
/// characters to whoever reads the mangled words.
fn redact(text: String, key: Option<&str>) -> String {
    let Some(key) = key.filter(|k| !k.is_empty() && text.contains(*k)) else {
        return text;
    };
    let whole_tokens_only = key.chars().count() < SECRET_KEY_LEN;
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find(key) {
        let start = from + found;
        let end = start + key.len();
        if whole_tokens_only && !stands_alone(&text, start, end) {
            // Overlapping copies are looked for too: the next one may
            // begin inside this one.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("[redacted]");
        copied = end;
        from = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// Whether `text[start..end]` is a whole token: not inside a longer run
/// of key characters (letters, digits, `_`, `-`, and a `.` between two
/// of them). A `.` counts only between two, so that a key ending a
/// sentence (`invalid key abc.`) is still whole while `abc.def` is not.
fn stands_alone(text: &str, start: usize, end: usize) -> bool {
    fn key_char(c: char) -> bool {
        c.is_alphanumeric() || c == '_' || c == '-'
    }
    let joined = |next: Option<char>, after: Option<char>| match next {
        Some('.') => after.is_some_and(key_char),
        Some(c) => key_char(c),
        None => false,
    };
    let mut before = text[..start].chars().rev();
    let mut after = text[end..].chars();
    !joined(before.next(), before.next()) && !joined(after.next(), after.next())
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

    /// Each provider's refusal of a request's length, as it sends it, is
    /// one variant holding the sizes it named; other 400s are not.
    #[test]
    fn each_providers_context_refusal_is_an_overflow_with_its_sizes() {
        let cases: [(&'static str, &[u8], Sizes); 8] = [
            (
                "OpenAI",
                br#"{"error":{"message":"Input tokens exceed the configured limit of 24000 tokens. Your messages resulted in 45033 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                (Some(45_033), Some(24_000)),
            ),
            (
                "Claude",
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 209353 tokens > 199999 maximum"}}"#,
                (Some(209_353), Some(199_999)),
            ),
            (
                "OpenAI",
                br#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                (Some(8_227), Some(8_192)),
            ),
            (
                "OpenAI",
                br#"{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                (Some(4_120), Some(4_097)),
            ),
            (
                "OpenAI",
                br#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
                (None, None),
            ),
            (
                "Claude",
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000, decrease input length or `max_tokens` and try again"}}"#,
                (Some(207_254), Some(200_000)),
            ),
            (
                "Gemini",
                br#"{"error":{"code":400,"message":"The input token count (1,200,293) exceeds the maximum number of tokens allowed (1,048,576).","status":"INVALID_ARGUMENT"}}"#,
                (Some(1_200_293), Some(1_048_576)),
            ),
            (
                "Gemini",
                br#"{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
                (Some(1_200_293), Some(1_048_576)),
            ),
        ];
        for (provider, body, (tokens, limit)) in cases {
            match api_error(provider, 400, body, 1, None) {
                LlmError::ContextOverflow {
                    provider: p,
                    tokens: t,
                    limit: l,
                    ..
                } => assert_eq!((p, t, l), (provider, tokens, limit), "{provider}"),
                other => panic!("{provider}: {other:?}"),
            }
        }
        let other_400 = br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens"}}"#;
        assert!(matches!(
            api_error("Claude", 400, other_400, 1, None),
            LlmError::Api { status: 400, .. }
        ));
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

    #[test]
    fn a_short_key_is_redacted_only_as_a_whole_token() {
        let r = |text: &str, key: &str| redact(text.to_owned(), Some(key));
        assert_eq!(r("too many tokens", "k"), "too many tokens");
        assert_eq!(r("key k rejected", "k"), "key [redacted] rejected");
        assert_eq!(r("invalid key k.", "k"), "invalid key [redacted].");
        assert_eq!(r("see k.v1 and v1.k", "k"), "see k.v1 and v1.k");
        assert_eq!(r("?key=k&x=1", "k"), "?key=[redacted]&x=1");
        assert_eq!(r(r#"{"key":"k"}"#, "k"), r#"{"key":"[redacted]"}"#);
        assert_eq!(r("Bearer k", "k"), "Bearer [redacted]");
        assert_eq!(r("kk k-k k", "k"), "kk k-k [redacted]");
        // Overlapping copies: the second, whole, is found.
        assert_eq!(r("xa a a", "a a"), "xa [redacted]");
        assert_eq!(r("ék é k", "k"), "ék é [redacted]");
    }

    #[test]
    fn a_long_key_is_redacted_even_inside_other_characters() {
        let key = "sk-proj-0123456789abcdef";
        let r = |text: &str| redact(text.to_owned(), Some(key));
        assert_eq!(r(&format!("x%22{key}%22y")), "x%22[redacted]%22y");
        assert_eq!(r(&format!("{key}{key}")), "[redacted][redacted]");
        assert_eq!(r(&format!("x-api-key: {key}.")), "x-api-key: [redacted].");
    }
}
