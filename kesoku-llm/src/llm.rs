//! The [`Llm`] trait every backend implements: one call, one assistant turn.

use std::sync::Arc;

use kesoku_core::Message;

use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::options::LlmOptions;
use crate::stream::{EventStream, StreamEvent, events_of};
use crate::turn::AssistantTurn;
use futures_util::StreamExt as _;

pub use crate::future::LlmFuture;

/// An LLM backend: one call, one assistant turn.
///
/// `Box<L>` and `Arc<L>` of a model are models too, so a provider can be
/// chosen at run time, or one backend (and its caches) shared by agents:
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kesoku_core::{Message, MessageType, Role};
/// use kesoku_llm::{Llm, LlmOptions, ScriptedLlm};
///
/// let offline = true;
/// let model: Box<dyn Llm> = if offline {
///     Box::new(ScriptedLlm::from_json(serde_json::json!([{"text": "hi"}])).unwrap())
/// } else {
///     Box::new(kesoku_llm::ClaudeLlm::from_env().unwrap())
/// };
/// let shared: Arc<dyn Llm> = Arc::from(model);
/// let for_another_task = Arc::clone(&shared);
/// let history = [Message::new("s", Role::User, MessageType::Text, "Hello")];
/// let options = LlmOptions::new(shared.default_model());
/// let turn = shared.complete("s", &history, &[], &options).await.unwrap();
/// assert_eq!(turn.text, "hi");
/// # let _ = for_another_task;
/// # });
/// ```
pub trait Llm: Send + Sync {
    /// The provider's name, for logs and errors.
    fn provider(&self) -> &'static str;

    /// The model to ask for when the caller names none (an agent built
    /// without [`LlmOptions`]): the provider's general one, such as
    /// `claude-sonnet-4-5`. The default is `"default"`, for models that
    /// take any name.
    // Borrowed from `self`, not `'static`: a model may hold its default
    // in a field it was configured with.
    #[allow(clippy::unnecessary_literal_bound)]
    fn default_model(&self) -> &str {
        "default"
    }

    /// The most tokens a request to `model` may hold (its context window,
    /// less any output that shares it), where the provider documents the
    /// model's family: what an agent's context budget defaults to. `None`
    /// (the default) where it is not known.
    ///
    /// ```
    /// use kesoku_llm::{ClaudeLlm, GeminiLlm, Llm, OpenAiLlm};
    ///
    /// assert_eq!(ClaudeLlm::new("k").context_window("claude-sonnet-4-5"), Some(200_000));
    /// assert_eq!(OpenAiLlm::new("k").context_window("gpt-4o-mini"), Some(128_000));
    /// assert_eq!(GeminiLlm::new("k").context_window("gemini-2.5-pro"), Some(1_048_576));
    /// assert_eq!(OpenAiLlm::new("k").context_window("llama3.1:8b"), None);
    /// ```
    fn context_window(&self, model: &str) -> Option<u64> {
        let _ = model;
        None
    }

    /// The schema dialect of this model's structured-output mode, which a
    /// typed answer's schema ([`LlmOptions::output`]) is lowered to:
    /// what an agent checks before it asks for one. `None` (the default)
    /// for a model that takes any schema.
    fn output_dialect(&self) -> Option<kesoku_core::lowering::Dialect> {
        None
    }

    /// The address the model's requests go to (`https://api.anthropic.com`),
    /// for telemetry: a model call's span and metrics name its
    /// `server.address` and `server.port` from it. `None` (the default)
    /// for a model that is not reached over the network.
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// Sends the history and tools, and returns the model's turn.
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>>;

    /// Like [`complete`](Self::complete), giving the reply as it is
    /// written: text and call deltas, then usage, the stop reason, and
    /// [`StreamEvent::Done`] with the same turn `complete` returns.
    ///
    /// The default (for models that do not stream) completes, then gives
    /// the whole turn as events.
    fn stream<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> EventStream<'a> {
        let turn = self.complete(session_id, messages, tools, options);
        Box::pin(futures_util::stream::once(turn).flat_map(|result| {
            let events: Vec<Result<StreamEvent, LlmError>> = match result {
                Ok(turn) => events_of(turn).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            futures_util::stream::iter(events)
        }))
    }

    /// Whether [`stream`](Self::stream) streams (rather than completing,
    /// then giving the turn as events).
    fn streams(&self) -> bool {
        false
    }
}

/// Forwards every method to the model behind the pointer, so a model
/// chosen at run time (`Box<dyn Llm>`) or shared between agents
/// (`Arc<L>`) is an [`Llm`] itself.
macro_rules! forward_llm {
    ($($pointer:ident),*) => {$(
        impl<L: Llm + ?Sized> Llm for $pointer<L> {
            fn provider(&self) -> &'static str {
                (**self).provider()
            }

            fn default_model(&self) -> &str {
                (**self).default_model()
            }

            fn context_window(&self, model: &str) -> Option<u64> {
                (**self).context_window(model)
            }

            fn output_dialect(&self) -> Option<kesoku_core::lowering::Dialect> {
                (**self).output_dialect()
            }

            fn base_url(&self) -> Option<&str> {
                (**self).base_url()
            }

            fn complete<'a>(
                &'a self,
                session_id: &'a str,
                messages: &'a [Message],
                tools: &'a [ToolDeclaration],
                options: &'a LlmOptions,
            ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
                (**self).complete(session_id, messages, tools, options)
            }

            fn stream<'a>(
                &'a self,
                session_id: &'a str,
                messages: &'a [Message],
                tools: &'a [ToolDeclaration],
                options: &'a LlmOptions,
            ) -> EventStream<'a> {
                (**self).stream(session_id, messages, tools, options)
            }

            fn streams(&self) -> bool {
                (**self).streams()
            }
        }
    )*};
}

forward_llm!(Box, Arc);
