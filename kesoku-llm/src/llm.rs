//! The [`Llm`] trait every backend implements: one call, one assistant turn.

use std::future::Future;
use std::pin::Pin;

use kesoku_core::Message;

use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::options::LlmOptions;
use crate::turn::AssistantTurn;

/// A boxed future borrowing its inputs, so [`Llm`] stays object-safe. It is
/// `Send`: a call can run on a spawned task.
pub type LlmFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An LLM backend: one call, one assistant turn.
pub trait Llm: Send + Sync {
    /// The provider's name, for logs and errors.
    fn provider(&self) -> &'static str;

    /// Sends the history and tools, and returns the model's turn.
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>>;
}
