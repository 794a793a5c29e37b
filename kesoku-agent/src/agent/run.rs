//! One turn's IO: load the history (only what is new since the session's
//! last turn here, see `sessions.rs`), post what answers the calls it left
//! without results (as `heal.rs` decides), then follow the turn's rules
//! (`machine.rs`): post what they say to post, ask the model, run the
//! calls, and settle the prompt as they decide.
//!
//! Interruption is immediate: the model call in flight is dropped, calls
//! not started get aborted results, and calls waiting are cancelled
//! through the context's token; every call still gets exactly one result.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use kesoku_core::store::Seq;
use kesoku_core::{CancellationToken, GatewayError, Message, Role, Status, Tool};
use tracing::Instrument;

use kesoku_core::ErrorChain;

use super::approval::{self, Verdict};
use super::approval_in_turn::{self, ApprovedInFlight};
use super::clock::Clock;
use super::fit;
use super::guardrails::GuardInput;
use super::heal::heal;
use super::machine::{Ask, Decision, Finish, Machine, Next, Setup};
use super::nested::{NESTED, Position};
use super::outcome::{AgentError, TurnOutcome, TurnStatus};
use super::posts::{Ending, SETTLED_FROM, post, post_again, settle};
use super::retry::{is_transient, retried, retried_store};
use super::sessions::{Slot, ViewAtClaim};
use super::shared::Shared;
use super::tail;
use super::view::{self, View};
use super::{guardrails_in_turn, hooks_in_turn};
use crate::telemetry;
use kesoku_llm::ToolDeclaration;

/// Runs the turn of the claimed user `message` (at `seq`) to its end,
/// from `at_claim` when its claim brought the session's view up to date.
pub(crate) async fn turn(
    shared: &Shared,
    slot: &Slot,
    holder: &str,
    message: Message,
    seq: Seq,
    at_claim: Option<ViewAtClaim>,
    ending: &Ending,
) -> Result<Turned, AgentError> {
    let span = telemetry::turn_span(
        &shared.name,
        shared.llm.provider(),
        &message.session_id,
        &message.id,
    );
    slot.set_running(seq);
    // A typed prompt's shape is asked for on each of its model calls.
    let answer_shape = super::typed::answer_shape(&message);
    let options = answer_shape
        .as_ref()
        .map(|(output, _)| shared.options.clone().with_output(output.clone()));
    let mut turn = Turn {
        options,
        answer_shape,
        shared,
        slot,
        holder,
        user: message,
        seq,
        at_claim,
        stored: None,
        posted: Vec::new(),
        in_flight: ApprovedInFlight::default(),
        cancel: CancellationToken::new(),
        declarations: Arc::default(),
        overhead: 0,
        steps: 0,
        input_checked: std::sync::atomic::AtomicBool::new(false),
        held: std::sync::Mutex::new(None),
        ending,
        position: None,
        visited: Vec::new(),
        handing_to: None,
        stamps: false,
        unknown_owner: None,
        nested_waiting: Vec::new(),
    };
    if message_is_nested(&turn.user) {
        // Read only when what the turn does is shown (or its tools run
        // agents, `run/tools.rs`): a lineage costs a parse.
        let upstream = shared.upstreams.get(&turn.user.session_id);
        if upstream
            .as_ref()
            .unwrap_or(&shared.gateway)
            .has_delta_listeners()
        {
            turn.position = Some(Arc::new(turn.place()));
        }
    }
    let turned = turn.run().instrument(span.clone()).await;
    let outcome = match turned {
        Ok(Turned::Over(outcome)) => Ok(outcome),
        // The agent it was handed to goes on with it.
        handed @ Ok(Turned::Handed { .. }) => return handed,
        Err(e) => Err(e),
    };
    slot.set_running(0);
    if let Ok(outcome) = &outcome
        && !shared.hooks.is_empty()
    {
        hooks_in_turn::turn_end(&shared.hooks, &turn.user.session_id, outcome).await;
    }
    // Once, at the end: a bridge would keep each value recorded.
    span.record("kesoku.steps", telemetry::int(turn.steps));
    match &outcome {
        Ok(o) => {
            span.record("kesoku.status", tracing::field::debug(o.status));
            if o.status == TurnStatus::Failed {
                span.record("error.type", "turn_failed");
                telemetry::record_status_error(&span, "the turn failed");
            }
        }
        Err(e) => {
            span.record("error.type", "agent_error");
            telemetry::record_status_error(&span, &ErrorChain(e).to_string());
        }
    }
    outcome.map(Turned::Over)
}

/// Why a model call gave no reply.
enum CallError {
    /// The model's (after the backend's retries).
    Model(kesoku_llm::LlmError),
    /// A hook's, before or after it (or a guardrail's).
    Hook(super::outcome::HookFailure),
    /// An input guardrail's objection (its name, and why), while it was
    /// in flight.
    Tripped(String, String),
}

/// How a turn's run here ended: over, or handed (by a handoff) to
/// another agent, which goes on with it under the same lease; with what
/// it posted.
pub(crate) enum Turned {
    Over(TurnOutcome),
    Handed {
        to: Arc<Shared>,
        posted: Vec<Message>,
        /// The prompt, for the agent it was handed to.
        user: Message,
    },
}

/// How following the machine's decisions ended: the turn is over (how,
/// with the posts of the last write), or handed to another agent.
#[expect(
    clippy::large_enum_variant,
    reason = "one a turn, moved once: boxing would allocate for every turn"
)]
enum Driven {
    Over(Finish, Vec<Message>),
    Handed(Arc<Shared>),
}

struct Turn<'a> {
    shared: &'a Shared,
    /// The model options of a typed turn (the agent's, with the answer's
    /// shape); `None` for the agent's own.
    options: Option<kesoku_llm::LlmOptions>,
    /// The shape a typed prompt asks for, with its repairs, read once.
    answer_shape: Option<(kesoku_core::OutputSchema, usize)>,
    slot: &'a Slot,
    /// The session's lease holder: every post is fenced by it.
    holder: &'a str,
    user: Message,
    seq: Seq,
    /// The view its claim brought up to date, until the turn loads it.
    at_claim: Option<ViewAtClaim>,
    /// The seqs the store gave what the turn stored after loading its
    /// view, in order; `None` once one is not known.
    stored: Option<Vec<Seq>>,
    posted: Vec<Message>,
    /// Approved calls marked begun (`processing`) whose result is not yet
    /// stored: each goes back to `responded` once it is.
    in_flight: ApprovedInFlight,
    /// Cancelled on interruption: tools waiting on it stop.
    cancel: CancellationToken,
    /// The tools as the model sees them this turn (a live registry is
    /// read once, as the turn starts).
    declarations: Arc<Vec<ToolDeclaration>>,
    /// The estimated tokens of the instructions and the tools.
    overhead: u64,
    /// How many model calls the turn asked for so far.
    steps: usize,
    /// Whether the input guardrails were asked of the prompt (once a turn).
    input_checked: std::sync::atomic::AtomicBool,
    /// What the model streamed while the input guardrails check the
    /// prompt: published once they pass; `None` when nothing is held.
    held: std::sync::Mutex<Option<Vec<kesoku_core::Delta>>>,
    ending: &'a Ending,
    /// A nested turn's place (what it does is shown on the top session);
    /// `None` at the top.
    position: Option<Arc<Position>>,
    /// The agents this turn was handed to, in order, from the one that
    /// took it (`run/handoff.rs`); empty until a handoff.
    visited: Vec<String>,
    /// The agent the step's handoff goes to, once its results are posted.
    handing_to: Option<Arc<Shared>>,
    /// Whether the turn's posts name their agent.
    stamps: bool,
    /// Why no agent here may answer (its session was handed to one
    /// unknown here).
    unknown_owner: Option<String>,
    /// What the agents this turn called as tools left waiting for a person.
    nested_waiting: Vec<super::approval::PendingApproval>,
}

impl Turn<'_> {
    /// Where this turn stands among nested agents; a nested turn's events
    /// go to its caller's gateway while the call runs here.
    fn place(&self) -> Position {
        let upstream = message_is_nested(&self.user)
            .then(|| self.shared.upstreams.get(&self.user.session_id))
            .flatten();
        Position::of(&self.shared.gateway, upstream, &self.user, self.seq)
    }

    fn interrupted(&self) -> bool {
        self.slot.is_newer_than(self.seq)
    }

    async fn run(&mut self) -> Result<Turned, AgentError> {
        let clock = Clock::wall();
        let mut view = self.load_view().await?;
        if let Some(to) = self.follow_owner(&view.messages) {
            // The session was handed to `to`: its turn, from the start.
            let session = self.user.session_id.clone();
            self.shared.sessions.put_view(&session, view);
            return Ok(Turned::Handed {
                to,
                posted: Vec::new(),
                user: self.user.clone(),
            });
        }
        let decisions = self.heal(&clock, &mut view).await?;
        // The turn adds to the view as it goes; what it stored is read
        // back, in the store's order, by the next turn, unless the turn
        // knows it already (below).
        view.mark();
        let from = view.seq;
        self.stored = Some(Vec::new());
        let decisions = decisions
            .iter()
            .map(|(id, v)| (id.as_str(), v.clone()))
            .collect();
        let finish = self.drive(clock, &mut view, &decisions).await;
        let held = view.rewind();
        // Kept before the last write releases the lease, for the
        // session's next turn here, which may start at once.
        let session = self.user.session_id.clone();
        self.shared.sessions.put_view(&session, view);
        let (finish, last) = match finish? {
            Driven::Over(finish, last) => (finish, last),
            Driven::Handed(to) => {
                let posted = std::mem::take(&mut self.posted);
                let user = self.user.clone();
                return Ok(Turned::Handed { to, posted, user });
            }
        };
        let outcome = self.finish(finish, last).await?;
        // A completed turn whose posts took the seqs right after the
        // view's, one after another, left nothing else in between (a seq
        // is one message's place in the store's order): the view takes
        // them as the next turn would read them back, unless a turn took
        // it meanwhile. Else the next turn reads them.
        if let Some(seqs) = self.stored.take()
            && outcome.status == TurnStatus::Completed
            && let Some(stored) = view::stored_by_turn(from, &seqs, held, &outcome.messages)
            && let Some(mut view) = self.shared.sessions.take_view(&session)
        {
            if view.seq == from {
                view.extend_stored(stored);
            }
            self.shared.sessions.put_view(&session, view);
        }
        Ok(Turned::Over(outcome))
    }

    /// Follows the machine's decisions from the `view` (the session's
    /// history, which the turn's posts are added to) until it finishes;
    /// how, with the posts of that last decision, which the turn's last
    /// write makes (`finish`).
    async fn drive(
        &mut self,
        clock: Clock,
        view: &mut View,
        decisions: &HashMap<&str, Verdict>,
    ) -> Result<Driven, AgentError> {
        let setup = Setup {
            clock,
            answer_shape: self.answer_shape.clone(),
            max_steps: self.shared.max_steps,
            prompt_seq: self.seq,
            approval_wait: self.shared.approval_deadline,
            guard_retries: self.shared.output_repairs,
        };
        let mut decision = match self.unknown_owner.take() {
            Some(why) => Machine::refuse(setup, &self.user, why),
            None => Machine::start(setup, &self.user, &view.messages, decisions),
        };
        // Made when first needed: a turn found answered, or interrupted
        // before it began, reads no tools and makes no workspace.
        let mut runner = None;
        loop {
            if let Next::Finish(finish) = decision.next {
                let mut last = decision.post;
                self.handoff_not_made(&mut last);
                return Ok(Driven::Over(finish, last));
            }
            for mut m in decision.post {
                self.stamp(&mut m);
                self.post(m.clone()).await?;
                view.push(m);
            }
            if let Some(to) = self.handing_to.take() {
                // The rest of the turn is the agent's it was handed to,
                // under this lease (`claim.rs`).
                return Ok(Driven::Handed(to));
            }
            decision = match decision.next {
                Next::Finish(_) => unreachable!("returned above"),
                Next::Ask(ask) => {
                    self.steps = ask.step();
                    if self.interrupted() {
                        ask.interrupted()
                    } else {
                        if runner.is_none() {
                            runner = Some(self.runner().await?);
                        }
                        self.model_step(ask, view).await?
                    }
                }
                Next::Run(mut run) => {
                    let runner = match &runner {
                        Some(runner) => runner,
                        None => runner.insert(self.runner().await?),
                    };
                    self.in_flight
                        .begin(self.shared, self.holder, &mut run)
                        .await?;
                    self.tools_step(runner, run).await
                }
            };
        }
    }

    /// The machine's decision on a model call of the fitted `view`.
    async fn model_step(&mut self, ask: Ask, view: &mut View) -> Result<Decision, AgentError> {
        Ok(match self.ask_fitted(view, ask.step()).await? {
            None => ask.interrupted(),
            Some(Ok(reply)) => self.replied_checked(ask, reply).await,
            Some(Err(CallError::Model(e))) => {
                tracing::warn!(error = %ErrorChain(&e), "the model call failed; the turn ends");
                ask.failed(&e)
            }
            Some(Err(CallError::Hook(failure))) => {
                tracing::warn!(error = %failure, "a hook failed; the turn ends");
                ask.hook_failed(failure)
            }
            Some(Err(CallError::Tripped(guardrail, reason))) => ask.tripped(&guardrail, &reason),
        })
    }

    /// The machine's decision on the model's `reply`, once the output
    /// guardrails checked it, when it is a final answer.
    async fn replied_checked(&self, ask: Ask, reply: kesoku_llm::AssistantTurn) -> Decision {
        let guardrails = &self.shared.output_guardrails;
        if guardrails.is_empty() || !reply.calls.is_empty() || reply.text.trim().is_empty() {
            return self.replied(ask, reply);
        }
        let input = GuardInput {
            session_id: self.user.session_id.clone(),
            prompt_id: self.user.id.clone(),
            text: reply.text.clone(),
        };
        let Some(objection) = self
            .unless_newer(guardrails_in_turn::objection(guardrails, &input))
            .await
        else {
            return ask.interrupted();
        };
        match objection {
            Ok(None) => self.replied(ask, reply),
            Ok(Some((guardrail, verdict))) => self.replied(ask.checked(&guardrail, verdict), reply),
            Err(failure) => {
                tracing::warn!(error = %failure, "a guardrail failed; the turn ends");
                ask.hook_failed(failure)
            }
        }
    }

    /// `work`'s output, unless a newer user message arrives first (`work`
    /// is then dropped).
    async fn unless_newer<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.slot.newer_than(self.seq) => None,
            done = work => Some(done),
        }
    }

    /// The session's history for the model: the view kept from its last
    /// turn here, brought up to date with what was stored since, else
    /// what the store holds of it that the model may be shown (`tail.rs`).
    /// A kept view never has a call left without a result: a view that
    /// would is read from the store.
    async fn load_view(&mut self) -> Result<View, AgentError> {
        let session = self.user.session_id.clone();
        let store = self.shared.gateway.store();
        let kept = match self.at_claim.take() {
            Some(ViewAtClaim { view, newer }) => Some((view, Some(newer))),
            None => self.shared.sessions.take_view(&session).map(|v| (v, None)),
        };
        if let Some((mut view, newer)) = kept {
            let newer = match newer {
                Some(newer) => newer,
                None => {
                    retried_store(self.shared.lease, "loading a session's history", || {
                        store.history_after(&session, view.seq)
                    })
                    .await?
                }
            };
            self.note_prompts(&newer);
            if view.extend(newer) && !view.has_orphans() {
                return Ok(view);
            }
        }
        let history = self.read_cold().await?;
        self.note_prompts(&history);
        Ok(View::new(history))
    }

    /// Reads the decisions on the `view`'s calls waiting for a person, and
    /// posts what answers its other calls left without results, as
    /// `heal.rs` decides; the view is then read again, so each result
    /// stands after its call. The decisions, by call id.
    async fn heal(
        &mut self,
        clock: &Clock,
        view: &mut View,
    ) -> Result<HashMap<String, Verdict>, AgentError> {
        if !view.has_orphans() {
            return Ok(HashMap::new());
        }
        let decisions: HashMap<String, Verdict> =
            approval_in_turn::decisions(self.shared, &view.messages)
                .await?
                .into_iter()
                .collect();
        let by_id = decisions
            .iter()
            .map(|(id, v)| (id.as_str(), v.clone()))
            .collect();
        // An agent called as a tool goes on from its own session's
        // history: its call is run again, not answered as cut short.
        let (registry, _) = self.shared.tools.current();
        let runs_again = |call: &Message| {
            call.meta_str(kesoku_core::keys::TOOL_NAME)
                .and_then(|name| registry.get(name))
                .is_some_and(Tool::needs_tool_call_id)
        };
        let healing = heal(clock, &self.user.id, &view.messages, &by_id, &runs_again);
        if healing.results.is_empty() {
            return Ok(decisions);
        }
        for result in healing.results {
            self.post(result).await?;
        }
        let store = self.shared.gateway.store();
        approval_in_turn::interrupt_moved_on(&**store, healing.moved_on).await?;
        *view = View::new(self.read_cold().await?);
        Ok(decisions)
    }

    /// The session as the store holds it, for a view: its end the model
    /// may be shown when views are compacted, else all of it.
    async fn read_cold(&self) -> Result<Vec<(Seq, Message)>, AgentError> {
        let store = &**self.shared.gateway.store();
        let (session, lease) = (&self.user.session_id, self.shared.lease);
        match fit::cold_bound(self.shared) {
            Some(bound) => tail::read(store, session, bound, lease).await,
            None => tail::whole(store, session, lease).await,
        }
    }

    /// Notes the session's user messages in `history`: one newer than
    /// this turn's interrupts it, wherever it was posted (another process
    /// may have taken it before this one's listener saw it pending).
    fn note_prompts(&self, history: &[(Seq, Message)]) {
        if let Some((seq, _)) = history
            .iter()
            .rev()
            .find(|(seq, m)| m.role == Role::User && *seq > self.seq)
        {
            self.shared
                .sessions
                .saw_user_message(&self.user.session_id, *seq);
        }
    }

    async fn post(&mut self, message: Message) -> Result<(), AgentError> {
        let seq = post(self.shared, self.holder, &message).await?;
        self.note_stored(seq);
        if let Some(position) = &self.position {
            position.message(&message);
        }
        if let Some(call) = self.in_flight.answered(&message) {
            retried(self.shared.lease, "settling an approved call", |_| {
                self.shared.gateway.transition_leased(
                    &call,
                    &[Status::Processing],
                    Status::Responded,
                    self.holder,
                )
            })
            .await?;
        }
        self.posted.push(message);
        Ok(())
    }

    /// Notes a post of this turn stored at `seq` (`None`: not known).
    fn note_stored(&mut self, seq: Option<Seq>) {
        match (seq, &mut self.stored) {
            (Some(seq), Some(stored)) => stored.push(seq),
            _ => self.stored = None,
        }
    }

    fn outcome(&mut self, status: TurnStatus, answer: Option<String>) -> TurnOutcome {
        TurnOutcome {
            status,
            answer,
            messages: std::mem::take(&mut self.posted),
            error: None,
            hook_error: None,
            tripped: None,
            nested: std::mem::take(&mut self.nested_waiting),
        }
    }

    /// Ends the turn as the machine decided (the tools still waiting are
    /// cancelled first, on interruption): posts `last`, settles the prompt
    /// and releases the lease, in one write. When that write fails for a
    /// moment, the same in steps, each tried again; the lease is then
    /// released after the turn (`claim.rs`).
    async fn finish(
        &mut self,
        finish: Finish,
        mut last: Vec<Message>,
    ) -> Result<TurnOutcome, AgentError> {
        for m in &mut last {
            self.stamp(m);
        }
        if finish.status == TurnStatus::Interrupted {
            self.cancel.cancel();
        }
        let shared = self.shared;
        self.ending.started.store(true, Ordering::Release);
        let ended = shared
            .gateway
            .finish_turn(
                &self.user.session_id,
                self.holder,
                &last,
                &self.user.id,
                SETTLED_FROM,
                finish.settle,
            )
            .await;
        match ended {
            Ok(seqs) => {
                self.ending.released.store(true, Ordering::Release);
                if let Some(position) = &self.position {
                    for m in &last {
                        position.message(m);
                    }
                }
                for (seq, _) in seqs.into_iter().zip(&last) {
                    self.note_stored(Some(seq));
                }
                // Their results are stored: the approved calls settle (the
                // lease is gone, so unfenced; each is one conditional
                // update).
                for m in &last {
                    if let Some(call) = self.in_flight.answered(m) {
                        shared
                            .gateway
                            .store()
                            .transition(&call, &[Status::Processing], Status::Responded)
                            .await
                            .map_err(GatewayError::from)?;
                    }
                }
                self.posted.extend(last);
            }
            Err(GatewayError::Store(e)) if is_transient(&e) => {
                tracing::warn!(error = %ErrorChain(&e), "ending a turn failed; ending it in steps");
                self.stored = None;
                for m in last {
                    post_again(shared, self.holder, &m).await?;
                    self.posted.push(m);
                }
                settle(shared, self.holder, &self.user.id, finish.settle).await?;
            }
            Err(e) => return Err(e.into()),
        }
        if finish.status == TurnStatus::AwaitingApproval {
            // A person may have decided every call before the pause was
            // stored: then no decider could put the turn back.
            let store = shared.gateway.store();
            match approval::put_back_if_decided(
                &**store,
                &self.user.session_id,
                &self.user.id,
                self.seq,
            )
            .await
            {
                Ok(found) if found.put_back => shared.released.notify_one(),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    error = %ErrorChain(&e),
                    "could not check the decisions of a paused turn; the next decision will"
                ),
            }
        }
        let mut outcome = self.outcome(finish.status, finish.answer);
        outcome.error = finish.error;
        outcome.hook_error = finish.hook_error;
        outcome.tripped = finish.tripped;
        Ok(outcome)
    }
}

mod handoff;
mod model;
mod tools;

/// Whether `prompt` is an agent's, called as a tool (its turn's events
/// are shown on the top session).
fn message_is_nested(prompt: &Message) -> bool {
    prompt.metadata.contains_key(NESTED)
}
