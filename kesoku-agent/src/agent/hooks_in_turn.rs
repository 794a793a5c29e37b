//! A turn's side of its hooks, with their IO: each asked in order, a
//! failure or a panic caught and named; what their answers mean for the
//! turn is the machine's (`machine/hooked.rs`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use kesoku_core::{ErrorChain, Message};
use kesoku_llm::{AssistantTurn, LlmOptions, ToolDeclaration};

use super::hooks::{HookFuture, Hooks, ModelRequest, ToolGate};
use super::machine::{Call, Run};
use super::outcome::{HookFailure, TurnOutcome};
use super::posts::panic_message;

/// Runs the future of the hook or guardrail `name` (made by `make`, which
/// may panic too): its error, or its panic, becomes the failure that
/// names it.
pub(crate) async fn guarded<'a, T>(
    name: &str,
    make: impl FnOnce() -> HookFuture<'a, T>,
) -> Result<T, HookFailure> {
    match AssertUnwindSafe(async move { make().await })
        .catch_unwind()
        .await
    {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(HookFailure::new(name, ErrorChain(&e).to_string())),
        Err(panic) => Err(HookFailure::new(
            name,
            format!("it panicked: {}", panic_message(&*panic)),
        )),
    }
}

/// Asks each hook before a model call, in order: each may change
/// `options`; the first to give a reply gives the model's.
pub(crate) async fn before_model(
    hooks: &[Arc<dyn Hooks>],
    session_id: &str,
    step: usize,
    messages: &[Message],
    tools: &[ToolDeclaration],
    options: &mut LlmOptions,
) -> Result<Option<AssistantTurn>, HookFailure> {
    for hook in hooks {
        let mut request = ModelRequest {
            session_id,
            step,
            messages,
            tools,
            options: &mut *options,
        };
        let reply = guarded(hook.name(), || hook.before_model(&mut request)).await?;
        if reply.is_some() {
            return Ok(reply);
        }
    }
    Ok(None)
}

/// Shows each hook the model's `reply`, in order.
pub(crate) async fn after_model(
    hooks: &[Arc<dyn Hooks>],
    session_id: &str,
    reply: &AssistantTurn,
) -> Result<(), HookFailure> {
    for hook in hooks {
        guarded(hook.name(), || hook.after_model(session_id, reply)).await?;
    }
    Ok(())
}

/// Asks each hook, in order, of each call of `run` before any runs: a
/// denied call is the machine's to answer, and the next hooks are not
/// asked of it; a rewrite is what the next hooks see, and what runs.
pub(crate) async fn before_tools(
    hooks: &[Arc<dyn Hooks>],
    session_id: &str,
    run: &mut Run,
) -> Result<(), HookFailure> {
    if hooks.is_empty() {
        return Ok(());
    }
    let calls: Vec<Call> = run.calls().to_vec();
    for (request, call) in calls {
        let mut request = request;
        let mut rewritten = false;
        for hook in hooks {
            match guarded(hook.name(), || hook.before_tool(session_id, &request)).await? {
                ToolGate::Allow => {}
                ToolGate::Deny(reason) => {
                    run.deny(&call.id, hook.name(), &reason);
                    break;
                }
                ToolGate::Rewrite(arguments) => {
                    request.arguments = arguments;
                    rewritten = true;
                }
            }
        }
        if rewritten {
            run.rewrite(&call.id, request.arguments);
        }
    }
    Ok(())
}

/// Shows each hook, in order, each of `results` with the call it answers
/// (as it ran), and lets it rewrite the result.
pub(crate) async fn after_tools(
    hooks: &[Arc<dyn Hooks>],
    calls: &[Call],
    results: &mut [Message],
) -> Result<(), HookFailure> {
    if hooks.is_empty() {
        return Ok(());
    }
    for result in results {
        let Some((request, _)) = calls
            .iter()
            .find(|(_, call)| result.parent_id.as_deref() == Some(call.id.as_str()))
        else {
            continue;
        };
        for hook in hooks {
            guarded(hook.name(), || hook.after_tool(request, &mut *result)).await?;
        }
    }
    Ok(())
}

/// Shows each hook the turn's `outcome`, in order. The turn is stored as
/// it ended: a failure is logged, and the next hooks are still shown it.
pub(crate) async fn turn_end(hooks: &[Arc<dyn Hooks>], session_id: &str, outcome: &TurnOutcome) {
    for hook in hooks {
        if let Err(failure) = guarded(hook.name(), || hook.turn_end(session_id, outcome)).await {
            tracing::warn!(session_id, error = %failure, "a hook failed at the end of a turn");
        }
    }
}
