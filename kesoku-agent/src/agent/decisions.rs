//! The agent's side of a person's decisions: deciding a waiting call,
//! the deadline sweep, the calls waiting, and running a turn a decision
//! put back.

use kesoku_core::store::StoreError;
use kesoku_core::{GatewayError, Message, MessageType, Role, Status};

use super::Agent;
use super::approval::{self, ApprovalError, PendingApproval, Verdict};
use super::claim;
use super::outcome::{AgentError, TurnOutcome};

impl Agent {
    /// Decides the call `id` that waits for a person (a
    /// [`PendingApproval`]'s id): approved, it runs when the turn resumes;
    /// denied, its result is an error carrying the reason, which the model
    /// reads. The decision is stored through the gateway, so any process
    /// sharing the store may give it. Once every waiting call of the step
    /// is decided, the turn is put back for a worker to take
    /// ([`serve`](Self::serve), here or elsewhere, or
    /// [`resume`](Self::resume)); returns whether this decision did that.
    ///
    /// Refused, with nothing stored, for an unknown id, a message that is
    /// not a waiting call, a call answered already (it ran, or the user
    /// moved on), and a call decided already (whoever decided first).
    pub async fn decide(&self, id: &str, verdict: Verdict) -> Result<bool, ApprovalError> {
        let store = self.shared.gateway.store();
        let call = store
            .get(id)
            .await
            .map_err(GatewayError::from)?
            .ok_or_else(|| ApprovalError::Unknown { id: id.to_owned() })?;
        if !approval::is_asked(&call) {
            return Err(ApprovalError::NotWaiting { id: id.to_owned() });
        }
        let already = |d: Message| ApprovalError::AlreadyDecided {
            id: id.to_owned(),
            approved: approval::verdict_of(&d) == Verdict::Approve,
        };
        let decision_id = approval::decision_id(id);
        if let Some(d) = store.get(&decision_id).await.map_err(GatewayError::from)? {
            return Err(already(d));
        }
        // Only what follows the call's prompt, whatever the session's length.
        let after = approval::after(&call);
        let history = store
            .history_after(&call.session_id, after)
            .await
            .map_err(GatewayError::from)?;
        let expired = approval::expired(&call, chrono::Utc::now());
        let verdict = if expired {
            Verdict::Deny(Some(approval::DEADLINE_PASSED.into()))
        } else {
            verdict
        };
        if let Some((_, result)) = history
            .iter()
            .find(|(_, m)| m.kind == MessageType::ToolResult && m.parent_id.as_deref() == Some(id))
        {
            return Err(ApprovalError::Answered {
                id: id.to_owned(),
                result: result.content.clone(),
            });
        }
        match self
            .shared
            .gateway
            .post(approval::decision(&call, &verdict))
            .await
        {
            Ok(_) => {}
            // Another decider's came first (the ids are the same).
            Err(GatewayError::Store(StoreError::Duplicate { .. })) => {
                let first = store.get(&decision_id).await.map_err(GatewayError::from)?;
                return Err(
                    first.map_or_else(|| ApprovalError::NotWaiting { id: id.to_owned() }, already)
                );
            }
            Err(e) => return Err(e.into()),
        }
        let prompt = call.parent_id.as_deref().unwrap_or_default();
        let back = approval::put_back_if_decided(&**store, &call.session_id, prompt, after)
            .await
            .map_err(GatewayError::from)?;
        if back {
            // This process's `serve` takes it at once.
            self.shared.released.notify_one();
        }
        if expired {
            return Err(ApprovalError::Expired { id: id.to_owned() });
        }
        Ok(back)
    }

    /// Denies every waiting call whose approval deadline
    /// ([`AgentBuilder::approval_deadline`](super::AgentBuilder::approval_deadline)) has passed, and puts back
    /// every paused turn whose calls are all decided (also one whose
    /// decider could not put it back); how many calls it denied. [`serve`](Self::serve)
    /// calls it at each sweep; an agent that does not serve may call it
    /// now and then.
    pub async fn expire_approvals(&self) -> Result<usize, AgentError> {
        let store = self.shared.gateway.store();
        let paused = store
            .with_status(Status::AwaitingApproval)
            .await
            .map_err(GatewayError::from)?;
        let now = chrono::Utc::now();
        let mut denied = 0;
        for (seq, prompt) in paused {
            let history: Vec<Message> = store
                .history_after(&prompt.session_id, seq)
                .await
                .map_err(GatewayError::from)?
                .into_iter()
                .map(|(_, m)| m)
                .collect();
            for call in approval::waiting(&history, &prompt.id) {
                if !approval::expired(call, now) {
                    continue;
                }
                let verdict = Verdict::Deny(Some(approval::DEADLINE_PASSED.into()));
                match self
                    .shared
                    .gateway
                    .post(approval::decision(call, &verdict))
                    .await
                {
                    Ok(_) => denied += 1,
                    // Decided meanwhile.
                    Err(GatewayError::Store(StoreError::Duplicate { .. })) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // Also a turn whose decider stored its decision but could not
            // put it back (the store failed between the two writes).
            if approval::put_back_if_decided(&**store, &prompt.session_id, &prompt.id, seq)
                .await
                .map_err(GatewayError::from)?
            {
                self.shared.released.notify_one();
            }
        }
        Ok(denied)
    }

    /// Approves the waiting call `id`; see [`decide`](Self::decide).
    pub async fn approve(&self, id: &str) -> Result<bool, ApprovalError> {
        self.decide(id, Verdict::Approve).await
    }

    /// Denies the waiting call `id`, with a reason the model reads; see
    /// [`decide`](Self::decide).
    pub async fn deny(&self, id: &str, reason: Option<&str>) -> Result<bool, ApprovalError> {
        self.decide(id, Verdict::Deny(reason.map(str::to_owned)))
            .await
    }

    /// The calls of `session_id` that wait for a person's decision, as
    /// stored (what a front end in any process shows), oldest first.
    pub async fn pending_approvals(
        &self,
        session_id: &str,
    ) -> Result<Vec<PendingApproval>, AgentError> {
        let history = self.shared.gateway.history(session_id).await?;
        let store = self.shared.gateway.store();
        let mut out = Vec::new();
        let paused = history
            .iter()
            .filter(|m| m.role == Role::User && m.status == Status::AwaitingApproval);
        for prompt in paused {
            for call in approval::waiting(&history, &prompt.id) {
                let decided = store
                    .get(&approval::decision_id(&call.id))
                    .await
                    .map_err(GatewayError::from)?;
                if decided.is_none() {
                    out.push(PendingApproval::of(call));
                }
            }
        }
        Ok(out)
    }

    /// Runs here the turn of `prompt_id` that a decision put back, when no
    /// worker took it first (for an agent that does not
    /// [`serve`](Self::serve)); `None` when it is not waiting to be taken.
    pub async fn resume(&self, prompt_id: &str) -> Result<Option<TurnOutcome>, AgentError> {
        let store = self.shared.gateway.store();
        let Some(prompt) = store.get(prompt_id).await.map_err(GatewayError::from)? else {
            return Ok(None);
        };
        if prompt.status != Status::PendingAgent || prompt.role != Role::User {
            return Ok(None);
        }
        let seq = store
            .history_after(&prompt.session_id, 0)
            .await
            .map_err(GatewayError::from)?
            .into_iter()
            .find(|(_, m)| m.id == prompt.id)
            .map(|(seq, _)| seq);
        let Some(seq) = seq else { return Ok(None) };
        self.shared
            .sessions
            .saw_user_message(&prompt.session_id, seq);
        claim::take(&self.shared, prompt, seq).await
    }
}
