//! A turn's side of its hooks, with their IO: each asked in order, a
//! failure or a panic caught and named; what their answers mean for the
//! turn is the machine's (`machine/hooked.rs`).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use kesoku_core::{ErrorChain, Message, MessageType, Role, keys};
use kesoku_llm::{AssistantTurn, LlmOptions, ToolDeclaration};
use serde_json::Value;

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
/// (as it ran), and lets it rewrite the result: its content, its status
/// and metadata, never what pairs it with its call (its id, the call it
/// answers, its kind, role and session, the call's id and tool name), so
/// that each call keeps exactly one result whatever a hook writes.
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
        let pairing = Pairing::of(result);
        for hook in hooks {
            let rewritten = guarded(hook.name(), || hook.after_tool(request, &mut *result)).await;
            pairing.restore(result);
            rewritten?;
        }
    }
    Ok(())
}

/// What pairs a result with its call.
struct Pairing {
    id: String,
    parent_id: Option<String>,
    kind: MessageType,
    role: Role,
    session_id: String,
    call_id: Option<Value>,
    tool_name: Option<Value>,
}

impl Pairing {
    fn of(m: &Message) -> Self {
        Pairing {
            id: m.id.clone(),
            parent_id: m.parent_id.clone(),
            kind: m.kind,
            role: m.role,
            session_id: m.session_id.clone(),
            call_id: m.metadata.get(keys::CALL_ID).cloned(),
            tool_name: m.metadata.get(keys::TOOL_NAME).cloned(),
        }
    }

    /// Puts it back on `m`, whatever a hook did to it.
    fn restore(&self, m: &mut Message) {
        m.id.clone_from(&self.id);
        m.parent_id.clone_from(&self.parent_id);
        m.kind = self.kind;
        m.role = self.role;
        m.session_id.clone_from(&self.session_id);
        for (key, value) in [
            (keys::CALL_ID, &self.call_id),
            (keys::TOOL_NAME, &self.tool_name),
        ] {
            match value {
                Some(value) => {
                    m.metadata.insert(key.into(), value.clone());
                }
                None => {
                    m.metadata.remove(key);
                }
            }
        }
    }
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
