//! Azure OpenAI: [`AzureOpenAiLlm`] (Chat Completions on a deployment)
//! and [`AzureResponsesLlm`] (the Responses API), each the OpenAI wire
//! format at Azure's addresses, with Azure's `api-key` header or a
//! Microsoft Entra ID bearer token (fixed, or from a [`TokenProvider`]
//! for each request).
//!
//! The addresses are the official SDK's (`openai` for Python,
//! `lib/azure.py`) for a dated `api-version`: Chat Completions at
//! `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...`,
//! Responses at `{endpoint}/openai/responses?api-version=...` (the
//! deployment in `model`). Without one, or with `v1`, Azure's v1 API:
//! `{endpoint}/openai/v1/chat/completions` and `{endpoint}/openai/v1/responses`,
//! the deployment in `model`.

use std::fmt;
use std::sync::Arc;

use kesoku_core::lowering::{Dialect, ToolNames};
use serde_json::{Map, Value};

use crate::backend::{Backend, backend_methods};
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::future::LlmFuture;
use crate::history::Item;
use crate::key::{ApiKey, TokenProvider};
use crate::openai::ChatCompletions;
use crate::options::LlmOptions;
use crate::responses::Responses;
use crate::turn::AssistantTurn;
use crate::wire::{Request, WireFormat, WireHistory};

const PROVIDER: &str = "Azure OpenAI";

/// How requests authenticate.
#[derive(Clone, Default)]
pub(crate) enum Auth {
    /// The endpoint's key, in the `api-key` header.
    #[default]
    Key,
    /// The endpoint's key is an Entra ID token: `Authorization: Bearer`.
    Token,
    /// A token fetched for each request.
    Provider(Arc<dyn TokenProvider>),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Auth::Key => "ApiKey",
            Auth::Token => "EntraToken",
            Auth::Provider(_) => "TokenProvider",
        })
    }
}

/// What Azure adds to the OpenAI wire formats.
#[derive(Debug, Clone, Default)]
pub(crate) struct Azure {
    /// A dated `api-version`; `None` (or `v1`) is the v1 API.
    api_version: Option<String>,
    /// The deployment, when not the options' model.
    deployment: Option<String>,
    auth: Auth,
}

impl Azure {
    /// The dated API version, if one is used (`v1` is none).
    fn dated(&self) -> Option<&str> {
        self.api_version.as_deref().filter(|v| *v != "v1")
    }

    fn deployment<'a>(&'a self, options: &'a LlmOptions) -> &'a str {
        self.deployment.as_deref().unwrap_or(&options.model)
    }

    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        let Some(key) = key else {
            return Vec::new();
        };
        match self.auth {
            Auth::Key => vec![("api-key", key.to_owned())],
            Auth::Token | Auth::Provider(_) => vec![("authorization", format!("Bearer {key}"))],
        }
    }

    fn fresh_credential(&self) -> Option<LlmFuture<'_, Result<ApiKey, LlmError>>> {
        let Auth::Provider(provider) = &self.auth else {
            return None;
        };
        Some(Box::pin(async move {
            match provider.token().await {
                Ok(token) if !token.trim().is_empty() => Ok(ApiKey::new(token)),
                Ok(_) => Err(LlmError::Config {
                    provider: PROVIDER,
                    message: "the token provider gave an empty token".into(),
                }),
                Err(e) => Err(LlmError::Config {
                    provider: PROVIDER,
                    message: format!("the token provider failed: {e}"),
                }),
            }
        }))
    }

    /// The body's `model` is the deployment, when one is set.
    fn body(&self, mut body: Map<String, Value>) -> Map<String, Value> {
        if let Some(deployment) = &self.deployment {
            body.insert("model".into(), deployment.clone().into());
        }
        body
    }
}

/// `s` as one path segment: what is not unreserved, percent-encoded.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// Chat Completions on Azure.
#[derive(Debug, Default)]
pub(crate) struct AzureChat {
    inner: ChatCompletions,
    azure: Azure,
}

/// The Responses API on Azure.
#[derive(Debug, Default)]
pub(crate) struct AzureResponses {
    inner: Responses,
    azure: Azure,
}

/// The parts of a wire format that are OpenAI's, delegated.
macro_rules! delegate {
    ($format:ty, $inner:ty) => {
        impl WireFormat for $format {
            type Decoder = <$inner as WireFormat>::Decoder;
            const NAME: &'static str = PROVIDER;
            // Each resource has its own; the constructors take it.
            const DEFAULT_BASE_URL: &'static str = "";
            const DEFAULT_MODEL: &'static str = <$inner as WireFormat>::DEFAULT_MODEL;
            // A deployment is often named after its model.
            fn context_window(model: &str) -> Option<u64> {
                <$inner as WireFormat>::context_window(model)
            }
            const KEY_VARS: &'static [&'static str] = &["AZURE_OPENAI_API_KEY"];
            const BASE_URL_VAR: &'static str = "AZURE_OPENAI_ENDPOINT";
            const NAMES: Dialect = <$inner as WireFormat>::NAMES;
            const HISTORY_KEY: &'static str = <$inner as WireFormat>::HISTORY_KEY;

            fn schema_dialect(&self) -> Dialect {
                self.inner.schema_dialect()
            }

            fn output_dialect(&self) -> Dialect {
                self.inner.output_dialect()
            }

            fn path(&self, options: &LlmOptions) -> String {
                self.azure_path(options)
            }

            fn stream_fields(&self, fields: &mut Map<String, Value>) {
                self.inner.stream_fields(fields);
            }

            fn fresh_credential(&self) -> Option<LlmFuture<'_, Result<ApiKey, LlmError>>> {
                self.azure.fresh_credential()
            }

            fn keeps_prefix(&self) -> bool {
                self.inner.keeps_prefix()
            }

            fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
                self.azure.auth_headers(key)
            }

            fn encode_history<'a>(
                &self,
                history: &[Item<'a>],
                names: &ToolNames,
                fallbacks: &mut Vec<ContentFallback>,
            ) -> WireHistory<'a> {
                self.inner.encode_history(history, names, fallbacks)
            }

            fn encode_body(&self, request: &Request<'_>, system: &[&str]) -> Map<String, Value> {
                self.azure.body(self.inner.encode_body(request, system))
            }

            fn decode(
                &self,
                session_id: &str,
                body: &Value,
                names: &ToolNames,
            ) -> Result<AssistantTurn, LlmError> {
                let mut turn = self.inner.decode(session_id, body, names)?;
                for m in turn.messages_mut() {
                    m.sender = PROVIDER.to_owned();
                }
                Ok(turn)
            }
        }
    };
}

delegate!(AzureChat, ChatCompletions);
delegate!(AzureResponses, Responses);

impl AzureChat {
    fn azure_path(&self, options: &LlmOptions) -> String {
        match self.azure.dated() {
            Some(version) => format!(
                "/openai/deployments/{}/chat/completions?api-version={}",
                segment(self.azure.deployment(options)),
                segment(version)
            ),
            None => "/openai/v1/chat/completions".to_owned(),
        }
    }
}

impl AzureResponses {
    fn azure_path(&self, _options: &LlmOptions) -> String {
        match self.azure.dated() {
            Some(version) => format!("/openai/responses?api-version={}", segment(version)),
            None => "/openai/v1/responses".to_owned(),
        }
    }
}

/// The constructors and Azure builder methods of an Azure backend.
macro_rules! azure_backend {
    ($name:ident($format:ty), $example:literal) => {
        impl $name {
            /// A backend for the resource at `endpoint`
            /// (`https://{resource}.openai.azure.com`) with this key, sent
            /// in the `api-key` header.
            ///
            /// ```
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::new(\"https://res.openai.azure.com\", \"azure-key-0123456789\");")]
            /// assert!(!format!("{llm:?}").contains("azure-key-0123456789"));
            /// ```
            pub fn new(endpoint: impl Into<String>, api_key: impl Into<String>) -> Self {
                Self::with_auth(endpoint.into(), Some(ApiKey::new(api_key)), Auth::Key)
            }

            /// A backend authenticated by a Microsoft Entra ID token
            /// (scope `https://cognitiveservices.azure.com/.default`),
            /// sent as `Authorization: Bearer`. A token expires (in about
            /// an hour): for a long-lived backend, use
            /// [`with_token_provider`](Self::with_token_provider).
            ///
            /// ```
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::with_entra_token(\"https://res.openai.azure.com\", \"eyJ0eXAi\");")]
            /// # let _ = llm;
            /// ```
            pub fn with_entra_token(endpoint: impl Into<String>, token: impl Into<String>) -> Self {
                Self::with_auth(endpoint.into(), Some(ApiKey::new(token)), Auth::Token)
            }

            /// A backend that asks `provider` for an Entra ID token before
            /// each request (as the SDK's `azure_ad_token_provider`), sent
            /// as `Authorization: Bearer`. A provider's failure fails the
            /// call with [`LlmError::Config`](crate::LlmError::Config).
            ///
            /// ```
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::with_token_provider(\"https://res.openai.azure.com\", || async {")]
            ///     Ok::<_, kesoku_llm::BoxError>("eyJ0eXAi".to_owned())
            /// });
            /// # let _ = llm;
            /// ```
            pub fn with_token_provider(
                endpoint: impl Into<String>,
                provider: impl TokenProvider,
            ) -> Self {
                Self::with_auth(endpoint.into(), None, Auth::Provider(Arc::new(provider)))
            }

            /// A backend configured from the environment the official SDK
            /// reads: `AZURE_OPENAI_ENDPOINT`; `AZURE_OPENAI_AD_TOKEN` (an
            /// Entra ID token), else `AZURE_OPENAI_API_KEY`; and
            /// `OPENAI_API_VERSION` if set (the SDK requires it; without
            /// it kesoku uses Azure's v1 API). Without an endpoint or a
            /// credential, [`LlmError::Config`](crate::LlmError::Config)
            /// names what to set.
            ///
            /// ```no_run
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::from_env()?;")]
            /// # Ok::<_, kesoku_llm::LlmError>(())
            /// ```
            pub fn from_env() -> Result<Self, LlmError> {
                let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
                let endpoint = var("AZURE_OPENAI_ENDPOINT").ok_or_else(|| LlmError::Config {
                    provider: PROVIDER,
                    message: "set AZURE_OPENAI_ENDPOINT (or pass the endpoint to a constructor)"
                        .into(),
                })?;
                let llm = if let Some(token) = var("AZURE_OPENAI_AD_TOKEN") {
                    Self::with_entra_token(endpoint, token)
                } else if let Some(key) = var("AZURE_OPENAI_API_KEY") {
                    Self::new(endpoint, key)
                } else {
                    return Err(LlmError::Config {
                        provider: PROVIDER,
                        message: "set AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN (or pass \
                                  a key, a token or a token provider to a constructor)"
                            .into(),
                    });
                };
                Ok(match var("OPENAI_API_VERSION") {
                    Some(version) => llm.with_api_version(version),
                    None => llm,
                })
            }

            fn with_auth(endpoint: String, key: Option<ApiKey>, auth: Auth) -> Self {
                let mut format = <$format>::default();
                format.azure.auth = auth;
                $name(Backend::new(key, &endpoint, format))
            }

            /// Sets the `api-version` query parameter (a dated one, such
            /// as `2024-10-21`, for the deployment URLs; `v1` for Azure's
            /// v1 API, the default).
            ///
            /// ```
            #[doc = $example]
            /// ```
            #[must_use]
            pub fn with_api_version(mut self, version: impl Into<String>) -> Self {
                self.0.format.azure.api_version = Some(version.into());
                self
            }

            /// Sets the deployment, sent in place of the options' model
            /// (by default the model names the deployment, as in the SDK).
            ///
            /// ```
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::new(\"https://res.openai.azure.com\", \"key\")")]
            ///     .with_deployment("gpt-5-prod");
            /// # let _ = llm;
            /// ```
            #[must_use]
            pub fn with_deployment(mut self, deployment: impl Into<String>) -> Self {
                self.0.format.azure.deployment = Some(deployment.into());
                self
            }

            /// Strict mode for tool schemas, as the OpenAI backend's: schemas
            /// lowered to OpenAI's strict dialect and sent with `strict: true`.
            ///
            /// ```
            #[doc = concat!("let llm = kesoku_llm::", stringify!($name), "::new(\"https://res.openai.azure.com\", \"key\")")]
            ///     .with_strict(true);
            /// # let _ = llm;
            /// ```
            #[must_use]
            pub fn with_strict(mut self, strict: bool) -> Self {
                self.0.format.inner.strict = strict;
                self
            }
        }
    };
}

/// Azure OpenAI's Chat Completions, at a deployment's address.
///
/// The request is [`OpenAiLlm`](crate::OpenAiLlm)'s; the address, the
/// `api-version` and the authentication are Azure's (see
/// [`new`](Self::new), [`with_entra_token`](Self::with_entra_token),
/// [`with_token_provider`](Self::with_token_provider),
/// [`from_env`](Self::from_env)). The key or token is never printed, and
/// redacted from errors.
///
/// ```
/// // {endpoint}/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21
/// let llm = kesoku_llm::AzureOpenAiLlm::new("https://res.openai.azure.com", "azure-key-0123456789")
///     .with_api_version("2024-10-21")
///     .with_deployment("gpt-4o-prod");
/// assert!(!format!("{llm:?}").contains("azure-key-0123456789"));
/// ```
#[derive(Debug)]
pub struct AzureOpenAiLlm(Backend<AzureChat>);

backend_methods!(
    AzureOpenAiLlm(AzureChat),
    "kesoku_llm::AzureOpenAiLlm::new(\"https://res.openai.azure.com\", \"key\")"
);
azure_backend!(
    AzureOpenAiLlm(AzureChat),
    "// POST {endpoint}/openai/deployments/{model}/chat/completions?api-version=2024-10-21\nlet llm = kesoku_llm::AzureOpenAiLlm::new(\"https://res.openai.azure.com\", \"key\")\n    .with_api_version(\"2024-10-21\");\n# let _ = llm;"
);

/// Azure OpenAI's Responses API: [`OpenAiResponsesLlm`](crate::OpenAiResponsesLlm)'s
/// requests (stateless by default, reasoning replayed) at Azure's address,
/// with Azure's authentication (see [`AzureOpenAiLlm`]).
///
/// ```
/// // {endpoint}/openai/v1/responses, the deployment in `model`.
/// let llm = kesoku_llm::AzureResponsesLlm::with_entra_token("https://res.openai.azure.com", "eyJ0eXAi")
///     .with_deployment("gpt-5-prod");
/// assert!(!format!("{llm:?}").contains("eyJ0eXAi"));
/// ```
#[derive(Debug)]
pub struct AzureResponsesLlm(Backend<AzureResponses>);

backend_methods!(
    AzureResponsesLlm(AzureResponses),
    "kesoku_llm::AzureResponsesLlm::new(\"https://res.openai.azure.com\", \"key\")"
);
azure_backend!(
    AzureResponsesLlm(AzureResponses),
    "// POST {endpoint}/openai/responses?api-version=2025-04-01-preview\nlet llm = kesoku_llm::AzureResponsesLlm::new(\"https://res.openai.azure.com\", \"key\")\n    .with_api_version(\"2025-04-01-preview\");\n# let _ = llm;"
);

impl AzureResponsesLlm {
    /// Chains requests on stored responses, as
    /// [`OpenAiResponsesLlm::with_previous_response_id`](crate::OpenAiResponsesLlm::with_previous_response_id).
    ///
    /// ```
    /// let llm = kesoku_llm::AzureResponsesLlm::new("https://res.openai.azure.com", "key")
    ///     .with_previous_response_id(true);
    /// # let _ = llm;
    /// ```
    #[must_use]
    pub fn with_previous_response_id(mut self, chain: bool) -> Self {
        self.0.format.inner.chain = chain;
        self
    }

    /// Offers a built-in tool, as
    /// [`OpenAiResponsesLlm::with_builtin_tool`](crate::OpenAiResponsesLlm::with_builtin_tool).
    ///
    /// ```
    /// let llm = kesoku_llm::AzureResponsesLlm::new("https://res.openai.azure.com", "key")
    ///     .with_builtin_tool(serde_json::json!({"type": "code_interpreter", "container": {"type": "auto"}}));
    /// # let _ = llm;
    /// ```
    #[must_use]
    pub fn with_builtin_tool(mut self, tool: Value) -> Self {
        self.0.format.inner.builtin.push(tool);
        self
    }
}
