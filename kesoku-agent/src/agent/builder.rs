//! [`AgentBuilder`]: an agent's model, tools, store and limits, checked
//! and put together by [`build`](AgentBuilder::build).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kesoku_core::gateway::Gateway;
use kesoku_core::store::Store;
use kesoku_core::{LiveRegistry, RegistryRef, ToolContext, ToolRunner};
use tokio::sync::Semaphore;

use super::approval::{Approval, ApprovalCheck, Policy, marked_only};
use super::compaction::Compaction;
use super::compose::{self, Composed, Handoff, Parts};
use super::guardrails::Guardrail;
use super::hooks::Hooks;
use super::sessions::{Sessions, VIEW_BUDGET};
use super::shared::{AddState, MIN_LEASE, Shared};
use super::subagent::AgentTool;
use super::team::Team;
use super::toolset::Toolset;
use super::{Agent, AgentError};
use crate::tools::{Sandbox, TurnModel};
use kesoku_llm::{Llm, LlmOptions};

/// Builds an [`Agent`]; see [`Agent::builder`].
#[must_use = "call `build()` to get the agent"]
pub struct AgentBuilder {
    llm: Arc<dyn Llm>,
    tools: Option<Toolset>,
    system_prompt: Option<String>,
    options: Option<LlmOptions>,
    /// Kept apart from `gateway` so that setting both is refused, not one
    /// silently dropped.
    store: Option<Gateway>,
    gateway: Option<Gateway>,
    max_steps: usize,
    output_repairs: usize,
    streaming: bool,
    max_concurrent_turns: usize,
    sessions_dir: Option<PathBuf>,
    tool_timeout: Option<Duration>,
    sandbox: Option<Sandbox>,
    states: Vec<AddState>,
    lease: Duration,
    view_budget: usize,
    approval: Policy,
    approval_deadline: Option<Duration>,
    max_parallel_calls: usize,
    max_uses_per_turn: Option<usize>,
    compaction: Compaction,
    hooks: Vec<Arc<dyn Hooks>>,
    input_guardrails: Vec<Guardrail>,
    output_guardrails: Vec<Guardrail>,
    context_window: Option<u64>,
    name: String,
    sub_agents: Vec<AgentTool>,
    handoffs: Vec<Handoff>,
    team: Option<Team>,
    capture_content: bool,
    #[cfg(feature = "otel")]
    meter: Option<opentelemetry::metrics::Meter>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("provider", &self.llm.provider())
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent over `llm` (any [`Llm`]).
    pub fn builder(llm: impl Llm + 'static) -> AgentBuilder {
        AgentBuilder::new(Arc::new(llm))
    }
}

impl AgentBuilder {
    /// The defaults [`Agent::builder`] starts from.
    pub(super) fn new(llm: Arc<dyn Llm>) -> Self {
        AgentBuilder {
            llm,
            tools: None,
            system_prompt: None,
            options: None,
            store: None,
            gateway: None,
            max_steps: 8,
            output_repairs: 1,
            compaction: Compaction::default(),
            hooks: Vec::new(),
            input_guardrails: Vec::new(),
            output_guardrails: Vec::new(),
            context_window: None,
            name: "kesoku".into(),
            sub_agents: Vec::new(),
            handoffs: Vec::new(),
            team: None,
            capture_content: false,
            #[cfg(feature = "otel")]
            meter: None,
            streaming: true,
            max_concurrent_turns: 64,
            sessions_dir: None,
            tool_timeout: None,
            sandbox: None,
            states: Vec::new(),
            lease: Duration::from_secs(10),
            view_budget: VIEW_BUDGET,
            approval: Arc::new(marked_only),
            approval_deadline: None,
            max_parallel_calls: ToolRunner::DEFAULT_MAX_CONCURRENCY,
            max_uses_per_turn: None,
        }
    }

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

    /// Where messages are kept, behind a gateway of the agent's own.
    /// Default: a new in-memory store. Set this or
    /// [`gateway`](Self::gateway), not both: [`build`](Self::build)
    /// refuses both ([`AgentError::StoreAndGateway`]).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Gateway::new(store));
        self
    }

    /// The gateway to post through, to share it with front ends in this
    /// process (it carries its store). Set this or
    /// [`store`](Self::store), not both: [`build`](Self::build) refuses
    /// both ([`AgentError::StoreAndGateway`]).
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

    /// Decides, for each call the model asks for, whether it runs
    /// ([`Approval::Allow`]), waits for a person's yes
    /// ([`Approval::Ask`]: the turn pauses, see
    /// [`TurnStatus::AwaitingApproval`](super::TurnStatus::AwaitingApproval)),
    /// or is refused with a reason the model reads ([`Approval::Deny`]).
    /// Default: ask for the tools marked `#[tool(approval)]`, allow the
    /// rest.
    ///
    /// ```
    /// use kesoku_agent::{Agent, Approval};
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// // Ask for every destructive tool (MCP tools' hints included) and
    /// // every marked one.
    /// let agent = Agent::builder(ScriptedLlm::from_json(serde_json::json!([])).unwrap())
    ///     .approval(|check| {
    ///         if check.marked || check.hints.destructive == Some(true) {
    ///             Approval::Ask
    ///         } else {
    ///             Approval::Allow
    ///         }
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # drop(agent);
    /// ```
    pub fn approval(
        mut self,
        policy: impl Fn(&ApprovalCheck<'_>) -> Approval + Send + Sync + 'static,
    ) -> Self {
        self.approval = Arc::new(policy);
        self
    }

    /// How long a call may wait for a person's decision: past it, it is
    /// answered as denied ("no one decided before the approval deadline")
    /// and its turn goes on. The deadline is stored with the call, so any
    /// agent serving the store enforces it ([`Agent::serve`] at each sweep,
    /// or [`Agent::expire_approvals`]). Default: none, a call waits until
    /// it is decided or the user moves on.
    pub fn approval_deadline(mut self, deadline: Duration) -> Self {
        self.approval_deadline = Some(deadline);
        self
    }

    /// How many calls of one step run at once (the rest wait for a free
    /// place, in the model's order; `#[tool(sequential)]` tools still run
    /// alone). A tool with a cap of its own (`#[tool(max_parallel = N)]`,
    /// `DynamicTool::with_max_parallel`) runs N calls at once instead,
    /// above or below this cap. Default: the runner's,
    /// [`ToolRunner::DEFAULT_MAX_CONCURRENCY`](kesoku_core::ToolRunner::DEFAULT_MAX_CONCURRENCY).
    pub fn max_parallel_calls(mut self, calls: usize) -> Self {
        self.max_parallel_calls = calls;
        self
    }

    /// How many calls of one tool a turn may make, for the tools that set
    /// no limit of their own (`#[tool(max_uses = N)]`,
    /// `DynamicTool::with_max_uses`). A call past it is not run: its
    /// result is an error naming the limit, which the model reads.
    /// Default: no limit.
    pub fn max_uses_per_turn(mut self, uses: usize) -> Self {
        self.max_uses_per_turn = Some(uses);
        self
    }

    /// How many more answers the model may give, in a typed turn
    /// ([`Agent::send_as`](super::Agent::send_as)), after one that does
    /// not fit the type: each time it is shown the problems, by JSON path.
    /// Default: 1. Each try is a model call, within
    /// [`max_steps`](Self::max_steps).
    pub fn output_repairs(mut self, repairs: usize) -> Self {
        self.output_repairs = repairs;
        self
    }

    /// How a session past the model's context window is fitted into it:
    /// before each model call whose estimated request passes 80% of the
    /// window (less the reply's `max_tokens`), the view the model is sent
    /// is cut to about half, keeping whole turns. The store is never
    /// changed. Default: [`Compaction::DropOldestTurns`].
    ///
    /// ```
    /// use kesoku_agent::{Agent, Compaction};
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hi."}])).unwrap();
    /// let agent = Agent::builder(model)
    ///     .compaction(Compaction::Summarize)
    ///     .context_window(32_000)
    ///     .build()
    ///     .unwrap();
    /// # drop(agent);
    /// ```
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = compaction;
        self
    }

    /// Adds a hook: user code before and after each model call and tool
    /// call, and at each turn's end ([`Hooks`]). Several run in the order
    /// they were added.
    ///
    /// ```
    /// use kesoku_agent::{Agent, HookFuture, Hooks, ModelRequest};
    /// use kesoku_llm::{AssistantTurn, ScriptedLlm};
    ///
    /// /// Keeps every model call's answer short.
    /// struct Brief;
    ///
    /// impl Hooks for Brief {
    ///     fn before_model<'a>(
    ///         &'a self,
    ///         request: &'a mut ModelRequest<'_>,
    ///     ) -> HookFuture<'a, Option<AssistantTurn>> {
    ///         request.options.max_tokens = request.options.max_tokens.min(256);
    ///         Box::pin(async { Ok(None) })
    ///     }
    /// }
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hi."}])).unwrap();
    /// let agent = Agent::builder(model).hook(Brief).build().unwrap();
    /// # drop(agent);
    /// ```
    pub fn hook(mut self, hook: impl Hooks) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Offers another agent to the model as a tool ([`Agent::as_tool`]):
    /// its tool joins the [`registry`](Self::registry)'s, and `serve` knows
    /// it (and the agents it offers) by its [`name`](Self::name), so a
    /// nested turn put back after a crash or a decision is run by the
    /// agent it belongs to. Each agent among them needs a name of its own,
    /// and they all keep their sessions in one store (an agent that sets
    /// none takes its children's gateway): [`build`](Self::build) refuses
    /// two agents with one name, and a child over another store.
    pub fn sub_agent(mut self, child: AgentTool) -> Self {
        self.sub_agents.push(child);
        self
    }

    /// Lets the model hand the conversation to `target`, through a tool
    /// `transfer_to_<its name>` described by `description`: once called,
    /// the turn goes on with `target`'s instructions, tools and model, and
    /// so does every later turn of the session, whichever worker takes
    /// it (a worker's `serve` finds which agent the session was handed to
    /// in its history, and runs that one; the agents must be known to it
    /// here, by their names). Handing off back to an agent the same turn
    /// was handed to already is refused, as a cycle. As with
    /// [`sub_agent`](Self::sub_agent), the agents share one store and
    /// each has a name of its own.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    /// use serde_json::json;
    ///
    /// let said = |s| ScriptedLlm::from_json(s).unwrap();
    /// let billing = Agent::builder(said(json!([{"text": "Paid."}, {"text": "Nothing is due."}])))
    ///     .name("billing").build().unwrap();
    /// let hand = json!([{"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}]);
    /// let triage = Agent::builder(said(hand)).name("triage")
    ///     .handoff(&billing, "invoices and payments").build().unwrap();
    /// let first = triage.send("s", "Is my invoice paid?").await.unwrap();
    /// assert_eq!(first.answer.as_deref(), Some("Paid."));
    /// // The session stays with billing.
    /// let next = triage.send("s", "Anything due?").await.unwrap();
    /// assert_eq!(next.answer.as_deref(), Some("Nothing is due."));
    /// # });
    /// ```
    pub fn handoff(mut self, target: &Agent, description: impl Into<String>) -> Self {
        self.handoffs
            .push(Handoff::To(target.clone(), description.into()));
        self
    }

    /// Lets the model hand the conversation to the member of this
    /// agent's [`team`](Self::team) named `agent`, as
    /// [`handoff`](Self::handoff) does: named, so two agents may hand
    /// sessions back and forth (neither need exist when the other is
    /// built). A name no member has when the model calls its tool is an
    /// error the model reads; [`build`](Self::build) refuses it without a
    /// team. See [`Team`].
    pub fn handoff_to(mut self, agent: impl Into<String>, description: impl Into<String>) -> Self {
        self.handoffs
            .push(Handoff::Named(agent.into(), description.into()));
        self
    }

    /// Joins `team` as the agent is built: its members know it by its
    /// [`name`](Self::name) (no other member may have it), may hand it
    /// sessions ([`handoff_to`](Self::handoff_to)), and run its turns when
    /// they serve. The members share one store: an agent that sets none
    /// takes theirs.
    pub fn team(mut self, team: &Team) -> Self {
        self.team = Some(team.clone());
        self
    }

    /// Adds a check of each prompt, run at once with the turn's first
    /// model call: when it trips, that call is dropped, nothing the model
    /// said is stored, and the turn ends
    /// [`Tripped`](super::TurnStatus::Tripped), its verdict stored. See
    /// [`Guardrail`].
    ///
    /// ```
    /// use kesoku_agent::{Agent, GuardInput, GuardVerdict, Guardrail, TurnStatus};
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let on_topic = Guardrail::new("on_topic", |input: GuardInput| async move {
    ///     Ok(if input.text.contains("weather") {
    ///         GuardVerdict::Pass
    ///     } else {
    ///         GuardVerdict::Trip("I only talk about the weather".into())
    ///     })
    /// });
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hi."}])).unwrap();
    /// let agent = Agent::builder(model).input_guardrail(on_topic).build().unwrap();
    /// let outcome = agent.send("s", "Write me a poem").await.unwrap();
    /// assert_eq!(outcome.status, TurnStatus::Tripped);
    /// assert_eq!(outcome.tripped.unwrap().reason, "I only talk about the weather");
    /// # });
    /// ```
    pub fn input_guardrail(mut self, guardrail: Guardrail) -> Self {
        self.input_guardrails.push(guardrail);
        self
    }

    /// Adds a check of each final answer: it passes the answer, sends it
    /// back to the model with a reason (at most
    /// [`output_repairs`](Self::output_repairs) times a turn, then it is a
    /// trip), or trips: the turn ends
    /// [`Tripped`](super::TurnStatus::Tripped), the answer kept, marked.
    /// Each verdict that is not a pass is stored. See [`Guardrail`].
    pub fn output_guardrail(mut self, guardrail: Guardrail) -> Self {
        self.output_guardrails.push(guardrail);
        self
    }

    /// The most tokens a request to the model may hold. Default: the
    /// model's, where its backend knows its family
    /// ([`Llm::context_window`]); with none, the agent compacts only after
    /// the provider refused a request as too long (and learns the window
    /// from the refusal).
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// The agent's name in its telemetry: each turn is a span
    /// `invoke_agent {name}` (OpenTelemetry's GenAI conventions, through
    /// `tracing`). Default: `kesoku`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Whether the spans carry content: the messages each model call is
    /// sent and gives back (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`) and each tool call's arguments and
    /// result. Off by default: they may hold what users said. API keys are
    /// never recorded either way.
    pub fn capture_content(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }

    /// The OpenTelemetry meter the agent records its GenAI metrics with
    /// (`gen_ai.client.operation.duration` of each model and tool call,
    /// `gen_ai.client.token.usage` of each model call). Default: the
    /// global meter provider's, as it is when the agent is built.
    #[cfg(feature = "otel")]
    pub fn meter(mut self, meter: opentelemetry::metrics::Meter) -> Self {
        self.meter = Some(meter);
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
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
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

    /// How many messages the sessions' views kept between turns may hold in
    /// all (default: 50,000). A session whose view is kept pays for only
    /// the messages stored since its last turn; the least recently used
    /// views are dropped past the budget, and their sessions read their
    /// history from the store at their next turn. So a `serve()` that sees
    /// sessions without end holds at most this many messages of theirs.
    pub fn view_budget(mut self, messages: usize) -> Self {
        self.view_budget = messages;
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
        if self.store.is_some() && self.gateway.is_some() {
            return Err(AgentError::StoreAndGateway);
        }
        self.check_limits()?;
        let metrics = self.metrics();
        let team = self.team.clone();
        let Composed {
            gateway,
            tools,
            roster,
            handoffs,
        } = compose::compose(Parts {
            name: &self.name,
            gateway: self.store.or(self.gateway),
            team: self.team.as_ref(),
            tools: self.tools,
            sub_agents: self.sub_agents,
            handoffs: self.handoffs,
        })?;
        let options = llm_options(&*self.llm, self.options, self.system_prompt);
        let sandbox = match self.sandbox {
            Some(s) => s,
            None => default_sandbox()?,
        };
        // The tools' model calls are recorded as the agent's are, and
        // their tokens counted into the session's usage (`run.rs`).
        let turn_model = Arc::new(TurnModel::for_agent(
            Arc::clone(&self.llm),
            options.clone(),
            metrics.clone(),
            self.capture_content,
        ));
        let agent = Agent {
            shared: Arc::new(Shared {
                llm: self.llm,
                tools,
                options,
                gateway,
                max_steps: self.max_steps,
                output_repairs: self.output_repairs,
                compaction: self.compaction,
                hooks: self.hooks,
                input_guardrails: self.input_guardrails,
                output_guardrails: self.output_guardrails,
                context_window: self.context_window,
                learned_window: std::sync::atomic::AtomicU64::new(0),
                name: self.name,
                capture_content: self.capture_content,
                metrics,
                streaming: self.streaming,
                permits: Arc::new(Semaphore::new(self.max_concurrent_turns)),
                sessions: Sessions::new(self.view_budget),
                approval: self.approval,
                approval_deadline: self.approval_deadline,
                max_parallel_calls: self.max_parallel_calls,
                max_uses_per_turn: self.max_uses_per_turn,
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
                roster,
                handoffs,
                team: team.clone(),
                upstreams: super::shared::Upstreams::default(),
            }),
        };
        if let Some(team) = &team {
            agent.shared.join_team(team).map_err(AgentError::Config)?;
        }
        Ok(agent)
    }

    /// The GenAI metrics, on the meter given (with the `otel` feature).
    #[cfg_attr(
        not(feature = "otel"),
        expect(clippy::unused_self, reason = "it reads the meter with `otel`")
    )]
    fn metrics(&self) -> crate::telemetry::Metrics {
        #[cfg(feature = "otel")]
        return match &self.meter {
            Some(meter) => crate::telemetry::Metrics::new(meter),
            None => crate::telemetry::Metrics::global(),
        };
        #[cfg(not(feature = "otel"))]
        crate::telemetry::Metrics::new()
    }

    /// An error for the first limit set out of its range.
    fn check_limits(&self) -> Result<(), AgentError> {
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
        if self.max_parallel_calls == 0 {
            return Err(AgentError::Config(
                "max_parallel_calls must be at least 1 (no call of a step could run)".into(),
            ));
        }
        if self.max_uses_per_turn == Some(0) {
            return Err(AgentError::Config(
                "max_uses_per_turn must be at least 1 (no tool could be called); give the agent no tools instead".into(),
            ));
        }
        Ok(())
    }
}

/// The model options: those given (else the model's defaults), with the
/// model's default model when they name none, and the system prompt.
fn llm_options(llm: &dyn Llm, options: Option<LlmOptions>, system: Option<String>) -> LlmOptions {
    let mut options = options.unwrap_or_else(|| LlmOptions::new(llm.default_model()));
    if options.model.is_empty() {
        llm.default_model().clone_into(&mut options.model);
    }
    if system.is_some() {
        options.system = system;
    }
    options
}

/// The tools' sandbox when none is set: the current directory.
fn default_sandbox() -> Result<Sandbox, AgentError> {
    let dir = std::env::current_dir().map_err(|e| {
        AgentError::Config(format!(
            "the current directory, the default working directory of tools, is unknown ({e}); set one with `sandbox`"
        ))
    })?;
    Ok(Sandbox::new(dir))
}
