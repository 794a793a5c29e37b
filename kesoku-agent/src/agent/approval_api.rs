//! The agent's side of a person's decisions: deciding a waiting call,
//! the deadline sweep, the calls waiting, and running a turn a decision
//! put back.

use kesoku_core::store::StoreError;
use kesoku_core::{GatewayError, Message, MessageType, Role, Status};

use super::Agent;
use super::approval::{self, ApprovalError, Decided, PendingApproval, Verdict};
use super::claim;
use super::nested::Lineage;
use super::outcome::{AgentError, ResumeError, TurnOutcome};

impl Agent {
    /// Decides the call `id` that waits for a person (a
    /// [`PendingApproval`]'s id): approved, it runs when the turn resumes;
    /// denied, its result is an error carrying the reason, which the model
    /// reads. The decision is stored through the gateway, so any process
    /// sharing the store may give it. Once every waiting call of the turn
    /// is decided, the turn is put back for a worker to take
    /// ([`serve`](Self::serve), here or elsewhere, or
    /// [`resume`](Self::resume)), and this says [`Decided::Ready`].
    ///
    /// Refused, with nothing stored, for an unknown id, a message that is
    /// not a waiting call, a call answered already (it ran, or the user
    /// moved on), and a call decided already (whoever decided first). Past
    /// the call's deadline it is refused as
    /// [`Expired`](ApprovalError::Expired), and the deadline's denial is
    /// stored instead.
    ///
    /// A front end acting for one session's user should use
    /// [`decide_in`](Self::decide_in), which refuses another session's
    /// calls.
    pub async fn decide(&self, id: &str, verdict: Verdict) -> Result<Decided, ApprovalError> {
        self.decide_call(None, id, verdict).await
    }

    /// [`decide`](Self::decide), for a call of `session` only (or inside an
    /// agent its turns called, as [`pending_approvals`](Self::pending_approvals)
    /// lists it, with its path): another session's call is refused as
    /// [`NotInSession`](ApprovalError::NotInSession), exactly as an unknown
    /// id is, so a user cannot decide (or probe for) calls outside their
    /// session.
    ///
    /// ```
    /// use kesoku_agent::{Agent, ApprovalError, Verdict};
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let agent = Agent::builder(ScriptedLlm::from_json(serde_json::json!([])).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let err = agent.decide_in("s", "no-such-call", Verdict::Approve).await.unwrap_err();
    /// assert!(matches!(err, ApprovalError::NotInSession { .. }));
    /// assert_eq!(err.to_string(), "session `s` has no tool call `no-such-call`");
    /// # });
    /// ```
    pub async fn decide_in(
        &self,
        session: &str,
        id: &str,
        verdict: Verdict,
    ) -> Result<Decided, ApprovalError> {
        self.decide_call(Some(session), id, verdict).await
    }

    /// Stores `verdict` on the held call `id` (in `session`, when given),
    /// and puts its turn back once every held call of its step is decided.
    async fn decide_call(
        &self,
        session: Option<&str>,
        id: &str,
        verdict: Verdict,
    ) -> Result<Decided, ApprovalError> {
        let store = self.shared.gateway.store();
        let call = self.undecided_call(session, id).await?;
        let decision_id = approval::decision_id(id);
        let after = approval::after(&call);
        let expired = approval::expired(&call, chrono::Utc::now());
        let verdict = if expired {
            Verdict::Deny(Some(approval::DEADLINE_PASSED.into()))
        } else {
            verdict
        };
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
                return Err(first.map_or_else(
                    || ApprovalError::NotWaiting { id: id.to_owned() },
                    |d| already_decided(id, &d),
                ));
            }
            Err(e) => return Err(e.into()),
        }
        let prompt = call.parent_id.clone().unwrap_or_default();
        let found = approval::put_back_if_decided(&**store, &call.session_id, &prompt, after)
            .await
            .map_err(GatewayError::from)?;
        if found.put_back {
            // This process's `serve` takes it at once.
            self.shared.released.notify_one();
        }
        // A call of an agent called as a tool: the turns above it wait
        // too, and the top one is what resumes them all.
        let (prompt, undecided) = self.put_back_above(&prompt, found.undecided).await?;
        let found = approval::PutBack {
            undecided,
            put_back: found.put_back,
        };
        if expired {
            return Err(ApprovalError::Expired { id: id.to_owned() });
        }
        Ok(if found.undecided == 0 {
            Decided::Ready { prompt_id: prompt }
        } else {
            Decided::Waiting {
                prompt_id: prompt,
                undecided: found.undecided,
            }
        })
    }

    /// Walks up from the nested `prompt` (whose turn waits for
    /// `undecided` decisions), putting back each turn above it that waits
    /// for nothing more; the top prompt, and the decisions it waits for.
    /// For a prompt that is not nested, itself.
    async fn put_back_above(
        &self,
        prompt: &str,
        mut undecided: usize,
    ) -> Result<(String, usize), GatewayError> {
        let store = self.shared.gateway.store();
        let mut id = prompt.to_owned();
        while let Some(lineage) = store.get(&id).await?.as_ref().and_then(Lineage::of) {
            let found = approval::put_back_if_decided(
                &**store,
                &lineage.parent_session,
                &lineage.parent_prompt,
                lineage.parent_after,
            )
            .await?;
            if found.put_back {
                self.shared.released.notify_one();
            }
            undecided = found.undecided;
            id = lineage.parent_prompt;
        }
        Ok((id, undecided))
    }

    /// Whether `call` is of `session`: in it, or inside an agent a turn
    /// of it called (at any depth, as [`pending_approvals`](Self::pending_approvals)
    /// lists it), by the lineage its nested prompt stores.
    async fn of_session(&self, call: &Message, session: &str) -> Result<bool, GatewayError> {
        if call.session_id == session {
            return Ok(true);
        }
        let Some(prompt) = call.parent_id.as_deref() else {
            return Ok(false);
        };
        let prompt = self.shared.gateway.store().get(prompt).await?;
        let lineage = prompt
            .filter(|p| p.session_id == call.session_id)
            .as_ref()
            .and_then(Lineage::of);
        Ok(lineage.is_some_and(|l| {
            l.root_session == session || l.path.iter().any(|v| v.session_id == session)
        }))
    }

    /// The held call `id` (in `session`, when given), while no decision
    /// and no result answers it yet.
    async fn undecided_call(
        &self,
        session: Option<&str>,
        id: &str,
    ) -> Result<Message, ApprovalError> {
        let store = self.shared.gateway.store();
        let mut call = store.get(id).await.map_err(GatewayError::from)?;
        if let (Some(c), Some(s)) = (&call, session)
            && !self.of_session(c, s).await?
        {
            call = None;
        }
        let Some(call) = call else {
            return Err(match session {
                Some(session) => ApprovalError::NotInSession {
                    id: id.to_owned(),
                    session: session.to_owned(),
                },
                None => ApprovalError::Unknown { id: id.to_owned() },
            });
        };
        if !approval::is_held(&call) {
            return Err(ApprovalError::NotWaiting { id: id.to_owned() });
        }
        let decision_id = approval::decision_id(id);
        if let Some(d) = store.get(&decision_id).await.map_err(GatewayError::from)? {
            return Err(already_decided(id, &d));
        }
        // Only what follows the call's prompt, whatever the session's length.
        let history = store
            .history_after(&call.session_id, approval::after(&call))
            .await
            .map_err(GatewayError::from)?;
        if let Some((_, result)) = history
            .iter()
            .find(|(_, m)| m.kind == MessageType::ToolResult && m.parent_id.as_deref() == Some(id))
        {
            return Err(ApprovalError::Answered {
                id: id.to_owned(),
                result: result.content.clone(),
            });
        }
        Ok(call)
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
            let found =
                approval::put_back_if_decided(&**store, &prompt.session_id, &prompt.id, seq)
                    .await
                    .map_err(GatewayError::from)?;
            if found.put_back {
                self.shared.released.notify_one();
                self.put_back_above(&prompt.id, 0).await?;
            }
        }
        Ok(denied)
    }

    /// Approves the waiting call `id`; see [`decide`](Self::decide).
    pub async fn approve(&self, id: &str) -> Result<Decided, ApprovalError> {
        self.decide(id, Verdict::Approve).await
    }

    /// Denies the waiting call `id`, with a reason the model reads; see
    /// [`decide`](Self::decide).
    pub async fn deny(&self, id: &str, reason: Option<&str>) -> Result<Decided, ApprovalError> {
        self.decide(id, Verdict::Deny(reason.map(str::to_owned)))
            .await
    }

    /// Approves the waiting call `id` of `session`; see
    /// [`decide_in`](Self::decide_in).
    pub async fn approve_in(&self, session: &str, id: &str) -> Result<Decided, ApprovalError> {
        self.decide_in(session, id, Verdict::Approve).await
    }

    /// Denies the waiting call `id` of `session`, with a reason the model
    /// reads; see [`decide_in`](Self::decide_in).
    pub async fn deny_in(
        &self,
        session: &str,
        id: &str,
        reason: Option<&str>,
    ) -> Result<Decided, ApprovalError> {
        self.decide_in(session, id, Verdict::Deny(reason.map(str::to_owned)))
            .await
    }

    /// The calls of `session_id` that wait for a person's decision, as
    /// stored (what a front end in any process shows), oldest first. A
    /// call past its deadline is left out: it can no longer be approved,
    /// and the next sweep ([`expire_approvals`](Self::expire_approvals),
    /// which [`serve`](Self::serve) runs) denies it.
    pub async fn pending_approvals(
        &self,
        session_id: &str,
    ) -> Result<Vec<PendingApproval>, AgentError> {
        let history = self.shared.gateway.history(session_id).await?;
        let mut out = Vec::new();
        self.pending_in(&history, &[], chrono::Utc::now(), &mut out)
            .await?;
        Ok(out)
    }

    /// The waiting calls of the paused turns in `history` (a session
    /// reached through `path`), and those of the agents they called, at
    /// every depth, into `out`.
    async fn pending_in(
        &self,
        history: &[Message],
        path: &[kesoku_core::Via],
        now: chrono::DateTime<chrono::Utc>,
        out: &mut Vec<PendingApproval>,
    ) -> Result<(), AgentError> {
        let store = self.shared.gateway.store();
        let paused = history
            .iter()
            .filter(|m| m.role == Role::User && m.status == Status::AwaitingApproval);
        for prompt in paused {
            for call in approval::waiting(history, &prompt.id) {
                if approval::expired(call, now) {
                    continue;
                }
                let decided = store
                    .get(&approval::decision_id(&call.id))
                    .await
                    .map_err(GatewayError::from)?;
                if decided.is_none() {
                    let mut pending = PendingApproval::of(call);
                    pending.path = path.to_vec();
                    out.push(pending);
                }
            }
            let children = approval::paused_children(&**store, history, &prompt.id)
                .await
                .map_err(GatewayError::from)?;
            for child in children {
                let Some(via) = Lineage::of(&child).and_then(|l| l.path.last().cloned()) else {
                    continue;
                };
                let nested = self.shared.gateway.history(&child.session_id).await?;
                let mut deeper = path.to_vec();
                deeper.push(via);
                Box::pin(self.pending_in(&nested, &deeper, now, out)).await?;
            }
        }
        Ok(())
    }

    /// Runs here the turn of `prompt_id` that the decisions put back
    /// (for an agent that does not [`serve`](Self::serve), or before its
    /// workers take it). Each case where no turn runs is its own
    /// [`ResumeError`]: an unknown prompt, decisions still missing, a
    /// turn that is not waiting (it ended, a newer prompt interrupted it,
    /// or it is running), and one another worker took first.
    ///
    /// In another process than the one that paused, a
    /// [`ScriptedLlm`](kesoku_llm::ScriptedLlm) must be built
    /// [`per_prompt`](kesoku_llm::ScriptedLlm::per_prompt), so its script
    /// follows the prompt whatever process runs it.
    pub async fn resume(&self, prompt_id: &str) -> Result<TurnOutcome, ResumeError> {
        self.resume_prompt(None, prompt_id).await
    }

    /// [`resume`](Self::resume), for a prompt of `session` only: another
    /// session's is refused as [`ResumeError::Unknown`], as an unknown id
    /// is.
    pub async fn resume_in(
        &self,
        session: &str,
        prompt_id: &str,
    ) -> Result<TurnOutcome, ResumeError> {
        self.resume_prompt(Some(session), prompt_id).await
    }

    async fn resume_prompt(
        &self,
        session: Option<&str>,
        prompt_id: &str,
    ) -> Result<TurnOutcome, ResumeError> {
        let store = self.shared.gateway.store();
        let unknown = || ResumeError::Unknown {
            prompt: prompt_id.to_owned(),
            session: session.map(str::to_owned),
        };
        let prompt = store
            .get(prompt_id)
            .await
            .map_err(GatewayError::from)?
            .filter(|p| p.role == Role::User && session.is_none_or(|s| p.session_id == s))
            .ok_or_else(unknown)?;
        let history = store
            .history_after(&prompt.session_id, 0)
            .await
            .map_err(GatewayError::from)?;
        let Some(seq) = history
            .iter()
            .find(|(_, m)| m.id == prompt.id)
            .map(|(seq, _)| *seq)
        else {
            return Err(unknown());
        };
        match prompt.status {
            Status::PendingAgent => {}
            // Decided, but not put back (its decider failed between its
            // two writes): put back here, as a sweep would.
            Status::AwaitingApproval => {
                let found =
                    approval::put_back_if_decided(&**store, &prompt.session_id, &prompt.id, seq)
                        .await
                        .map_err(GatewayError::from)?;
                if found.undecided > 0 {
                    return Err(ResumeError::Undecided {
                        prompt: prompt.id,
                        undecided: found.undecided,
                    });
                }
            }
            status => {
                return Err(ResumeError::NotWaiting {
                    prompt: prompt.id,
                    status,
                });
            }
        }
        self.shared
            .sessions
            .saw_user_message(&prompt.session_id, seq);
        let id = prompt.id.clone();
        // A nested prompt's turn is its own agent's.
        let shared = self.runner_of(&prompt).map_err(AgentError::Config)?;
        claim::take(&shared, prompt, seq)
            .await?
            .ok_or(ResumeError::Taken { prompt: id })
    }
}

/// The error for deciding `id` again, which `decision` decided.
fn already_decided(id: &str, decision: &Message) -> ApprovalError {
    ApprovalError::AlreadyDecided {
        id: id.to_owned(),
        approved: approval::verdict_of(decision) == Verdict::Approve,
    }
}
