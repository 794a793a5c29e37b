//! # kesoku
//!
//! Turn ordinary Rust functions into LLM tools.
//!
//! `#[tool]` reads a function's rustdoc and signature at compile time,
//! checks one against the other, and emits a constant JSON Schema and a
//! typed invoker, registered in a global [`default_registry`].
//!
//! ```standalone_crate
//! use kesoku::{ToolContext, tool};
//!
//! /// Adds two integers.
//! ///
//! /// # Arguments
//! /// * `a` - The first integer.
//! /// * `b` - The second integer.
//! #[tool]
//! async fn calculate_sum(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! // The schema is a constant, built at compile time.
//! assert_eq!(calculate_sum::SCHEMA.description, "Adds two integers.");
//!
//! // Every #[tool] in the binary is in the default registry.
//! let tool = kesoku::default_registry().get("calculate_sum").unwrap();
//! assert_eq!(tool.parameters()["required"], serde_json::json!(["a", "b"]));
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let out = tool.call(serde_json::json!({"a": 2, "b": "3"}), &ToolContext::new("s")).await;
//! assert_eq!(out.unwrap().text(), "5");
//!
//! let err = tool.call(serde_json::json!({"a": 2}), &ToolContext::new("s")).await;
//! assert_eq!(
//!     err.unwrap_err().to_string(),
//!     "invalid arguments for tool `calculate_sum`: argument `b` is required (The second integer.)"
//! );
//! # });
//! ```
//!
//! The guide is in [`docs`]: [`docs::tools`] for the supported types, doc
//! styles and options, [`docs::agents`] and [`docs::llm`] for agents on
//! Claude, Gemini or OpenAI, and the rest from there.

/// The agent: [`Agent`](agent::Agent) runs turns over a model, a registry
/// and a store; [`tools`](agent::tools) holds the built-in file and media
/// tools and their sandbox (the `agent` feature, on by default).
#[cfg(feature = "agent")]
pub use kesoku_agent as agent;
pub use kesoku_core::*;
/// The models: the [`Llm`](llm::Llm) trait, Claude, Gemini, OpenAI (Chat
/// Completions and Responses), Azure OpenAI and OpenAI-compatible backends, [`ScriptedLlm`](llm::ScriptedLlm) (the `llm`
/// feature, on by default).
#[cfg_attr(
    feature = "agent",
    doc = "",
    doc = "The agent's types are here too, where users' code has long named them:",
    doc = "`kesoku::llm::Agent` is [`kesoku::agent::Agent`](agent::Agent), and",
    doc = "`kesoku::llm::tools` is [`kesoku::agent::tools`](agent::tools)."
)]
#[cfg(feature = "llm")]
pub mod llm {
    #[cfg(feature = "agent")]
    pub use kesoku_agent::tools;
    #[cfg(feature = "agent")]
    pub use kesoku_agent::{
        Agent, AgentBuilder, AgentError, AgentTool, Approval, ApprovalCheck, ApprovalError,
        Decided, GuardCheck, GuardFuture, GuardInput, GuardVerdict, Guardrail, HookError,
        HookFailure, HookFuture, Hooks, ModelRequest, PendingApproval, ResumeError, Team, ToolGate,
        Tripped, TurnOutcome, TurnStatus, Verdict,
    };
    pub use kesoku_llm::*;
}
/// A web console for agents (the `console` feature): sessions, a turn as
/// it runs, approvals; see [`Console`](console::Console).
#[cfg(feature = "console")]
pub use kesoku_console as console;
/// MCP both ways: [`McpServer`](mcp::McpServer) serves a registry over stdio
/// or streamable HTTP, [`McpClient`](mcp::McpClient) imports a server's tools
/// (the `mcp` feature, on by default).
#[cfg(feature = "mcp")]
pub use kesoku_mcp as mcp;

/// Where sessions and their messages are kept: the [`Store`](store::Store)
/// trait, [`MemoryStore`](store::MemoryStore), and, with the `sqlite`
/// feature (on by default), `SqliteStore`, the embedded store in a `SQLite`
/// file; with the `postgres` feature, `PostgresStore`, one store for many
/// agent processes on PostgreSQL.
///
/// ```
/// # #[cfg(feature = "sqlite")] {
/// let dir = tempfile::tempdir().unwrap();
/// let store = kesoku::store::SqliteStore::open(dir.path().join("kesoku.sqlite"))?;
/// # }
/// # Ok::<(), kesoku::store::StoreError>(())
/// ```
pub mod store {
    pub use kesoku_core::store::*;
    #[cfg(feature = "postgres")]
    pub use kesoku_postgres::{PostgresOptions, PostgresStore};
    #[cfg(feature = "sqlite")]
    pub use kesoku_sqlite::{SqliteOptions, SqliteStore};
}
/// Derives [`ToolArg`] for a struct or enum, following its serde
/// representation.
pub use kesoku_macros::ToolArg;
/// Turns a function into an LLM tool.
///
/// See the [crate docs](crate) and [`docs::tools`] for the doc comment format,
/// the options (`name`, `description`, `coerce`, `timeout`, `sequential`,
/// `approval`, `max_uses`, `max_parallel`, `allow_undocumented_args`,
/// `register`, `title`, `read_only`, `destructive`, `idempotent`,
/// `open_world`, `targets(...)`, `crate`) and the parameter attributes
/// (`#[arg(default = ...)]`, `#[arg(default)]`, `#[arg(schema = ...)]`,
/// `#[inject]`).
pub use kesoku_macros::tool;

pub mod docs;

// Every Rust block of the README is a doctest, so the README cannot drift
// from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

/// What the macros' expansions name. Not a public API: it may change in
/// any release.
#[doc(hidden)]
pub mod __private {
    pub use kesoku_core::__private::*;
}
