//! An agent worker process over a shared store, for the scale-out tests
//! (`tests/scale.rs`) and benchmark (`bench/runtime/benches/scale.rs`).
//!
//! `serve STORE [--lease-ms N] [--latency-ms N] [--turns N]` runs
//! `agent.serve()` on `STORE` (`postgres://...` or `sqlite:PATH`) with a
//! per-prompt `ScriptedLlm` that calls `add` once, then answers with its
//! sum, each model call taking `--latency-ms`. It prints `ready` once
//! connected, then one line per model call:
//! `call <session> <prompt id> <start µs> <end µs>` (Unix time), which
//! the tests use to check that a session's turns never overlap.
//!
//! With `--approval`, the model calls `delete` instead, a tool that needs
//! a person's yes, and answers with its result; each run of it prints
//! `ran <session>` as it starts, and takes 300 ms.
//!
//! `post STORE SESSION COUNT` posts COUNT messages to SESSION and exits.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kesoku::gateway::Gateway;
use kesoku::llm::{
    Agent, AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, ToolDeclaration,
};
use kesoku::store::Store;
use kesoku::{DynamicTool, Message, MessageType, Role, ToolOutput, ToolRegistry};
use serde_json::json;

/// The store at `url`: PostgreSQL, or `sqlite:PATH`.
pub(crate) async fn open(url: &str) -> Result<Arc<dyn Store>, String> {
    open_with(url, false).await
}

/// [`open`]; a PostgreSQL store relays deltas between processes when
/// `relay_deltas` says so.
#[allow(clippy::unused_async)] // awaits only with the `postgres` feature
pub(crate) async fn open_with(url: &str, relay_deltas: bool) -> Result<Arc<dyn Store>, String> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        return kesoku::store::SqliteStore::open(path)
            .map(|s| Arc::new(s) as Arc<dyn Store>)
            .map_err(|e| e.to_string());
        #[cfg(not(feature = "sqlite"))]
        return Err(format!("{path}: built without the `sqlite` feature"));
    }
    #[cfg(feature = "postgres")]
    return kesoku::store::PostgresStore::connect_with(
        url,
        kesoku::store::PostgresOptions::new().with_relay_deltas(relay_deltas),
    )
    .await
    .map(|s| Arc::new(s) as Arc<dyn Store>)
    .map_err(|e| e.to_string());
    #[cfg(not(feature = "postgres"))]
    {
        let _ = relay_deltas;
        Err(format!("{url}: built without the `postgres` feature"))
    }
}

/// Microseconds since the Unix epoch.
fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Prints a line at once (the parent reads them as they come).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A model that logs each call's session, prompt and times; with
/// `streams`, the agent streams its replies (each as one piece per part).
struct Logged(ScriptedLlm, bool);

impl Llm for Logged {
    fn provider(&self) -> &'static str {
        self.0.provider()
    }

    fn streams(&self) -> bool {
        self.1
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        Box::pin(async move {
            let prompt = messages
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map_or("-", |m| m.id.as_str());
            let start = now_us();
            let turn = self.0.complete(session_id, messages, tools, options).await;
            say(&format!("call {session_id} {prompt} {start} {}", now_us()));
            turn
        })
    }
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v}"))
        })
}

/// Runs the command line's command.
pub(crate) async fn main_with(args: &[String]) -> Result<(), String> {
    match args {
        [cmd, url, rest @ ..] if cmd == "serve" => {
            let store = open_with(url, rest.iter().any(|a| a == "--relay-deltas")).await?;
            let mut tools = ToolRegistry::new();
            tools
                .register(
                    DynamicTool::new(
                        "add",
                        "Adds a and b.",
                        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
                        |args, _| async move {
                            let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                            Ok(ToolOutput::new(json!(sum)))
                        },
                    )
                    .map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
            let approval = rest.iter().any(|a| a == "--approval");
            if approval {
                // A call that waits for a person; each run printed.
                tools
                    .register(
                        DynamicTool::new(
                            "delete",
                            "Deletes a note.",
                            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
                            |_, ctx| async move {
                                say(&format!("ran {}", ctx.session_id()));
                                // Long enough for a worker to die running it.
                                tokio::time::sleep(Duration::from_millis(300)).await;
                                Ok(ToolOutput::new(json!("deleted 1")))
                            },
                        )
                        .map_err(|e| e.to_string())?
                        .needs_approval(),
                    )
                    .map_err(|e| e.to_string())?;
            }
            let script = if approval {
                json!([
                    {"tool_calls": [{"id": "c1", "name": "delete", "arguments": {"n": 1}}]},
                    {"text": "deleted: {{c1}}"}
                ])
            } else {
                json!([
                    {"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
                    {"text": "2 + 3 = {{c1}}"}
                ])
            };
            let model = ScriptedLlm::from_json(script)
                .map_err(|e| e.to_string())?
                .per_prompt()
                .with_latency(Duration::from_millis(flag(rest, "--latency-ms", 20)));
            // A worker relaying deltas streams, so there are deltas to relay.
            let relay = rest.iter().any(|a| a == "--relay-deltas");
            let agent = Agent::builder(Logged(model, relay))
                .registry(tools)
                .gateway(Gateway::from_arc(store))
                .lease(Duration::from_millis(flag(rest, "--lease-ms", 2_000)))
                .max_concurrent_turns(usize::try_from(flag(rest, "--turns", 64)).unwrap_or(64))
                .build()
                .map_err(|e| e.to_string())?;
            say("ready");
            agent.serve().await.map_err(|e| e.to_string())
        }
        [cmd, url, session, count] if cmd == "post" => {
            let gateway = Gateway::from_arc(open(url).await?);
            let count: usize = count.parse().map_err(|_| format!("COUNT is a number, got {count}"))?;
            for i in 0..count {
                let m = Message::new(session.as_str(), Role::System, MessageType::Text, format!("{session} {i}"));
                gateway.post(m).await.map_err(|e| e.to_string())?;
            }
            say("posted");
            Ok(())
        }
        _ => Err("usage: serve STORE [--lease-ms N] [--latency-ms N] [--turns N] [--relay-deltas] [--approval] | post STORE SESSION COUNT".into()),
    }
}
