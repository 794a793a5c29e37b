//! The kesoku agent: an [`Agent`] hands a prompt to a model, runs the
//! tools it asks for, and keeps every message in a store, one turn at a
//! time per session, across processes. With it, the built-in [`tools`]
//! (files and media) and the [`Sandbox`](tools::Sandbox) they read in.
//!
//! The models are [`kesoku_llm`]'s: any [`Llm`](kesoku_llm::Llm), chosen
//! at compile time or at run time (`Box<dyn Llm>`, `Arc<dyn Llm>`).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use kesoku_agent::{Agent, TurnStatus};
//! use kesoku_llm::ScriptedLlm;
//!
//! let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hello!"}])).unwrap();
//! let agent = Agent::builder(model).build().unwrap();
//! let outcome = agent.send("s", "Hi").await.unwrap();
//! assert_eq!(outcome.status, TurnStatus::Completed);
//! assert_eq!(outcome.answer.as_deref(), Some("Hello!"));
//! # });
//! ```
//!
//! # Layers
//!
//! A module uses only modules listed below it:
//!
//! | module | holds |
//! | --- | --- |
//! | `agent` | [`Agent`]: `send`, `serve`, the session's history |
//! | `agent::approval_api` | the agent's methods a person's decisions go through: `decide`, `approve`, `deny`, `pending_approvals`, `expire_approvals`, `resume` |
//! | `agent::builder` | [`AgentBuilder`] |
//! | `agent::compose` | what an agent is made of as it is built: the agents it offers as tools and hands sessions to checked (one store, names of their own), their tools added, the agents it knows by name |
//! | `agent::subagent` | [`AgentTool`]: an agent offered to another as a tool, its turn run, resumed or read back in a session of its own |
//! | `agent::claim` | leases and claims: which worker runs a session's turn |
//! | `agent::run` | one turn's IO (the store, the gateway, the model call, streaming, the runner), following `machine`'s decisions |
//! | `agent::posts` | a turn's posts, fenced by its lease and tried again; its prompt settled; how a turn ends, as its lease keeper needs to know; the end of a turn that panicked |
//! | `agent::approval_in_turn` | a turn's side of approval: deadlines, decisions read back, approved calls marked begun, calls left by a user who moved on |
//! | `agent::machine` | one turn's rules, with no IO (its messages' ids and times are given, by a `Clock`): ask the model, run these calls, or finish with a status |
//! | `agent::workspace` | each session's workspace directory, a session id made a safe name |
//! | `agent::fit` | a turn's requests kept inside the context window: when to compact, what a refusal teaches |
//! | `agent::team` | [`Team`]: agents that know each other by name |
//! | `agent::handoff` | handoffs' rules: the tool per target, the agent a session was handed to, a cycle refused |
//! | `agent::nested` | where a turn stands among nested agents: a nested prompt's lineage, and what its turn does shown on the top session, tagged with its path |
//! | `agent::shared` | what every turn of an agent shares |
//! | `agent::sessions` | per-session state kept between turns (views, the newest prompt); a kept view brought up to date by a turn's claim |
//! | `agent::tail` | a session read for a turn with no view kept: its end the model may be shown, bounded by the window |
//! | `agent::view` | the history as the model is shown it; orphaned calls and their healing; its compaction |
//! | `agent::compaction` | a request's size, estimated and calibrated; [`Compaction`] and its strategies; where a view may be cut |
//! | `agent::toolset` | the tools, fixed or read live from a registry |
//! | `agent::retry` | trying again while the store fails for a moment |
//! | `agent::typed` | typed answers: the shape a prompt asks for, feedback on one that does not fit, [`Typed`], [`TypedError`] |
//! | `agent::outcome` | [`TurnOutcome`], [`TurnStatus`], [`AgentError`], [`ResumeError`] |
//! | `agent::approval` | a person in the loop, the policy and its types: [`Approval`], [`Verdict`], [`Decided`], how held calls and decisions are stored |
//! | `agent::nested_ids` | the ids a nested call's session and prompt are stored under, from the call |
//! | `tools` | the built-in tools and their [`Sandbox`](tools::Sandbox), [`TurnModel`](tools::TurnModel) |
//! | `telemetry` | the turn's and model calls' spans and the GenAI metrics, as OpenTelemetry's GenAI conventions name them (below `tools`: a tool's model call through [`TurnModel`](tools::TurnModel) has its span too) |

mod agent;
mod telemetry;
pub mod tools;

pub use agent::{
    Agent, AgentBuilder, AgentError, AgentTool, Approval, ApprovalCheck, ApprovalError, Compacted,
    Compaction, CompactionFuture, CompactionRequest, CompactionStrategy, Decided, GuardCheck,
    GuardFuture, GuardInput, GuardVerdict, Guardrail, HookError, HookFailure, HookFuture, Hooks,
    ModelRequest, PendingApproval, ResumeError, Team, ToolGate, Tripped, TurnOutcome, TurnStatus,
    Typed, TypedError, Verdict,
};
