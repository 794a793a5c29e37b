//! A turn's side of approval, with its IO: the deadline stamped on calls
//! that wait for a person, the decisions read back when the turn resumes,
//! approved calls marked begun before they run (and settled after), and
//! the calls a user left waiting by moving on to a newer prompt.
//! What a decision means is `approval.rs`; when to ask is `machine.rs`.

use std::borrow::Cow;
use std::collections::HashMap;

use kesoku_core::store::{Seq, Store};
use kesoku_core::{GatewayError, Message, MessageType, Status};

use super::approval::{self, Verdict};
use super::machine::Call;
use super::outcome::AgentError;
use super::retry::{retried, retried_store};
use super::shared::Shared;
use super::view::{healing_result, orphans};

/// The statuses an approved call may have before it is marked begun:
/// any but `processing` (a front end may have marked it `delivered`, say).
const NOT_BEGUN: &[Status] = &[
    Status::Responded,
    Status::Delivered,
    Status::Pending,
    Status::Processed,
    Status::PendingAgent,
    Status::Error,
    Status::Interrupted,
    Status::AwaitingApproval,
];

/// Stamps `m`, if it is a call that waits for a person, with where its
/// prompt is stored (`prompt_seq`: a decision reads from there on) and
/// the agent's approval deadline (a sweep answers it as denied once the
/// deadline passed).
pub(crate) fn stamp(shared: &Shared, prompt_seq: Seq, m: &mut Message) {
    if !approval::is_held(m) {
        return;
    }
    m.metadata.insert(approval::AFTER.into(), prompt_seq.into());
    let Some(wait) = shared.approval_deadline else {
        return;
    };
    let deadline =
        chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
    m.metadata.insert(
        approval::DEADLINE.into(),
        deadline
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            .into(),
    );
}

/// The decisions on the calls of `prompt` that wait for a person, by call
/// message id: each read by its own id (decisions are never in the
/// model's view).
pub(crate) async fn decisions(
    shared: &Shared,
    prompt: &str,
    view: &[Message],
) -> Result<Vec<(String, Verdict)>, AgentError> {
    let store = shared.gateway.store();
    let mut out = Vec::new();
    // As the machine reads it: the prompt's calls come after it, and the
    // rest of a long view is not scanned.
    let from = view.iter().rposition(|m| m.id == prompt).unwrap_or(0);
    for call in orphans(&view[from..])
        .into_iter()
        .filter(|m| approval::is_held(m) && m.parent_id.as_deref() == Some(prompt))
    {
        let id = approval::decision_id(&call.id);
        let found = retried_store(shared.lease, "reading a decision", || store.get(&id)).await?;
        if let Some(d) = found {
            out.push((call.id.clone(), approval::verdict_of(&d)));
        }
    }
    Ok(out)
}

/// The decisions on the waiting calls of `history` that are not
/// `prompt`'s: calls of an older prompt, left by a user who moved on,
/// which [`heal`] answers as decided.
pub(crate) async fn decided_elsewhere(
    store: &dyn Store,
    history: &[Message],
    prompt: &str,
) -> Result<HashMap<String, Verdict>, AgentError> {
    let mut out = HashMap::new();
    for call in orphans(history)
        .into_iter()
        .filter(|m| approval::is_held(m) && m.parent_id.as_deref() != Some(prompt))
    {
        let found = store
            .get(&approval::decision_id(&call.id))
            .await
            .map_err(GatewayError::from)?;
        if let Some(d) = found {
            out.insert(call.id.clone(), approval::verdict_of(&d));
        }
    }
    Ok(out)
}

/// The results that heal `history`'s orphaned calls, and the older
/// prompts whose waiting calls they answer. A call of `prompt` that waits
/// for a person is its machine's to answer and is left alone; another
/// prompt's was left by a user who moved on, and is answered as
/// `decided` says (undecided, denied with its reason, or approved but
/// never run).
pub(crate) fn heal(
    history: &[Message],
    prompt: &str,
    decided: &HashMap<String, Verdict>,
) -> (Vec<Message>, Vec<String>) {
    let mut moved_on = Vec::new();
    let healed = orphans(history)
        .into_iter()
        .filter(|m| !(approval::is_held(m) && m.parent_id.as_deref() == Some(prompt)))
        .map(|m| {
            if approval::is_held(m) {
                moved_on.extend(m.parent_id.clone());
                approval::moved_on_result(m, decided.get(&m.id))
            } else {
                healing_result(m)
            }
        })
        .collect();
    moved_on.dedup();
    (healed, moved_on)
}

/// Ends the turns of `prompts`, whose waiting calls were all answered by
/// [`heal`]: paused, or put back by their decisions but not yet resumed,
/// they will not run.
pub(crate) async fn interrupt_moved_on(
    store: &dyn Store,
    prompts: Vec<String>,
) -> Result<(), AgentError> {
    for older in prompts {
        store
            .transition(
                &older,
                &[Status::AwaitingApproval, Status::PendingAgent],
                Status::Interrupted,
            )
            .await
            .map_err(GatewayError::from)?;
    }
    Ok(())
}

/// The approved calls a turn marked begun (`processing`) whose results
/// are not stored yet.
#[derive(Debug, Default)]
pub(crate) struct ApprovedInFlight(Vec<String>);

impl ApprovedInFlight {
    /// The calls to run of `calls`: an approved call is marked begun
    /// (→ `processing`, fenced by the lease) first, so a worker that dies
    /// running it leaves a mark, and the turn resumed elsewhere answers it
    /// as interrupted instead of running it again; a call already marked
    /// is left out (its result is then the machine's "interrupted").
    /// `calls` themselves (not a copy) when none was approved.
    pub(crate) async fn claim<'c>(
        &mut self,
        shared: &Shared,
        holder: &str,
        calls: &'c [Call],
    ) -> Result<Cow<'c, [Call]>, AgentError> {
        if !calls.iter().any(|call| approval::is_held(&call.1)) {
            return Ok(Cow::Borrowed(calls));
        }
        let mut run = Vec::with_capacity(calls.len());
        for call in calls {
            if approval::is_held(&call.1) {
                let begun = retried(shared.lease, "marking an approved call started", |_| {
                    shared.gateway.transition_leased(
                        &call.1.id,
                        NOT_BEGUN,
                        Status::Processing,
                        holder,
                    )
                })
                .await?;
                if !begun {
                    continue;
                }
                self.0.push(call.1.id.clone());
            }
            run.push(call.clone());
        }
        Ok(Cow::Owned(run))
    }

    /// The begun call `message` answers, if any: it is no longer waiting
    /// for its result, and goes back to `responded` once that is stored.
    pub(crate) fn answered(&mut self, message: &Message) -> Option<String> {
        if message.kind != MessageType::ToolResult {
            return None;
        }
        let parent = message.parent_id.as_deref()?;
        let i = self.0.iter().position(|id| id == parent)?;
        Some(self.0.swap_remove(i))
    }
}
