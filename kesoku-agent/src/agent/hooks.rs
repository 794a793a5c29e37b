//! Hooks: user code at fixed points of every turn ([`Hooks`]), and what
//! it is shown there. What the turn does with their answers is the
//! turn's (`hooks_in_turn.rs`, `machine/hooked.rs`).

use std::future::Future;
use std::pin::Pin;

use kesoku_core::{Message, ToolRequest};
use kesoku_llm::{AssistantTurn, LlmOptions, ToolDeclaration};

use super::outcome::TurnOutcome;

/// What a [`Hooks`] method returns, boxed.
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, HookError>> + Send + 'a>>;

/// Why a hook failed: the turn then fails as it does when a model call
/// fails, its note naming the hook and this error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HookError(Box<dyn std::error::Error + Send + Sync>);

impl HookError {
    /// A hook's error, from any error or message.
    ///
    /// ```
    /// let e = kesoku_agent::HookError::new("the audit log is full");
    /// assert_eq!(e.to_string(), "the audit log is full");
    /// ```
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        HookError(error.into())
    }
}

/// A model call about to be made, as a hook sees it before
/// ([`Hooks::before_model`]).
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The model call this is in the turn, from 1.
    pub step: usize,
    /// What the model is sent, oldest first.
    pub messages: &'a [Message],
    /// The tools it is offered.
    pub tools: &'a [ToolDeclaration],
    /// The options of this call: a hook may change them (the next hooks
    /// and the model see the change; later calls start from the agent's).
    pub options: &'a mut LlmOptions,
}

/// What a hook says of a tool call before it runs
/// ([`Hooks::before_tool`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolGate {
    /// Run it (the next hook is asked too).
    Allow,
    /// Do not run it: the model reads this reason in the call's result.
    Deny(String),
    /// Run it with these arguments instead: they are checked against the
    /// tool's schema as the model's are, and the next hook sees them.
    Rewrite(serde_json::Value),
}

/// User code at fixed points of every turn: before and after each model
/// call, before and after each tool call, and at the turn's end. Every
/// method has a default that does nothing, so a hook writes only the
/// points it needs.
///
/// Set with [`AgentBuilder::hook`](super::AgentBuilder::hook); several run
/// in the order they were added. A hook that fails (returns an error) or
/// panics fails the turn as a failed model call does: its note names the
/// hook ([`name`](Self::name)) and the error, and each call of the step
/// still gets exactly one result.
///
/// ```
/// use kesoku_agent::{HookFuture, Hooks, ToolGate};
/// use kesoku_core::ToolRequest;
///
/// /// Never lets the model delete anything, and caps `limit` at 100.
/// struct Careful;
///
/// impl Hooks for Careful {
///     fn name(&self) -> &str {
///         "careful"
///     }
///
///     fn before_tool<'a>(&'a self, _session: &'a str, call: &'a ToolRequest) -> HookFuture<'a, ToolGate> {
///         Box::pin(async move {
///             if call.name.starts_with("delete") {
///                 return Ok(ToolGate::Deny("deleting is not allowed here".into()));
///             }
///             match call.arguments.get("limit").and_then(|l| l.as_u64()) {
///                 Some(limit) if limit > 100 => {
///                     let mut arguments = call.arguments.clone();
///                     arguments["limit"] = 100.into();
///                     Ok(ToolGate::Rewrite(arguments))
///                 }
///                 _ => Ok(ToolGate::Allow),
///             }
///         })
///     }
/// }
///
/// let agent = kesoku_agent::Agent::builder(kesoku_llm::ScriptedLlm::from_json(serde_json::json!([])).unwrap())
///     .hook(Careful)
///     .build()
///     .unwrap();
/// # drop(agent);
/// ```
pub trait Hooks: Send + Sync + 'static {
    /// The hook's name, as a failure's note gives it.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Before each model call: sees the request and may change its
    /// options; a reply given here is the model's, and the model is not
    /// called (nor the hooks after this one).
    fn before_model<'a>(
        &'a self,
        request: &'a mut ModelRequest<'_>,
    ) -> HookFuture<'a, Option<AssistantTurn>> {
        let _ = request;
        Box::pin(async { Ok(None) })
    }

    /// After each model call that gave a reply (or a hook's reply).
    fn after_model<'a>(
        &'a self,
        session_id: &'a str,
        reply: &'a AssistantTurn,
    ) -> HookFuture<'a, ()> {
        let _ = (session_id, reply);
        Box::pin(async { Ok(()) })
    }

    /// Before each tool call runs (after the approval policy, and a
    /// person's approval when one was asked): allow it, deny it with a
    /// reason, or rewrite its arguments.
    fn before_tool<'a>(
        &'a self,
        session_id: &'a str,
        call: &'a ToolRequest,
    ) -> HookFuture<'a, ToolGate> {
        let _ = (session_id, call);
        Box::pin(async { Ok(ToolGate::Allow) })
    }

    /// After each tool call that ran: sees its result, and may rewrite it
    /// (it is stored, and the model reads it, as rewritten). `call` has
    /// the arguments it ran with.
    fn after_tool<'a>(
        &'a self,
        call: &'a ToolRequest,
        result: &'a mut Message,
    ) -> HookFuture<'a, ()> {
        let _ = (call, result);
        Box::pin(async { Ok(()) })
    }

    /// At the end of each turn run here, once it is stored. The turn is
    /// over: a failure here is logged, and changes nothing stored.
    fn turn_end<'a>(&'a self, session_id: &'a str, outcome: &'a TurnOutcome) -> HookFuture<'a, ()> {
        let _ = (session_id, outcome);
        Box::pin(async { Ok(()) })
    }
}
