//! [`ApiKey`]: a secret that never shows in `Debug`, logs or errors.

use std::fmt;

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
