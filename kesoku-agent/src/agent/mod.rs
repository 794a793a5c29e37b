//! [`Agent`]: hands a prompt to a model, runs the tools it asks for, and
//! keeps every message in a store, one turn at a time per session.
//!
//! `send` and `serve` share one path: the user message is posted as
//! `pending_agent`; the agent takes the session's turn lease in the store
//! (so a session runs one turn at a time across every process sharing
//! it), claims the message with a conditional update (so of several
//! agents exactly one takes it), and runs the turn, renewing the lease
//! as it goes. A worker that dies loses its leases when they expire, and
//! `serve` in any other process puts its turns back and runs them. A
//! newer user message of the session interrupts a running turn at once:
//! see `claim.rs` (the lease), `run.rs` (the turn's IO) and `machine.rs`
//! (the turn's rules).

mod approval;
mod approval_api;
mod approval_in_turn;
mod builder;
mod claim;
mod clock;
mod compaction;
mod compose;
mod fit;
mod guardrails;
mod guardrails_in_turn;
mod handoff;
mod heal;
mod hooks;
mod hooks_in_turn;
mod machine;
mod nested;
mod nested_ids;
mod outcome;
mod posts;
mod retry;
mod run;
mod sessions;
mod shared;
mod subagent;
mod tail;
mod team;
mod toolset;
mod typed;
mod view;
mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kesoku_core::gateway::{Filter, Gateway, Listener};
use kesoku_core::store::Seq;
use kesoku_core::{ErrorChain, Message, MessageType, Role, Status};
use tokio::task::JoinSet;

pub use approval::{Approval, ApprovalCheck, ApprovalError, Decided, PendingApproval, Verdict};
pub use builder::AgentBuilder;
use claim::Claimed;
pub use compaction::{
    Compacted, Compaction, CompactionFuture, CompactionRequest, CompactionStrategy,
};
pub use guardrails::{GuardCheck, GuardFuture, GuardInput, GuardVerdict, Guardrail};
pub use hooks::{HookError, HookFuture, Hooks, ModelRequest, ToolGate};
pub use outcome::{AgentError, HookFailure, ResumeError, Tripped, TurnOutcome, TurnStatus};
use shared::Shared;
pub use subagent::AgentTool;
pub use team::Team;
pub use typed::{Typed, TypedError};

use kesoku_llm::Llm;

/// An agent: a model, tools, a store, and the turn loop between them.
///
/// Cheap to clone (one `Arc`); clones share everything, so one can
/// `serve()` while others `send()`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use kesoku_agent::{Agent, TurnStatus};
/// use kesoku_llm::ScriptedLlm;
/// use kesoku_core::{DynamicTool, ToolOutput, ToolRegistry};
/// use serde_json::json;
///
/// let mut tools = ToolRegistry::new();
/// tools.register(DynamicTool::new("add", "Adds a and b.",
///     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
///     |args, _| async move { Ok(ToolOutput::new(json!(args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()))) },
/// ).unwrap()).unwrap();
/// let model = ScriptedLlm::from_json(json!([
///     {"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
///     {"text": "2 + 3 = {{c1}}"}
/// ])).unwrap();
///
/// let agent = Agent::builder(model).registry(tools).build().unwrap();
/// let outcome = agent.send("session-1", "Add 2 and 3").await.unwrap();
/// assert_eq!(outcome.status, TurnStatus::Completed);
/// assert_eq!(outcome.answer.as_deref(), Some("2 + 3 = 5"));
/// assert_eq!(agent.history("session-1").await.unwrap().len(), 4);
/// # });
/// ```
#[derive(Clone)]
pub struct Agent {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.shared.llm.provider())
            .field("model", &self.shared.options.model)
            .field("tools", &self.shared.tools.len())
            .field("max_steps", &self.shared.max_steps)
            .finish_non_exhaustive()
    }
}

/// How often a `send` whose message another agent claimed checks whether
/// that agent finished it.
const ELSEWHERE_POLL: Duration = Duration::from_millis(50);
/// How many times per lease `serve` (and a `send` waiting on another
/// worker) puts back the turns of workers that died: a dead worker's turn
/// is resumed at most a lease and a tenth of one after its last renewal.
const SWEEPS_PER_LEASE: u32 = 10;

/// Aborts its task when dropped: a task that lives only as long as the
/// future that spawned it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Interrupts a session's turn when dropped while `armed`: a check whose
/// caller stopped waiting for it.
struct InterruptOnDrop {
    agent: Agent,
    session: String,
    armed: bool,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.agent.interrupt(&self.session);
        }
    }
}

impl Agent {
    /// The gateway the agent posts through: front ends in this process
    /// post and listen here.
    pub fn gateway(&self) -> &Gateway {
        &self.shared.gateway
    }

    /// Posts `text` as a user message of `session_id` and runs the turn it
    /// opens. A turn of the session that is running is interrupted; this
    /// one starts when it has stopped.
    pub async fn send(&self, session_id: &str, text: &str) -> Result<TurnOutcome, AgentError> {
        self.send_message(prompt(session_id, text)).await
    }

    /// Like [`send`](Self::send), asking for an answer of type `T`: the
    /// model is given `T`'s compile-time schema through its provider's
    /// structured-output mode (OpenAI's strict `response_format`,
    /// Gemini's `responseJsonSchema`, Claude's `output_config.format`),
    /// tools still run during the turn, and the final answer is checked
    /// with kesoku's validator and decoded. An answer that does not fit
    /// is kept, and the model is shown its problems by JSON path and
    /// tries again ([`AgentBuilder::output_repairs`] times, once by
    /// default); then [`TypedError::Invalid`] holds the last text and its
    /// problems. Text deltas still reach the gateway as they are written.
    ///
    /// A type the provider's structured-output mode cannot take (an open
    /// map for OpenAI, a recursive type for Claude) is
    /// [`TypedError::Unsupported`], before anything is posted or sent.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// #[derive(Debug, serde::Deserialize, kesoku_macros::ToolArg)]
    /// # #[kesoku(crate = kesoku_core)]
    /// struct City {
    ///     /// The city's name.
    ///     name: String,
    ///     /// How many people live there.
    ///     population: u64,
    /// }
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([
    ///     {"text": "{\"name\": \"Lyon\", \"population\": \"many\"}"},
    ///     {"text": "{\"name\": \"Lyon\", \"population\": 522250}"}
    /// ])).unwrap();
    /// let agent = Agent::builder(model).build().unwrap();
    /// let city = agent.send_as::<City>("s", "The largest city on the Rhône?").await.unwrap();
    /// assert_eq!(city.value.population, 522_250);
    /// # });
    /// ```
    pub async fn send_as<T>(&self, session_id: &str, text: &str) -> Result<Typed<T>, TypedError>
    where
        T: kesoku_core::ToolArg + serde::de::DeserializeOwned + 'static,
    {
        let output = kesoku_core::OutputSchema::of::<T>();
        if let Some(dialect) = self.shared.llm.output_dialect()
            && let Some(e) = output.lowered(dialect).report.unsupported().next()
        {
            return Err(TypedError::Unsupported(
                kesoku_llm::LlmError::UnsupportedOutput {
                    provider: self.shared.llm.provider(),
                    output: output.name().to_owned(),
                    path: e.path.clone(),
                    reason: e.detail.clone(),
                },
            ));
        }
        let mut message = prompt(session_id, text);
        typed::ask_for(&mut message, &output, self.shared.output_repairs);
        let outcome = self.send_message(message).await?;
        let value = outcome.value::<T>()?;
        Ok(Typed { value, outcome })
    }

    async fn send_message(&self, message: Message) -> Result<TurnOutcome, AgentError> {
        let session_id = message.session_id.clone();
        let session_id = session_id.as_str();
        // One write when the turn can start at once; else the prompt is
        // posted for whoever holds the session, and taken in turn.
        let message = match Claimed::new_prompt(&self.shared, message).await? {
            claim::Started::Claimed(claimed) => {
                let (message, seq) = claimed.prompt();
                let (message, seq) = (message.clone(), seq);
                return match claimed.run(&self.shared).await? {
                    Some(outcome) => Ok(outcome),
                    // Its lease was lost: the turn ends on another worker.
                    None => self.finished_elsewhere(&message, seq).await,
                };
            }
            claim::Started::NotNow(message) => message,
        };
        let seq = self.shared.gateway.post(message.clone()).await?;
        self.shared.sessions.saw_user_message(session_id, seq);
        match claim::take(&self.shared, message.clone(), seq).await? {
            Some(outcome) => Ok(outcome),
            // A serving agent, here or elsewhere, took it first, or this
            // turn lost its lease (to a stall) and is resumed.
            None => self.finished_elsewhere(&message, seq).await,
        }
    }

    /// This agent as a [`Guardrail`] named `name`: each text it checks is
    /// a prompt to it, answered as a [`GuardCheck`] (a typed answer, see
    /// [`send_as`](Self::send_as)); `tripped` trips the guardrail with its
    /// `reason`. Its instructions say what to check. Each checked prompt's
    /// texts go to a session of its own, `<prompt id>.guardrail.<name>`,
    /// in this agent's store. An error of its turn fails the turn it
    /// guards, naming the guardrail.
    ///
    /// ```
    /// use kesoku_agent::{Agent, TurnStatus};
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let judge = ScriptedLlm::from_json(serde_json::json!([
    ///     {"text": "{\"tripped\": true, \"reason\": \"it asks for medical advice\"}"}
    /// ]))
    /// .unwrap();
    /// let judge = Agent::builder(judge)
    ///     .system_prompt("Say whether the text asks for medical advice.")
    ///     .build()
    ///     .unwrap();
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Take two."}])).unwrap();
    /// let agent = Agent::builder(model)
    ///     .input_guardrail(judge.as_guardrail("no_medical_advice"))
    ///     .build()
    ///     .unwrap();
    /// let outcome = agent.send("s", "How much aspirin should I take?").await.unwrap();
    /// assert_eq!(outcome.status, TurnStatus::Tripped);
    /// assert_eq!(outcome.tripped.unwrap().reason, "it asks for medical advice");
    /// # });
    /// ```
    pub fn as_guardrail(&self, name: impl Into<String>) -> Guardrail {
        let agent = self.clone();
        let name: String = name.into();
        let label = name.clone();
        Guardrail::new(name, move |input: GuardInput| {
            let agent = agent.clone();
            let session = format!("{}.guardrail.{label}", input.prompt_id);
            async move {
                // Its own task, so the check's turn ends as turns do (its
                // prompt settled, its lease released) even when the turn
                // it guards stops waiting for it: that interrupts it.
                let judge = agent.clone();
                let (s, text) = (session.clone(), input.text);
                let check =
                    tokio::spawn(async move { judge.send_as::<GuardCheck>(&s, &text).await });
                let mut stop = InterruptOnDrop {
                    agent,
                    session,
                    armed: true,
                };
                let checked = check.await;
                stop.armed = false;
                let checked = checked.map_err(HookError::new)?.map_err(HookError::new)?;
                Ok(if checked.value.tripped {
                    GuardVerdict::Trip(checked.value.reason)
                } else {
                    GuardVerdict::Pass
                })
            }
        })
    }

    /// Stops the turn this agent runs for `session`, as a newer user
    /// message would: the model call in flight is dropped, calls not
    /// started get aborted results, waiting tools are cancelled, and the
    /// turn ends [`TurnStatus::Interrupted`] with its user message
    /// `interrupted`. Returns whether a turn was running. A turn another
    /// process runs is stopped by posting a newer message instead.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// let agent = Agent::builder(ScriptedLlm::from_json(serde_json::json!([])).unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert!(!agent.interrupt("no-such-session"));
    /// # });
    /// ```
    pub fn interrupt(&self, session_id: &str) -> bool {
        self.shared.sessions.stop(session_id)
    }

    /// The workspace (staging) directory of `session`: its own directory
    /// under [`sessions_dir`](AgentBuilder::sessions_dir), whose name is the
    /// session id with anything but letters, digits, `-` and `_` escaped,
    /// so no id reaches outside. A name that would be longer than 255
    /// bytes (what file systems take) is cut to at most 190 and ends in `~` and
    /// the SHA-256 of the id in hex instead, so every id still has its own
    /// directory, the same each time. `None` without a sessions directory. It
    /// is made when a turn first runs; a front end saving a user's
    /// attachment there makes it first.
    ///
    /// ```
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// let agent = Agent::builder(ScriptedLlm::from_json(serde_json::json!([])).unwrap())
    ///     .sessions_dir("/srv/sessions")
    ///     .build()
    ///     .unwrap();
    /// let dir = agent.workspace("../etc").unwrap();
    /// assert_eq!(dir, std::path::Path::new("/srv/sessions/%2E%2E%2Fetc"));
    /// ```
    pub fn workspace(&self, session_id: &str) -> Option<PathBuf> {
        workspace::workspace(&self.shared, session_id)
    }

    /// A session's stored messages, in order.
    pub async fn history(&self, session_id: &str) -> Result<Vec<Message>, AgentError> {
        Ok(self.shared.gateway.history(session_id).await?)
    }

    /// The tokens a session's model calls used, in total: the sum of the
    /// usage stored with each call's first message
    /// ([`Usage::of`](kesoku_llm::Usage::of)). Calls whose provider sent no
    /// counts (a scripted model) add nothing.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([
    ///     {"text": "Hello.", "usage": {"input_tokens": 120, "output_tokens": 3}},
    /// ])).unwrap();
    /// let agent = Agent::builder(model).build().unwrap();
    /// agent.send("s", "Hi").await.unwrap();
    /// let total = agent.usage("s").await.unwrap();
    /// assert_eq!((total.input_tokens, total.output_tokens), (120, 3));
    /// # });
    /// ```
    pub async fn usage(&self, session_id: &str) -> Result<kesoku_llm::Usage, AgentError> {
        let history = self.shared.gateway.history(session_id).await?;
        Ok(history.iter().filter_map(kesoku_llm::Usage::of).sum())
    }

    /// Start-up recovery: every user message left `processing` by a crash
    /// goes back to `pending_agent`, its session's lease broken, for
    /// [`serve`](Self::serve) to take again at once (instead of after the
    /// dead process's leases expire); its turn's unanswered tool calls are
    /// healed when it runs. Returns how many were recovered.
    ///
    /// Call it at start-up, before serving, and only on a store no other
    /// running process uses. Where several processes share one, do not
    /// call it: a live agent's turns look the same as a dead one's, and
    /// `serve` resumes a dead worker's turns by itself, at most a lease
    /// and a tenth after its last renewal. Called anyway, it costs work,
    /// not correctness: each live turn it puts back loses its lease, so
    /// its worker stops it at its next renewal or post (a renewal never
    /// takes back a broken lease, [`Leases::renew`](kesoku_core::store::Leases::renew)), and the turn runs
    /// again; no prompt is answered twice.
    pub async fn recover(&self) -> Result<usize, AgentError> {
        let store = self.shared.gateway.store();
        let mut recovered = 0;
        for (_, m) in store
            .with_status(Status::Processing)
            .await
            .map_err(kesoku_core::GatewayError::from)?
        {
            // An approved call begun when the process died keeps its
            // mark: its turn answers it as interrupted, never runs it again.
            if m.role != Role::User {
                continue;
            }
            store
                .break_lease(&m.session_id)
                .await
                .map_err(kesoku_core::GatewayError::from)?;
            let back = store
                .transition(&m.id, &[Status::Processing], Status::PendingAgent)
                .await
                .map_err(kesoku_core::GatewayError::from)?;
            recovered += usize::from(back);
        }
        Ok(recovered)
    }

    /// Takes `pending_agent` user messages from the store, oldest first,
    /// and runs their turns, until the returned future is dropped (which
    /// stops the turns it started). A store that fails now and then is
    /// tried again (with a warning) while the turns go on; only a failure
    /// to start listening is returned. A chat front end then only posts.
    ///
    /// Several processes may serve one store. Each asks the store for the
    /// next prompt ([`Leases::claim_next`](kesoku_core::store::Leases::claim_next)) only when it has room for a turn
    /// (see [`max_concurrent_turns`](AgentBuilder::max_concurrent_turns)):
    /// the claim leases the prompt's session to it, so each prompt is
    /// answered once, a session's turns never overlap, and work goes to
    /// the workers that are free. It asks again as prompts are posted and
    /// as its turns end. Every tenth of a lease it also puts back the
    /// turns of workers that died ([`Leases::requeue_expired`](kesoku_core::store::Leases::requeue_expired)), for
    /// whoever has room: a dead worker's turn resumes at most a lease and
    /// a tenth after its last renewal.
    ///
    /// A turn's store calls that fail for a moment (a database restarting)
    /// are tried again within the turn, with backoff, for up to a lease; a
    /// turn that panics settles its prompt `error`, with every call it
    /// made answered.
    pub async fn serve(&self) -> Result<(), AgentError> {
        let filter = Filter::new()
            .status(Status::PendingAgent)
            .roles([Role::User]);
        let waiting = self.shared.gateway.listen(filter).await?;
        let heard = Arc::new(tokio::sync::Notify::new());
        let mut listening = self.listen_apart(waiting, Arc::clone(&heard));
        let mut turns = JoinSet::new();
        let mut sweep = tokio::time::interval(self.shared.lease / SWEEPS_PER_LEASE);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = heard.notified() => {}
                // The listener ended (its gateway's channel closed), or
                // panicked: the panic is serve's.
                ended = &mut listening.0 => {
                    if let Err(e) = ended
                        && e.is_panic()
                    {
                        std::panic::resume_unwind(e.into_panic());
                    }
                    return Ok(());
                }
                // One of this agent's turns released its session: a
                // prompt that waited on it can be claimed now.
                () = self.shared.released.notified() => {}
                _ = sweep.tick() => {
                    if let Err(e) = self.requeue().await {
                        tracing::warn!(error = %ErrorChain(&e), "could not requeue dead workers' turns; retrying");
                    }
                    if let Err(e) = self.expire_approvals().await {
                        tracing::warn!(error = %ErrorChain(&e), "could not deny the calls past their approval deadline; retrying");
                    }
                }
                Some(done) = turns.join_next(), if !turns.is_empty() => {
                    if let Err(e) = done
                        && e.is_panic()
                    {
                        tracing::error!(error = %ErrorChain(&e), "a turn panicked");
                    }
                }
            }
            // Every finished turn is reaped now, not one per wake-up: an
            // unjoined task keeps its whole allocation (sized for the turn's
            // future), and wake-ups are fewer than turns under load.
            while let Some(done) = turns.try_join_next() {
                if let Err(e) = done
                    && e.is_panic()
                {
                    tracing::error!(error = %ErrorChain(&e), "a turn panicked");
                }
            }
            // A store that fails now and then must not stop the turns
            // running: the next event or tick tries again.
            if let Err(e) = self.pull(&mut turns).await {
                tracing::warn!(error = %ErrorChain(&e), "could not claim the next prompt; retrying");
            }
        }
    }

    /// Follows `waiting` in a task of its own: each prompt heard is marked
    /// on its session (a newer one interrupts the running turn there), and
    /// `heard` woken.
    fn listen_apart(&self, mut waiting: Listener, heard: Arc<tokio::sync::Notify>) -> AbortOnDrop {
        // The listener runs in a task of its own, so its reads of the store
        // go on while `serve`'s loop awaits a claim or a sweep. Polled only
        // by that loop, a read it had begun stood still meanwhile, with the
        // connection it was opening half open: a PostgreSQL server
        // shutting down waits (up to its `authentication_timeout`) for such
        // a connection, while that loop's claim waited for the server.
        let agent = self.clone();
        AbortOnDrop(tokio::spawn(async move {
            while let Some(delivery) = waiting.next().await {
                match delivery {
                    // A newer prompt interrupts its session's turn
                    // here at once (wherever it is taken).
                    Ok(delivery) => agent
                        .shared
                        .sessions
                        .saw_user_message(&delivery.message.session_id, delivery.seq),
                    // The listener goes on after an error; so does serving.
                    Err(e) => {
                        tracing::warn!(error = %ErrorChain(&e), "listening for prompts failed; retrying");
                    }
                }
                heard.notify_one();
            }
        }))
    }

    /// Claims prompts while this agent has room for their turns, and
    /// starts them.
    async fn pull(&self, turns: &mut JoinSet<()>) -> Result<(), AgentError> {
        while let Some(claimed) = Claimed::next(&self.shared).await? {
            let shared = match self.runner_of(claimed.prompt().0) {
                Ok(shared) => shared,
                Err(why) => {
                    claimed.refuse(&self.shared, &why).await?;
                    continue;
                }
            };
            turns.spawn(async move {
                if let Err(e) = claimed.run(&shared).await {
                    tracing::error!(error = %ErrorChain(&e), "a turn failed to run");
                }
            });
        }
        Ok(())
    }

    /// The agent whose turn answers `prompt`: this one, or for a nested
    /// prompt the agent it names among those this one offers as tools;
    /// else why none here may run it.
    fn runner_of(&self, prompt: &Message) -> Result<Arc<Shared>, String> {
        let Some(lineage) = nested::Lineage::of(prompt) else {
            return Ok(Arc::clone(&self.shared));
        };
        if lineage.agent == self.shared.name {
            return Ok(Arc::clone(&self.shared));
        }
        self.shared.agent_named(&lineage.agent).ok_or_else(|| {
            format!(
                "This prompt is for the agent `{}`, which the agent serving here (`{}`) does not offer as a tool (`AgentBuilder::sub_agent`), so no agent here may answer it.",
                lineage.agent, self.shared.name
            )
        })
    }

    /// Puts back the turns of workers that died.
    async fn requeue(&self) -> Result<(), AgentError> {
        let requeued = self
            .shared
            .gateway
            .store()
            .requeue_expired()
            .await
            .map_err(kesoku_core::GatewayError::from)?;
        if !requeued.is_empty() {
            tracing::warn!(
                turns = requeued.len(),
                "resuming turns whose worker stopped renewing its lease"
            );
        }
        Ok(())
    }

    /// The outcome of the turn of `message` (at `seq`) that another agent
    /// runs, read from the store once the user message has its final
    /// status. A turn whose worker stopped renewing its lease (it died, or
    /// stalled past it: this agent included) is put back once the lease
    /// has expired and run here, unless a serving agent takes it first;
    /// so a `send` returns even where no agent serves.
    async fn finished_elsewhere(
        &self,
        message: &Message,
        seq: Seq,
    ) -> Result<TurnOutcome, AgentError> {
        let store = self.shared.gateway.store();
        let every = self.shared.lease / SWEEPS_PER_LEASE;
        let mut next_sweep = tokio::time::Instant::now() + every;
        loop {
            let status = retry::retried_store(self.shared.lease, "reading a prompt", || {
                store.get(&message.id)
            })
            .await?
            .map(|m| m.status);
            let finished = match status {
                Some(Status::Processed) => Some(TurnStatus::Completed),
                Some(Status::Interrupted) => Some(TurnStatus::Interrupted),
                Some(Status::Error) => Some(TurnStatus::Failed),
                // Paused where it ran, for a person's decision.
                Some(Status::AwaitingApproval) => Some(TurnStatus::AwaitingApproval),
                _ => None,
            };
            if let Some(status) = finished {
                let history = self.history(&message.session_id).await?;
                return Ok(outcome::outcome_from_history(status, message, history));
            }
            if status == Some(Status::PendingAgent) {
                // Put back, and no one has taken it yet.
                if let Some(outcome) = claim::take(&self.shared, message.clone(), seq).await? {
                    return Ok(outcome);
                }
                continue;
            }
            if tokio::time::Instant::now() >= next_sweep {
                next_sweep = tokio::time::Instant::now() + every;
                let requeued = retry::retried_store(self.shared.lease, "requeueing turns", || {
                    store.requeue_expired()
                })
                .await?;
                if !requeued.is_empty() {
                    continue;
                }
            }
            tokio::time::sleep(ELSEWHERE_POLL).await;
        }
    }
}

/// A user's prompt, waiting for the agent.
fn prompt(session_id: &str, text: &str) -> Message {
    Message::new(session_id, Role::User, MessageType::Text, text)
        .with_sender("user")
        .with_status(Status::PendingAgent)
}
