//! LLM backends of kesoku: Claude, Gemini and OpenAI-compatible servers
//! behind one [`Llm`] trait, with multimodal [`ContentBlock`]s.
//!
//! Every backend converts kesoku [`Message`](kesoku_core::Message) history
//! to its provider's wire format in one place, pairs each tool call with
//! its result through `parent_id`, lowers tool schemas to the provider's
//! dialect (see `kesoku_core::lowering`), and retries what is worth
//! retrying.

mod agent;
mod claude;
mod content;
mod endpoint;
mod error;
mod gemini;
mod http;
mod key;
mod llm;
mod openai;
mod scripted;

pub use agent::{Agent, AgentBuilder, AgentError, TurnOutcome, TurnStatus};
pub use claude::ClaudeLlm;
pub use content::ContentFallback;
pub use error::LlmError;
pub use gemini::GeminiLlm;
pub use http::HttpOptions;
pub use kesoku_core::ContentBlock;
pub use key::ApiKey;
pub use llm::{
    AssistantTurn, CONTENT_BLOCKS_KEY, Llm, LlmFuture, LlmOptions, PROVIDER_KEY, StopReason,
    ToolChoice, ToolDeclaration, Usage, WireRequest, content_blocks,
};
pub use openai::OpenAiLlm;
pub use scripted::{ScriptError, ScriptedLlm};
