//! LLM backends of kesoku: Claude, Gemini, OpenAI (Chat Completions and
//! the Responses API), Azure OpenAI and OpenAI-compatible servers behind
//! one [`Llm`] trait, with multimodal [`ContentBlock`]s. The agent
//! that runs turns over them is `kesoku-agent`'s.
//!
//! Every backend is the same mechanism over a different wire format: it
//! reads the kesoku [`Message`](kesoku_core::Message) history once, pairing
//! each tool result with its call through `parent_id`; lowers the tool
//! schemas to the provider's dialect (see `kesoku_core::lowering`) once per
//! set of tools, logging what that cost; encodes the request (for a session
//! it served, only the messages added since its last request); sends it
//! through an [`HttpTransport`] (reqwest by default, or any of yours, with
//! `with_transport`; a tower service through `TowerTransport`, feature
//! `tower`) under a [`Retry`] layer; and reads the answer into an
//! [`AssistantTurn`].
//!
//! # Layers
//!
//! A module uses only modules listed below it:
//!
//! | module | holds |
//! | --- | --- |
//! | `testing` | record a session to a cassette, replay it, capture requests (feature `testing`) |
//! | `scripted` | [`ScriptedLlm`], a model that plays a script |
//! | `azure` | Azure OpenAI: OpenAI's Chat Completions and Responses formats at Azure's addresses, with its key or an Entra ID token |
//! | `responses` | OpenAI's Responses API: its wire format and public backend |
//! | `responses_output` | a Responses reply's output items read into a turn, each message keeping the items it is sent back as |
//! | `claude`, `openai`, `gemini` | each provider's wire format and public backend |
//! | `backend` | the one [`Llm`] implementation over a wire format |
//! | `prefix` | each session's history as already encoded, reused by its next request |
//! | `wire` | what a wire format provides, and the request it encodes |
//! | `schemas` | tool schemas lowered once per declaration set |
//! | `history` | the history read once into provider-neutral items |
//! | `blocks` | content blocks read where they are stored, without copies |
//! | `llm` | the [`Llm`] trait |
//! | `stream` | [`StreamEvent`]s, the server-sent events parser, and each provider's stream decoder |
//! | `turn` | [`AssistantTurn`], and the builder decoders fill |
//! | `options`, `declaration` | [`LlmOptions`], [`ToolChoice`], [`ToolDeclaration`] |
//! | `endpoint` | a provider's address and key over the transport and its retries; errors that name the provider's |
//! | `fallback`, `error`, `key` | [`ContentFallback`], [`LlmError`], [`ApiKey`], [`TokenProvider`] |
//! | `reqwest_transport` | [`ReqwestTransport`], the default transport |
//! | `tower_transport` | `TowerTransport`, any tower `Service` as a transport (feature `tower`) |
//! | `http_options` | [`HttpOptions`] |
//! | `retry` | [`Retry`], the layer that tries again by a [`RetryPolicy`] |
//! | `http` | the seam: [`HttpTransport`], [`HttpRequest`], [`HttpResponse`], [`TransportError`] |
//! | `future` | [`LlmFuture`] |

mod azure;
mod backend;
mod blocks;
mod claude;
mod declaration;
mod endpoint;
mod error;
mod fallback;
mod future;
mod gemini;
mod history;
mod http;
mod http_options;
mod key;
mod llm;
mod openai;
mod options;
mod prefix;
mod reqwest_transport;
mod responses;
mod responses_output;
mod retry;
mod schemas;
mod scripted;
mod stream;
#[cfg(test)]
mod stream_tests;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tower")]
mod tower_transport;
mod turn;
mod wire;

pub use azure::{AzureOpenAiLlm, AzureResponsesLlm};
pub use blocks::content_blocks;
pub use claude::ClaudeLlm;
pub use declaration::ToolDeclaration;
pub use error::LlmError;
pub use fallback::ContentFallback;
pub use gemini::GeminiLlm;
pub use http::{BoxError, HttpBody, HttpRequest, HttpResponse, HttpTransport, TransportError};
pub use http_options::HttpOptions;
pub use kesoku_core::ContentBlock;
pub use key::{ApiKey, TokenProvider};
pub use llm::{Llm, LlmFuture};
pub use openai::OpenAiLlm;
pub use options::{LlmOptions, ToolChoice};
pub use reqwest_transport::{ReqwestTransport, install_crypto_provider};
pub use responses::OpenAiResponsesLlm;
pub use retry::{Retry, RetryPolicy};
pub use scripted::{ScriptError, ScriptedLlm};
pub use stream::{EventStream, StreamEvent};
#[cfg(feature = "tower")]
pub use tower_transport::TowerTransport;
pub use turn::{AssistantTurn, PROVIDER_KEY, StopReason, ToolCall, Usage};
