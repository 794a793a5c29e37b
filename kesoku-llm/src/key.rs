//! [`ApiKey`]: a secret that never shows in `Debug`, logs or errors; and
//! [`TokenProvider`], where a backend gets a fresh bearer token for each
//! request.

use std::fmt;

use crate::future::LlmFuture;
use crate::http::BoxError;

/// An API key. Its `Debug` and `Display` print `ApiKey(***)`, so a key
/// cannot leak through a log line or a panic message.
///
/// ```
/// let key = kesoku_llm::ApiKey::new("sk-secret");
/// assert_eq!(format!("{key:?}"), "ApiKey(***)");
/// assert_eq!(key.expose(), "sk-secret");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The first set, non-empty environment variable of `names`.
    pub fn from_env(names: &[&str]) -> Option<Self> {
        names
            .iter()
            .filter_map(|n| std::env::var(n).ok())
            .find(|v| !v.trim().is_empty())
            .map(ApiKey)
    }

    /// The key itself, for the request header and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where a backend gets a bearer token for each request, in place of a
/// fixed key: a Microsoft Entra ID token for Azure OpenAI, fetched (and
/// cached and refreshed, as the caller's identity library does) each time
/// it is asked, as the official SDK's `azure_ad_token_provider` is. The
/// token is sent as `Authorization: Bearer` and, like a key, never printed:
/// a copy an error body quotes is redacted.
///
/// Any `Fn() -> impl Future<Output = Result<String, BoxError>>` is one:
///
/// ```
/// use kesoku_llm::{AzureOpenAiLlm, BoxError};
///
/// let llm = AzureOpenAiLlm::with_token_provider("https://res.openai.azure.com", || async {
///     // Your identity library's token for https://cognitiveservices.azure.com/.default.
///     Ok::<_, BoxError>("eyJ0eXAi...".to_owned())
/// });
/// assert!(!format!("{llm:?}").contains("eyJ0eXAi"));
/// ```
pub trait TokenProvider: Send + Sync + 'static {
    /// A token for the next request.
    fn token(&self) -> LlmFuture<'_, Result<String, BoxError>>;
}

impl<F, Fut> TokenProvider for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, BoxError>> + Send + 'static,
{
    fn token(&self) -> LlmFuture<'_, Result<String, BoxError>> {
        Box::pin(self())
    }
}
