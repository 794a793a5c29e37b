//! [`Backend`]: the one implementation of a model call, over a
//! [`WireFormat`]. It lowers the tools (cached per set), reads the history
//! once, lets the format encode it, sends it through the [`Transport`] and
//! lets the format decode the answer.
//!
//! The public backends (`ClaudeLlm`, `OpenAiLlm`, `GeminiLlm`) are thin
//! wrappers declared with [`public_backend!`], which gives each the same
//! constructors, builder methods and [`Llm`](crate::Llm) implementation.

use std::sync::Arc;

use kesoku_core::Message;
use serde_json::Value;

use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history;
use crate::key::ApiKey;
use crate::options::LlmOptions;
use crate::schemas::{LoweredTools, SchemaCache};
use crate::transport::Transport;
use crate::turn::AssistantTurn;
use crate::wire::{Request, WireFormat};

/// A request body as a backend would send it. Not a public API: tests and
/// benchmarks read it through the backends' hidden `__request_body`.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct RequestBody {
    /// The JSON body.
    pub body: Value,
    /// Blocks the provider cannot take where they were, sent as text notes.
    pub fallbacks: Vec<ContentFallback>,
}

/// A request ready to send, with the lowered tools its answer is read with.
struct Encoded {
    body: Value,
    fallbacks: Vec<ContentFallback>,
    lowered: Arc<LoweredTools>,
}

/// A provider backend: where and how to reach it, and its wire format.
#[derive(Debug)]
pub(crate) struct Backend<F> {
    pub(crate) format: F,
    pub(crate) transport: Transport,
    schemas: SchemaCache,
    /// Whether an `Unsupported` lowering finding fails the call.
    pub(crate) deny_unsupported: bool,
}

impl<F: WireFormat> Backend<F> {
    pub(crate) fn new(api_key: Option<ApiKey>, base_url: &str, format: F) -> Self {
        Backend::over(Transport::new(F::NAME, api_key, base_url), format)
    }

    /// Configured from the environment, as the provider's official SDK is.
    pub(crate) fn from_env() -> Result<Self, LlmError> {
        let transport =
            Transport::from_env(F::NAME, F::KEY_VARS, F::BASE_URL_VAR, F::DEFAULT_BASE_URL)?;
        Ok(Backend::over(transport, F::default()))
    }

    fn over(transport: Transport, format: F) -> Self {
        Backend {
            format,
            transport,
            schemas: SchemaCache::default(),
            deny_unsupported: false,
        }
    }

    /// The tools lowered for this provider, and the error to return
    /// instead when one cannot be represented and that is denied.
    fn lowered(&self, tools: &[ToolDeclaration]) -> Result<Arc<LoweredTools>, LlmError> {
        let lowered = self.schemas.get(
            F::NAME,
            F::NAMES,
            self.format.schema_dialect(),
            tools,
            |t| self.format.sends_schema(t),
        );
        if self.deny_unsupported
            && let Some(e) = lowered.report.unsupported().next()
        {
            return Err(LlmError::UnsupportedSchema {
                provider: F::NAME,
                tool: e.tool.clone(),
                path: e.path.clone(),
                reason: e.detail.clone(),
            });
        }
        Ok(lowered)
    }

    fn encode(
        &self,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> Result<Encoded, LlmError> {
        let lowered = self.lowered(tools)?;
        let history = history::read(options.system.as_deref(), messages);
        let mut fallbacks = Vec::new();
        let request = Request {
            history: &history,
            tools,
            lowered: &lowered,
            options,
        };
        let body = self.format.encode(&request, &mut fallbacks);
        Ok(Encoded {
            body,
            fallbacks,
            lowered,
        })
    }

    /// One call: encode, send, decode.
    pub(crate) async fn complete(
        &self,
        session_id: &str,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> Result<AssistantTurn, LlmError> {
        let request = self.encode(messages, tools, options)?;
        let headers = self.format.auth_headers(self.transport.key());
        let path = self.format.path(options);
        let body = self.transport.post(&path, &headers, &request.body).await?;
        let mut turn = self
            .format
            .decode(session_id, &body, &request.lowered.names)?;
        turn.fallbacks = request.fallbacks;
        Ok(turn)
    }

    /// The body [`complete`](Self::complete) would send.
    pub(crate) fn request_body(
        &self,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> Result<RequestBody, LlmError> {
        let Encoded {
            body, fallbacks, ..
        } = self.encode(messages, tools, options)?;
        Ok(RequestBody { body, fallbacks })
    }

    /// Reads `body` as [`complete`](Self::complete) would, for `tools`.
    pub(crate) fn decode_response(
        &self,
        session_id: &str,
        tools: &[ToolDeclaration],
        body: &Value,
    ) -> Result<AssistantTurn, LlmError> {
        let lowered = self.lowered(tools)?;
        self.format.decode(session_id, body, &lowered.names)
    }

    /// How many declaration sets were lowered.
    pub(crate) fn schema_lowerings(&self) -> usize {
        self.schemas.lowerings()
    }
}

/// Declares a public backend: a wrapper around [`Backend`] over a wire
/// format, with the constructors, builder methods and [`Llm`](crate::Llm)
/// implementation every backend has. `env` names the variables
/// `from_env` reads, for its documentation.
macro_rules! public_backend {
    ($(#[$attr:meta])* $name:ident($format:ty), env: $env:literal) => {
        $(#[$attr])*
        #[derive(Debug)]
        pub struct $name(crate::backend::Backend<$format>);

        impl $name {
            /// A backend with this key and the default address.
            pub fn new(api_key: impl Into<String>) -> Self {
                let key = Some(crate::key::ApiKey::new(api_key));
                $name(crate::backend::Backend::new(
                    key,
                    <$format as crate::wire::WireFormat>::DEFAULT_BASE_URL,
                    <$format>::default(),
                ))
            }

            #[doc = concat!("A backend configured from ", $env, ", as the official SDK is.")]
            pub fn from_env() -> Result<Self, crate::error::LlmError> {
                crate::backend::Backend::from_env().map($name)
            }

            /// Sets the base address (for proxies and compatible servers).
            #[must_use]
            pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
                self.0.transport.set_base_url(&url.into());
                self
            }

            /// Sets timeouts and the retry policy.
            #[must_use]
            pub fn with_http_options(mut self, options: crate::transport::HttpOptions) -> Self {
                self.0.transport.set_http_options(options);
                self
            }

            /// Whether a tool schema with a part this provider cannot
            /// represent fails the call with
            /// [`LlmError::UnsupportedSchema`](crate::LlmError::UnsupportedSchema)
            /// before anything is sent. Off by default: such a tool is
            /// sent as lowered, and the finding is logged (once per set of
            /// tools) as a `tracing` warning, as lossy ones are.
            #[must_use]
            pub fn deny_unsupported_schemas(mut self, deny: bool) -> Self {
                self.0.deny_unsupported = deny;
                self
            }

            /// The body `complete` would send. Not a public API.
            #[doc(hidden)]
            pub fn __request_body(
                &self,
                messages: &[kesoku_core::Message],
                tools: &[crate::declaration::ToolDeclaration],
                options: &crate::options::LlmOptions,
            ) -> Result<crate::backend::RequestBody, crate::error::LlmError> {
                self.0.request_body(messages, tools, options)
            }

            /// Reads a response body as `complete` would. Not a public API.
            #[doc(hidden)]
            pub fn __decode_response(
                &self,
                session_id: &str,
                tools: &[crate::declaration::ToolDeclaration],
                body: &serde_json::Value,
            ) -> Result<crate::turn::AssistantTurn, crate::error::LlmError> {
                self.0.decode_response(session_id, tools, body)
            }

            /// How many tool declaration sets were lowered. Not a public API.
            #[doc(hidden)]
            pub fn __schema_lowerings(&self) -> usize {
                self.0.schema_lowerings()
            }
        }

        impl crate::llm::Llm for $name {
            fn provider(&self) -> &'static str {
                <$format as crate::wire::WireFormat>::NAME
            }

            fn complete<'a>(
                &'a self,
                session_id: &'a str,
                messages: &'a [kesoku_core::Message],
                tools: &'a [crate::declaration::ToolDeclaration],
                options: &'a crate::options::LlmOptions,
            ) -> crate::llm::LlmFuture<'a, Result<crate::turn::AssistantTurn, crate::error::LlmError>>
            {
                Box::pin(self.0.complete(session_id, messages, tools, options))
            }
        }
    };
}

pub(crate) use public_backend;
