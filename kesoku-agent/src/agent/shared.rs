//! [`Shared`]: what every clone of an agent shares, which the turn's
//! modules (`claim.rs`, `run.rs`) read and [`AgentBuilder`](super::AgentBuilder)
//! puts together.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kesoku_core::ToolContext;
use kesoku_core::gateway::Gateway;
use tokio::sync::Semaphore;

use super::approval::Policy;
use super::sessions::Sessions;
use super::toolset::Toolset;
use crate::tools::{Sandbox, TurnModel};
use kesoku_llm::{Llm, LlmOptions};

/// The shortest lease [`AgentBuilder::lease`] takes.
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(300);

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
    /// Which calls run, wait for a person, or are refused.
    pub(crate) approval: Policy,
    /// How long a call waits for a decision, if not for ever.
    pub(crate) approval_deadline: Option<Duration>,
    /// At most this many calls of one step run at once.
    pub(crate) max_parallel_calls: usize,
    /// The per-turn use limit of a tool that sets none itself.
    pub(crate) max_uses_per_turn: Option<usize>,
    /// How many more answers a typed prompt's model may give after one
    /// that does not fit.
    pub(crate) output_repairs: usize,
    /// How a session past the context window is fitted into it.
    pub(crate) compaction: super::compaction::Compaction,
    /// The agent's hooks, in the order they run.
    pub(crate) hooks: Vec<Arc<dyn super::hooks::Hooks>>,
    /// The checks of each prompt, and of each final answer.
    pub(crate) input_guardrails: Vec<super::guardrails::Guardrail>,
    pub(crate) output_guardrails: Vec<super::guardrails::Guardrail>,
    /// The context window set on the agent, if any.
    pub(crate) context_window: Option<u64>,
    /// A window the provider's refusal taught (0 for none).
    pub(crate) learned_window: std::sync::atomic::AtomicU64,
    /// The agent's name in its spans (`gen_ai.agent.name`).
    pub(crate) name: String,
    /// Whether spans carry the messages, arguments and results.
    pub(crate) capture_content: bool,
    /// The GenAI metrics (with the `otel` feature).
    pub(crate) metrics: crate::telemetry::Metrics,
    /// The agents offered as tools ([`AgentBuilder::sub_agent`](super::AgentBuilder::sub_agent)), theirs
    /// too, by name: `serve` runs a nested prompt with the agent it names.
    pub(crate) roster: HashMap<String, Arc<Shared>>,
    /// The handoff tools ([`AgentBuilder::handoff`](super::AgentBuilder::handoff)), by name, and the agent
    /// each hands to.
    pub(crate) handoffs: HashMap<String, String>,
    /// The team it joined, whose members it knows by name.
    pub(crate) team: Option<super::team::Team>,
    /// Where the nested turns of a session running here show what they
    /// do, while the call that runs them waits here: its caller's gateway.
    pub(crate) upstreams: Upstreams,
}

/// Each nested session's caller's gateway, while its call runs here.
#[derive(Default)]
pub(crate) struct Upstreams(Mutex<HashMap<String, Gateway>>);

impl Upstreams {
    pub(crate) fn insert(&self, session: &str, gateway: Gateway) {
        self.lock().insert(session.to_owned(), gateway);
    }

    pub(crate) fn remove(&self, session: &str) {
        self.lock().remove(session);
    }

    pub(crate) fn get(&self, session: &str) -> Option<Gateway> {
        self.lock().get(session).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Gateway>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Shared {
    /// The agent named `name` that this one knows: one it offers as a
    /// tool or hands sessions to (and theirs), or a member of its team
    /// (and theirs: a member serving runs every member's turns, those of
    /// the agents a member calls as tools too).
    pub(crate) fn agent_named(&self, name: &str) -> Option<Arc<Shared>> {
        if let Some(known) = self.roster.get(name) {
            return Some(Arc::clone(known));
        }
        let team = self.team.as_ref()?;
        if let Some(member) = team.get(name) {
            return member.downcast().ok();
        }
        team.members().into_iter().find_map(|member| {
            let member: Arc<Shared> = member.downcast().ok()?;
            member.roster.get(name).cloned()
        })
    }

    /// Joins `team`. An error when the team has a member of this name, or
    /// when another agent than this one's of a name (this agent, or one it
    /// calls as a tool or hands sessions to) is a member's of that name: a
    /// nested prompt names its agent, for whichever member serves it.
    pub(crate) fn join_team(self: &Arc<Self>, team: &super::team::Team) -> Result<(), String> {
        let ours = |name: &str| {
            if name == self.name {
                Some(self)
            } else {
                self.roster.get(name)
            }
        };
        for member in team.members() {
            let Ok(member) = member.downcast::<Shared>() else {
                continue;
            };
            let theirs = std::iter::once((&member.name, &member)).chain(member.roster.iter());
            for (name, other) in theirs {
                // Two members of one name: `Team::join` says so.
                let both_members = Arc::ptr_eq(other, &member) && *name == self.name;
                if !both_members && ours(name).is_some_and(|o| !Arc::ptr_eq(o, other)) {
                    return Err(format!(
                        "two agents are named `{name}` in this team (its members, or agents they call as tools or hand sessions to): give each its own with `AgentBuilder::name`, so a member serving runs the right one's turns"
                    ));
                }
            }
        }
        let member: Arc<dyn std::any::Any + Send + Sync> = self.clone();
        team.join(&self.name, &member)
    }

    /// The lease holder of a new claim: one per turn, so a turn's lease is
    /// its own even among turns of this agent.
    pub(crate) fn claim_holder(&self) -> String {
        use std::fmt::Write as _;
        let n = self
            .claims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Sized at once: the agent's holder, `#`, up to 20 digits.
        let mut holder = String::with_capacity(self.holder.len() + 21);
        let _ = write!(holder, "{}#{n}", self.holder);
        holder
    }
}

/// Adds one value of the user's state to a context.
pub(crate) type AddState = Arc<dyn Fn(ToolContext) -> ToolContext + Send + Sync>;
