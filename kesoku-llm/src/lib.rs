//! LLM backends of kesoku: Claude, Gemini and OpenAI-compatible servers
//! behind one [`Llm`] trait, with multimodal [`ContentBlock`]s. The agent
//! that runs turns over them is `kesoku-agent`'s.
//!
//! Every backend is the same mechanism over a different wire format: it
//! reads the kesoku [`Message`](kesoku_core::Message) history once, pairing
//! each tool result with its call through `parent_id`; lowers the tool
//! schemas to the provider's dialect (see `kesoku_core::lowering`) once per
//! set of tools, logging what that cost; encodes the request (for a session
//! it served, only the messages added since its last request); retries
//! what is worth retrying; and reads the answer into an [`AssistantTurn`].
//!
//! # Layers
//!
//! A module uses only modules listed below it:
//!
//! | module | holds |
//! | --- | --- |
//! | `scripted` | [`ScriptedLlm`], a model that plays a script |
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
//! | `transport` | HTTP: address, key, retries, [`HttpOptions`] |
//! | `fallback`, `error`, `key` | [`ContentFallback`], [`LlmError`], [`ApiKey`] |

mod backend;
mod blocks;
mod claude;
mod declaration;
mod error;
mod fallback;
mod gemini;
mod history;
mod key;
mod llm;
mod openai;
mod options;
mod prefix;
mod schemas;
mod scripted;
mod stream;
#[cfg(test)]
mod stream_tests;
mod transport;
mod turn;
mod wire;

pub use blocks::content_blocks;
pub use claude::ClaudeLlm;
pub use declaration::ToolDeclaration;
pub use error::LlmError;
pub use fallback::ContentFallback;
pub use gemini::GeminiLlm;
pub use kesoku_core::ContentBlock;
pub use key::ApiKey;
pub use llm::{Llm, LlmFuture};
pub use openai::OpenAiLlm;
pub use options::{LlmOptions, ToolChoice};
pub use scripted::{ScriptError, ScriptedLlm};
pub use stream::{EventStream, StreamEvent};
pub use transport::HttpOptions;
pub use turn::{AssistantTurn, PROVIDER_KEY, StopReason, ToolCall, Usage};

/// What kesoku's own tests and benchmarks reach. Not a public API: it may
/// change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::backend::RequestBody;
}
