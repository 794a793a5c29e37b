//! A turn's writes before its last: its posts, each fenced by its lease
//! and tried again while the store fails for a moment; its prompt
//! settled; how a turn ends, as its lease keeper needs to know
//! ([`Ending`]); and the end of a turn that panicked.

use std::sync::atomic::AtomicBool;

use kesoku_core::store::{Seq, StoreError};
use kesoku_core::{GatewayError, Message, MessageType, Role, Status};

use super::outcome::{AgentError, TurnOutcome, TurnStatus};
use super::retry::retried;
use super::shared::Shared;
use super::tail::whole;
use super::view::{healing_result, orphans};

/// A panic's message, when it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// How a turn ends, as its lease keeper (`claim.rs`) needs to know: once
/// the turn's last write is on its way, that write releases the lease,
/// so a renewal that finds it gone is not a loss; and whether it did.
#[derive(Debug, Default)]
pub(crate) struct Ending {
    pub(crate) started: AtomicBool,
    pub(crate) released: AtomicBool,
}

/// Posts a turn's `message`, fenced by `holder`'s lease; tried again while
/// the store fails for a moment (within a lease). A try that finds the
/// message stored already after one that failed had it stored: the
/// failure came after the commit.
/// Its `Seq`, unless a try found it stored already.
pub(crate) async fn post(
    shared: &Shared,
    holder: &str,
    message: &Message,
) -> Result<Option<Seq>, AgentError> {
    post_tried(shared, holder, message, false).await
}

/// [`post`] after a try that failed already (a turn's last write, say).
pub(crate) async fn post_again(
    shared: &Shared,
    holder: &str,
    message: &Message,
) -> Result<Option<Seq>, AgentError> {
    post_tried(shared, holder, message, true).await
}

async fn post_tried(
    shared: &Shared,
    holder: &str,
    message: &Message,
    tried: bool,
) -> Result<Option<Seq>, AgentError> {
    let seq = retried(
        shared.lease,
        "posting a turn's message",
        |again| async move {
            match shared.gateway.post_leased_ref(message, holder).await {
                Err(GatewayError::Store(StoreError::Duplicate { .. })) if again || tried => {
                    Ok(None)
                }
                other => other.map(Some),
            }
        },
    )
    .await?;
    Ok(seq)
}

/// The statuses a turn's prompt is settled from: `processing` (it is
/// ours), or `pending_agent` when it was put back meanwhile.
pub(crate) const SETTLED_FROM: &[Status] = &[Status::Processing, Status::PendingAgent];

/// Sets the status of the turn's user message `id` to `to` (from
/// `processing`, or `pending_agent` when it was put back meanwhile),
/// fenced by `holder`'s lease; tried again while the store fails for a
/// moment (a try after a lost answer finds it set, and changes nothing).
pub(crate) async fn settle(
    shared: &Shared,
    holder: &str,
    id: &str,
    to: Status,
) -> Result<(), AgentError> {
    retried(shared.lease, "settling a turn's prompt", |_| {
        shared
            .gateway
            .transition_leased(id, SETTLED_FROM, to, holder)
    })
    .await?;
    Ok(())
}

/// Ends a turn that panicked (in a tool's code the runner did not guard,
/// a model backend, a stream's decoder, or the agent itself): every call
/// it left without a result gets one, an assistant message says what
/// happened, and the prompt is settled `error`, all fenced by the lease
/// as the turn's own posts are. Without this the prompt stayed
/// `processing`, and was resumed (and panicked again) lease after lease.
/// `prompt` is the turn's user message, of `session`.
pub(crate) async fn end_panicked(
    shared: &Shared,
    holder: &str,
    session: &str,
    prompt: &str,
    panic: &str,
) -> Result<TurnOutcome, AgentError> {
    tracing::error!(
        session,
        panic,
        "a turn panicked; its prompt is settled as failed"
    );
    let store = shared.gateway.store();
    // The view this process kept of the session may be half updated.
    drop(shared.sessions.take_view(session));
    let history = whole(&**store, session, shared.lease).await?;
    let mut posted = Vec::new();
    let messages: Vec<Message> = history.into_iter().map(|(_, m)| m).collect();
    for result in orphans(&messages).into_iter().map(healing_result) {
        post(shared, holder, &result).await?;
        posted.push(result);
    }
    let text = format!("This turn stopped on an internal error (a panic): {panic}");
    let mut m = Message::new(session, Role::Assistant, MessageType::Text, text)
        .with_sender("agent")
        .with_status(Status::Pending)
        .with_parent(prompt);
    m.metadata
        .insert("error".into(), format!("panic: {panic}").into());
    post(shared, holder, &m).await?;
    posted.push(m);
    settle(shared, holder, prompt, Status::Error).await?;
    Ok(TurnOutcome {
        status: TurnStatus::Failed,
        answer: None,
        messages: posted,
        error: None,
        hook_error: None,
        tripped: None,
        nested: Vec::new(),
    })
}
