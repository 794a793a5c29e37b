//! [`Endpoint`]: what every backend shares: where the provider is, its key,
//! and the pooled HTTP client built from the retry policy.

use std::sync::OnceLock;

use serde_json::Value;

use crate::error::LlmError;
use crate::http::{Http, HttpOptions};
use crate::key::ApiKey;

#[derive(Debug)]
pub(crate) struct Endpoint {
    provider: &'static str,
    api_key: Option<ApiKey>,
    base_url: String,
    options: HttpOptions,
    /// Built on first use and reused, so connections are pooled.
    http: OnceLock<Result<Http, LlmError>>,
}

impl Endpoint {
    pub(crate) fn new(provider: &'static str, api_key: Option<ApiKey>, base_url: &str) -> Self {
        let mut e = Endpoint {
            provider,
            api_key,
            base_url: String::new(),
            options: HttpOptions::default(),
            http: OnceLock::new(),
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

    pub(crate) fn set_base_url(&mut self, url: &str) {
        url.trim()
            .trim_end_matches('/')
            .clone_into(&mut self.base_url);
    }

    pub(crate) fn set_http_options(&mut self, options: HttpOptions) {
        self.options = options;
        self.http = OnceLock::new();
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

    /// POSTs `body` to `base_url + path`.
    pub(crate) async fn post(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<Value, LlmError> {
        let http = self
            .http
            .get_or_init(|| Http::new(self.provider, self.options))
            .as_ref()
            .map_err(Clone::clone)?;
        http.post_json(&format!("{}{path}", self.base_url), headers, body)
            .await
    }
}
