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
//! see `claim.rs` (the lease) and `run.rs` (the turn).

mod claim;
mod outcome;
mod retry;
mod run;
mod sessions;
mod toolset;
mod view;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kesoku_core::gateway::{Filter, Gateway};
use kesoku_core::store::{MemoryStore, Seq, Store};
use kesoku_core::{
    LiveRegistry, Message, MessageType, RegistryRef, Role, Status, ToolContext, ToolRegistry,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub use outcome::{AgentError, TurnOutcome, TurnStatus};

use crate::tools::{Sandbox, TurnModel};
use crate::{Llm, LlmOptions};
use sessions::Sessions;
use toolset::Toolset;

/// An agent: a model, tools, a store, and the turn loop between them.
///
/// Cheap to clone (one `Arc`); clones share everything, so one can
/// `serve()` while others `send()`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use kesoku_llm::{Agent, ScriptedLlm, TurnStatus};
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

/// What every clone of an agent shares.
pub(crate) struct Shared {
    pub(crate) llm: Arc<dyn Llm>,
    pub(crate) tools: Toolset,
    pub(crate) options: LlmOptions,
    pub(crate) gateway: Gateway,
    pub(crate) max_steps: usize,
    /// Whether replies are streamed (when the model can).
    pub(crate) streaming: bool,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) sessions: Sessions,
    pub(crate) sessions_dir: Option<PathBuf>,
    pub(crate) tool_timeout: Option<Duration>,
    /// Given to every turn's tools, in their context's state.
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) turn_model: Arc<TurnModel>,
    /// The user's state, each added to every turn's context.
    pub(crate) states: Vec<AddState>,
    /// This agent's name, unique to it: each claim's lease holder is it
    /// and the claim's number ([`Shared::claim_holder`]).
    pub(crate) holder: String,
    /// How many claims this agent made.
    pub(crate) claims: std::sync::atomic::AtomicU64,
    /// How long a session's lease lasts unless renewed.
    pub(crate) lease: Duration,
    /// Told when a turn gives up its session's lease, so `serve` asks at
    /// once for a prompt that waited on that session.
    pub(crate) released: tokio::sync::Notify,
}

impl Shared {
    /// The lease holder of a new claim: one per turn, so a turn's lease is
    /// its own even among turns of this agent.
    pub(crate) fn claim_holder(&self) -> String {
        let n = self
            .claims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}#{n}", self.holder)
    }
}

/// Adds one value of the user's state to a context.
pub(crate) type AddState = Arc<dyn Fn(ToolContext) -> ToolContext + Send + Sync>;

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

/// Builds an [`Agent`]; see [`Agent::builder`].
#[must_use = "call `build()` to get the agent"]
pub struct AgentBuilder {
    llm: Arc<dyn Llm>,
    tools: Option<Toolset>,
    system_prompt: Option<String>,
    options: Option<LlmOptions>,
    gateway: Option<Gateway>,
    max_steps: usize,
    streaming: bool,
    max_concurrent_turns: usize,
    sessions_dir: Option<PathBuf>,
    tool_timeout: Option<Duration>,
    sandbox: Option<Sandbox>,
    states: Vec<AddState>,
    lease: Duration,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("provider", &self.llm.provider())
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// The tools: `kesoku::default_registry()`, a `ToolRegistry`, or an
    /// `Arc` of one. Default: no tools.
    pub fn registry(mut self, registry: impl Into<RegistryRef>) -> Self {
        self.tools = Some(Toolset::fixed(registry.into()));
        self
    }

    /// Tools that may change while the agent runs (an MCP server's,
    /// imported with `kesoku::mcp::McpClient::import_live`):
    /// each turn uses them as they are when it starts. Replaces
    /// [`registry`](Self::registry).
    pub fn live_registry(mut self, registry: LiveRegistry) -> Self {
        self.tools = Some(Toolset::live(registry));
        self
    }

    /// The system prompt sent with every model call.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Where messages are kept. Default: a new in-memory store.
    pub fn store(mut self, store: impl Store) -> Self {
        self.gateway = Some(Gateway::new(store));
        self
    }

    /// The gateway to post through, to share it with front ends in this
    /// process (it carries its store). Replaces [`store`](Self::store).
    pub fn gateway(mut self, gateway: Gateway) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// Whether replies are streamed when the model can (default: on).
    /// Streamed, each piece reaches the gateway's delta listeners
    /// ([`Gateway::deltas`]) as the model writes it; the finished message
    /// is stored once either way, and an interruption drops the stream at
    /// once.
    pub fn streaming(mut self, on: bool) -> Self {
        self.streaming = on;
        self
    }

    /// How many model calls one turn may make. Default: 8.
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps;
        self
    }

    /// The model and generation options. Default: the provider's usual
    /// model with 4,096 output tokens.
    pub fn options(mut self, options: LlmOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// The model, with default options otherwise.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        let mut options = self.options.take().unwrap_or_else(|| LlmOptions::new(""));
        options.model = model.into();
        self.options = Some(options);
        self
    }

    /// How many turns (of different sessions) run at once. Default: 64.
    pub fn max_concurrent_turns(mut self, turns: usize) -> Self {
        self.max_concurrent_turns = turns;
        self
    }

    /// The directory under which each session gets its workspace
    /// directory (made on first use), given to tools in their context.
    /// A relative `dir` is made absolute when the agent is built, against
    /// the current directory then.
    pub fn sessions_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sessions_dir = Some(dir.into());
        self
    }

    /// The time limit of tools that set none. Default: the runner's.
    pub fn tool_timeout(mut self, limit: Duration) -> Self {
        self.tool_timeout = Some(limit);
        self
    }

    /// Where the built-in file tools ([`tools`](crate::tools)) may read,
    /// and the working directory they resolve relative paths against.
    /// Default: `Sandbox::new(current directory)`, whose roots are it and
    /// the session's directory under [`sessions_dir`](Self::sessions_dir).
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Shared state for the tools, as [`ToolContext::with_state`] gives
    /// it: every turn's context carries `value` (one per type; a later
    /// value of a type replaces an earlier one).
    ///
    /// ```
    /// use kesoku_llm::{Agent, ScriptedLlm};
    ///
    /// struct Db(&'static str);
    /// let model = ScriptedLlm::from_json(serde_json::json!([])).unwrap();
    /// let agent = Agent::builder(model).state(Db("sqlite://notes")).build().unwrap();
    /// # let _ = agent;
    /// ```
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        let value = Arc::new(value);
        self.states.push(Arc::new(move |ctx: ToolContext| {
            ctx.with_state_arc(Arc::clone(&value))
        }));
        self
    }

    /// How long a session's turn lease lasts unless renewed (default:
    /// 10 s). A turn renews it every third of that; when a worker dies,
    /// its sessions wait this long (a tenth more at most: 11 s by default)
    /// before another worker resumes their turns. A turn that cannot renew
    /// its lease in time stops, since another worker may take the session.
    /// At least 300 ms.
    pub fn lease(mut self, ttl: Duration) -> Self {
        self.lease = ttl;
        self
    }

    /// The agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        if self.lease < MIN_LEASE {
            return Err(AgentError::Config(format!(
                "the lease must be at least {MIN_LEASE:?} (it is renewed every third of it), got {:?}",
                self.lease
            )));
        }
        if self.max_steps == 0 {
            return Err(AgentError::Config(
                "max_steps must be at least 1 (one model call per turn)".into(),
            ));
        }
        if self.max_concurrent_turns == 0 {
            return Err(AgentError::Config(
                "max_concurrent_turns must be at least 1".into(),
            ));
        }
        let tools = self
            .tools
            .unwrap_or_else(|| Toolset::fixed(RegistryRef::from(ToolRegistry::new())));
        let mut options = self
            .options
            .unwrap_or_else(|| LlmOptions::new(default_model(self.llm.provider())));
        if options.model.is_empty() {
            default_model(self.llm.provider()).clone_into(&mut options.model);
        }
        if self.system_prompt.is_some() {
            options.system = self.system_prompt;
        }
        let sandbox = match self.sandbox {
            Some(s) => s,
            None => Sandbox::new(std::env::current_dir().map_err(|e| {
                AgentError::Config(format!(
                    "the current directory, the default working directory of tools, is unknown ({e}); set one with `sandbox`"
                ))
            })?),
        };
        let turn_model = Arc::new(TurnModel::new(Arc::clone(&self.llm), options.clone()));
        Ok(Agent {
            shared: Arc::new(Shared {
                llm: self.llm,
                tools,
                options,
                gateway: self
                    .gateway
                    .unwrap_or_else(|| Gateway::new(MemoryStore::new())),
                max_steps: self.max_steps,
                streaming: self.streaming,
                permits: Arc::new(Semaphore::new(self.max_concurrent_turns)),
                sessions: Sessions::default(),
                // Made absolute once, as `Sandbox::new` does: a later
                // `chdir` must not move every session's workspace.
                sessions_dir: self
                    .sessions_dir
                    .map(|d| std::path::absolute(&d).unwrap_or(d)),
                tool_timeout: self.tool_timeout,
                sandbox: Arc::new(sandbox),
                turn_model,
                states: self.states,
                holder: format!("agent-{}", uuid::Uuid::new_v4()),
                claims: std::sync::atomic::AtomicU64::new(0),
                lease: self.lease,
                released: tokio::sync::Notify::new(),
            }),
        })
    }
}

/// A model to use when none is set: each provider's general one.
fn default_model(provider: &str) -> &'static str {
    match provider {
        "Claude" => "claude-sonnet-4-5",
        "Gemini" => "gemini-2.5-flash",
        "OpenAI" => "gpt-4.1",
        _ => "default",
    }
}

/// How often a `send` whose message another agent claimed checks whether
/// that agent finished it.
const ELSEWHERE_POLL: Duration = Duration::from_millis(50);
/// The shortest lease [`AgentBuilder::lease`] takes.
const MIN_LEASE: Duration = Duration::from_millis(300);
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

impl Agent {
    /// Starts building an agent over `llm` (any [`Llm`]).
    pub fn builder(llm: impl Llm + 'static) -> AgentBuilder {
        AgentBuilder {
            llm: Arc::new(llm),
            tools: None,
            system_prompt: None,
            options: None,
            gateway: None,
            max_steps: 8,
            streaming: true,
            max_concurrent_turns: 64,
            sessions_dir: None,
            tool_timeout: None,
            sandbox: None,
            states: Vec::new(),
            lease: Duration::from_secs(10),
        }
    }

    /// The gateway the agent posts through: front ends in this process
    /// post and listen here.
    pub fn gateway(&self) -> &Gateway {
        &self.shared.gateway
    }

    /// Posts `text` as a user message of `session_id` and runs the turn it
    /// opens. A turn of the session that is running is interrupted; this
    /// one starts when it has stopped.
    pub async fn send(&self, session_id: &str, text: &str) -> Result<TurnOutcome, AgentError> {
        let message = Message::new(session_id, Role::User, MessageType::Text, text)
            .with_sender("user")
            .with_status(Status::PendingAgent);
        let seq = self.shared.gateway.post(message.clone()).await?;
        self.shared.sessions.saw_user_message(session_id, seq);
        match claim::take(&self.shared, message.clone(), seq).await? {
            Some(outcome) => Ok(outcome),
            // A serving agent, here or elsewhere, took it first, or this
            // turn lost its lease (to a stall) and is resumed.
            None => self.finished_elsewhere(&message, seq).await,
        }
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
    /// use kesoku_llm::{Agent, ScriptedLlm};
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
    /// use kesoku_llm::{Agent, ScriptedLlm};
    ///
    /// let agent = Agent::builder(ScriptedLlm::from_json(serde_json::json!([])).unwrap())
    ///     .sessions_dir("/srv/sessions")
    ///     .build()
    ///     .unwrap();
    /// let dir = agent.workspace("../etc").unwrap();
    /// assert_eq!(dir, std::path::Path::new("/srv/sessions/%2E%2E%2Fetc"));
    /// ```
    pub fn workspace(&self, session_id: &str) -> Option<PathBuf> {
        run::workspace(&self.shared, session_id)
    }

    /// A session's stored messages, in order.
    pub async fn history(&self, session_id: &str) -> Result<Vec<Message>, AgentError> {
        Ok(self.shared.gateway.history(session_id).await?)
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
    /// takes back a broken lease, [`Store::renew`]), and the turn runs
    /// again; no prompt is answered twice.
    pub async fn recover(&self) -> Result<usize, AgentError> {
        let store = self.shared.gateway.store();
        let mut recovered = 0;
        for (_, m) in store
            .with_status(Status::Processing)
            .await
            .map_err(kesoku_core::GatewayError::from)?
        {
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
    /// next prompt ([`Store::claim_next`]) only when it has room for a turn
    /// (see [`max_concurrent_turns`](AgentBuilder::max_concurrent_turns)):
    /// the claim leases the prompt's session to it, so each prompt is
    /// answered once, a session's turns never overlap, and work goes to
    /// the workers that are free. It asks again as prompts are posted and
    /// as its turns end. Every tenth of a lease it also puts back the
    /// turns of workers that died ([`Store::requeue_expired`]), for
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
        let mut waiting = self.shared.gateway.listen(filter).await?;
        // The listener runs in a task of its own, so its reads of the store
        // go on while this loop awaits a claim or a sweep. Polled only by
        // this loop, a read it had begun stood still meanwhile, with the
        // connection it was opening half open: a PostgreSQL server
        // shutting down waits (up to its `authentication_timeout`) for such
        // a connection, while this loop's claim waited for the server.
        let heard = Arc::new(tokio::sync::Notify::new());
        let mut listening = {
            let (agent, heard) = (self.clone(), Arc::clone(&heard));
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
                            tracing::warn!(error = %e, "listening for prompts failed; retrying");
                        }
                    }
                    heard.notify_one();
                }
            }))
        };
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
                        tracing::warn!(error = %e, "could not requeue dead workers' turns; retrying");
                    }
                }
                Some(done) = turns.join_next(), if !turns.is_empty() => {
                    if let Err(e) = done
                        && e.is_panic()
                    {
                        tracing::error!(error = %e, "a turn panicked");
                    }
                }
            }
            // A store that fails now and then must not stop the turns
            // running: the next event or tick tries again.
            if let Err(e) = self.pull(&mut turns).await {
                tracing::warn!(error = %e, "could not claim the next prompt; retrying");
            }
        }
    }

    /// Claims prompts while this agent has room for their turns, and
    /// starts them.
    async fn pull(&self, turns: &mut JoinSet<()>) -> Result<(), AgentError> {
        let store = self.shared.gateway.store();
        while let Ok(permit) = Arc::clone(&self.shared.permits).try_acquire_owned() {
            let asked = std::time::Instant::now();
            let holder = self.shared.claim_holder();
            let Some((seq, message)) = store
                .claim_next(&holder, self.shared.lease)
                .await
                .map_err(kesoku_core::GatewayError::from)?
            else {
                break;
            };
            self.shared
                .sessions
                .saw_user_message(&message.session_id, seq);
            let agent = self.clone();
            // The database's clock started the lease after `asked`.
            let valid_until = asked + self.shared.lease;
            turns.spawn(async move {
                if let Err(e) =
                    claim::run_claimed(&agent.shared, holder, message, seq, permit, valid_until)
                        .await
                {
                    tracing::error!(error = %e, "a turn failed to run");
                }
            });
        }
        Ok(())
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
                _ => None,
            };
            if let Some(status) = finished {
                let history = self.history(&message.session_id).await?;
                return Ok(run::outcome_from_history(status, message, history));
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
