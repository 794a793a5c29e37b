//! A turn's side of approval, with its IO: the decisions read back when
//! the turn resumes, approved calls marked begun before they run (and
//! settled after), and the turns of prompts a user moved on from ended.
//! What a decision means is `approval.rs`; when to ask, what a held call
//! is stamped with, and what a call begun elsewhere gets is `machine.rs`;
//! what a call left waiting gets is `heal.rs`.

use kesoku_core::store::Store;
use kesoku_core::{GatewayError, Message, MessageType, Status};

use super::approval::{self, Verdict};
use super::machine::Run;
use super::outcome::AgentError;
use super::retry::{retried, retried_store};
use super::shared::Shared;
use super::view::orphans;

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

/// The decisions on the calls of `history` left waiting for a person,
/// by call message id: each read by its own id (decisions are never in
/// the model's view). The prompt's own calls are the turn's to resume;
/// an older prompt's were left by a user who moved on (`heal.rs`).
pub(crate) async fn decisions(
    shared: &Shared,
    history: &[Message],
) -> Result<Vec<(String, Verdict)>, AgentError> {
    let store = shared.gateway.store();
    let mut out = Vec::new();
    for call in orphans(history)
        .into_iter()
        .filter(|m| approval::is_held(m))
    {
        let id = approval::decision_id(&call.id);
        let found = retried_store(shared.lease, "reading a decision", || store.get(&id)).await?;
        if let Some(d) = found {
            out.push((call.id.clone(), approval::verdict_of(&d)));
        }
    }
    Ok(out)
}

/// Ends the turns of `prompts`, whose waiting calls were all answered by
/// `heal.rs`: paused, or put back by their decisions but not yet resumed,
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
    /// Marks each approved call of `run` begun (→ `processing`, fenced by
    /// the lease) before any runs, so a worker that dies running it
    /// leaves a mark, and the turn resumed elsewhere answers it as
    /// interrupted instead of running it again. A call found marked
    /// already is the machine's to answer ([`Run::begun_elsewhere`]).
    pub(crate) async fn begin(
        &mut self,
        shared: &Shared,
        holder: &str,
        run: &mut Run,
    ) -> Result<(), AgentError> {
        let approved: Vec<String> = run.approved().map(|m| m.id.clone()).collect();
        for id in approved {
            let begun = retried(shared.lease, "marking an approved call started", |_| {
                shared
                    .gateway
                    .transition_leased(&id, NOT_BEGUN, Status::Processing, holder)
            })
            .await?;
            if begun {
                self.0.push(id);
            } else {
                run.begun_elsewhere(&id);
            }
        }
        Ok(())
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
