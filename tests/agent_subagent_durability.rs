//! Agents called as tools survive their process, on `SQLite` and on
//! `PostgreSQL`:
//! - a worker killed with SIGKILL while a child runs: a new worker
//!   resumes the parent, and the child goes on from its stored history
//!   (its model is asked only what is left), and the parent's call gets
//!   exactly one result;
//! - a call waiting for approval inside a child, decided by another
//!   process: the serving worker resumes the child, then the parent.
//!
//! The test binary re-runs itself as the other process: with
//! `KESOKU_NESTED_DB` set, `other_process` plays the role
//! `KESOKU_NESTED_ROLE` names.

#[cfg(feature = "postgres")]
#[path = "support/pg.rs"]
mod pg;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kesoku::Gateway;
use kesoku::llm::{
    Agent, AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, ToolDeclaration,
    TurnStatus,
};
#[cfg(feature = "postgres")]
use kesoku::store::PostgresStore;
use kesoku::store::SqliteStore;
use kesoku::{DynamicTool, Message, MessageType, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// Where the other process's store is: `sqlite:<path>` or
/// `postgres:<url>`; unset in the test itself.
const DB: &str = "KESOKU_NESTED_DB";
/// What the other process does: `kill` (run until killed) or
/// `decide:<call id>`.
const ROLE: &str = "KESOKU_NESTED_ROLE";
/// What the child's slow tool prints once it runs.
const SLOW_STARTED: &str = "@nested-slow-started";
/// What the decider prints once it decided.
const DECIDED: &str = "@decided";
/// How long the other process may take to reach its point.
const OTHER_DEADLINE: Duration = Duration::from_secs(30);
/// How long a resumed turn may take.
const RESUME_DEADLINE: Duration = Duration::from_secs(30);

/// A model that counts its calls.
struct Counted(ScriptedLlm, Arc<AtomicUsize>);

impl Llm for Counted {
    fn provider(&self) -> &'static str {
        "counted"
    }
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        history: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.complete(session_id, history, tools, options)
    }
}

/// What a process's agents did.
#[derive(Default, Clone)]
struct Counts {
    /// The child agent's model calls.
    child_calls: Arc<AtomicUsize>,
    /// The `charge` tool's runs.
    charges: Arc<AtomicUsize>,
}

fn script(turns: serde_json::Value) -> ScriptedLlm {
    // Per prompt: any process plays the turn the stored history is at.
    ScriptedLlm::from_json(turns).unwrap().per_prompt()
}

fn tools(counts: &Counts) -> ToolRegistry {
    let add = DynamicTool::new(
        "nested_add",
        "Adds two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        |args, _| async move {
            Ok(ToolOutput::new(json!(
                args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()
            )))
        },
    )
    .unwrap();
    let slow = DynamicTool::new(
        "nested_slow",
        "Runs a long job.",
        json!({"type": "object", "properties": {}}),
        |_, _| async move {
            print_line(SLOW_STARTED);
            tokio::time::sleep(Duration::from_secs(120)).await;
            Ok(ToolOutput::new(json!("finished")))
        },
    )
    .unwrap();
    let charges = Arc::clone(&counts.charges);
    let charge = DynamicTool::new(
        "charge",
        "Charges a card.",
        json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
        move |args, _| {
            let charges = Arc::clone(&charges);
            async move {
                charges.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::new(json!(format!("charged {}", args["cents"]))))
            }
        },
    )
    .unwrap()
    .needs_approval();
    let mut registry = ToolRegistry::new();
    for tool in [add, slow, charge] {
        registry.register(tool).unwrap();
    }
    registry
}

/// The parent and its children, over `gateway`. The parent calls `first`
/// (`delegate` or `bill`), then answers with its result. `delegate`'s
/// agent adds, then runs the slow job, then answers; `bill`'s charges
/// (which needs approval), then answers.
fn agents(gateway: &Gateway, counts: &Counts, first: &str) -> Agent {
    let child = Agent::builder(Counted(
        script(json!([
            {"tool_calls": [{"id": "k1", "name": "nested_add", "arguments": {"a": 2, "b": 3}}]},
            {"tool_calls": [{"id": "k2", "name": "nested_slow", "arguments": {}}]},
            {"text": "child: {{k1}}"}
        ])),
        Arc::clone(&counts.child_calls),
    ))
    .name("worker")
    .gateway(gateway.clone())
    .registry(tools(counts))
    .lease(Duration::from_secs(2))
    .build()
    .unwrap();
    let billing = Agent::builder(script(json!([
        {"tool_calls": [{"id": "b1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "billed: {{b1}}"}
    ])))
    .name("billing")
    .gateway(gateway.clone())
    .registry(tools(counts))
    .lease(Duration::from_secs(2))
    .build()
    .unwrap();
    Agent::builder(script(json!([
        {"tool_calls": [{"id": "c1", "name": first, "arguments": {"prompt": "Do the job"}}]},
        {"text": "parent: {{c1}}"}
    ])))
    .gateway(gateway.clone())
    .lease(Duration::from_secs(2))
    .sub_agent(child.as_tool("delegate", "Does the job."))
    .sub_agent(billing.as_tool("bill", "Bills the customer."))
    .build()
    .unwrap()
}

#[cfg_attr(
    not(feature = "postgres"),
    expect(
        clippy::unused_async,
        reason = "PostgreSQL's store connects asynchronously"
    )
)]
async fn open(db: &str) -> Gateway {
    match db.split_once(':').unwrap() {
        ("sqlite", path) => Gateway::new(SqliteStore::open(path).unwrap()),
        #[cfg(feature = "postgres")]
        ("postgres", url) => Gateway::new(PostgresStore::connect(url).await.unwrap()),
        (other, _) => panic!("unknown store kind {other}"),
    }
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// The other process's side: does nothing unless re-run by a test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_process() {
    let (Ok(db), Ok(role)) = (std::env::var(DB), std::env::var(ROLE)) else {
        return;
    };
    let gateway = open(&db).await;
    let first = if role == "kill" { "delegate" } else { "bill" };
    let agent = agents(&gateway, &Counts::default(), first);
    if role == "kill" {
        // Never returns: the child's slow tool outlives the test's patience.
        let outcome = agent.send("s", "Delegate the job").await;
        panic!("the turn ended before the kill: {outcome:?}");
    }
    let id = role.strip_prefix("decide:").unwrap();
    let decided = agent.approve(id).await.unwrap();
    print_line(&format!("{DECIDED} {decided:?}"));
}

/// Kills the other process if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the other process in `role` over `db` until it prints `until`;
/// then kills it (`kill`), or waits for it to exit.
fn run_other(db: &str, role: &str, until: &str, kill: bool) {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "other_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB, db)
        .env(ROLE, role)
        .stdout(Stdio::piped())
        .stderr(File::create(stderr.path()).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let said = || std::fs::read_to_string(stderr.path()).unwrap_or_default();
    let deadline = Instant::now() + OTHER_DEADLINE;
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains(until) => break,
            Ok(_) => {}
            Err(e) => panic!(
                "the other process ({role}) did not print {until}: {e}; stderr:\n{}",
                said()
            ),
        }
    }
    if kill {
        // SIGKILL: nothing is flushed, released or settled.
        child.0.kill().unwrap();
    }
    let status = child.0.wait().unwrap();
    assert_eq!(
        status.success(),
        !kill,
        "{role}: {status}; stderr:\n{}",
        said()
    );
}

/// The prompt of session `s`, once `serve` settled it `processed`.
async fn finished(agent: &Agent) -> Vec<Message> {
    let deadline = Instant::now() + RESUME_DEADLINE;
    loop {
        let history = agent.history("s").await.unwrap();
        if history
            .first()
            .is_some_and(|p| p.status == Status::Processed)
        {
            return history;
        }
        assert!(Instant::now() < deadline, "not resumed: {history:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn killed_mid_child_resumes_from_its_history(db: &str) {
    run_other(db, "kill", SLOW_STARTED, true);
    let gateway = open(db).await;
    let counts = Counts::default();
    let agent = agents(&gateway, &counts, "delegate");
    assert_eq!(
        agent.recover().await.unwrap(),
        2,
        "the parent's and the child's"
    );
    let serving = tokio::spawn({
        let agent = agent.clone();
        async move { agent.serve().await }
    });
    let history = finished(&agent).await;
    serving.abort();
    let call = &history[1];
    assert_eq!(call.kind, MessageType::ToolCall);
    // One result answers the parent's call: the child's answer.
    let results: Vec<_> = history
        .iter()
        .filter(|m| m.parent_id.as_deref() == Some(call.id.as_str()))
        .collect();
    assert_eq!(results.len(), 1, "{history:#?}");
    assert_eq!(results[0].content, "child: 5");
    assert_eq!(history.last().unwrap().content, "parent: child: 5");
    // The child went on from its history: one model call here (its
    // answer), not three; its add ran once, in the killed process.
    assert_eq!(counts.child_calls.load(Ordering::SeqCst), 1);
    let child = agent
        .history(&format!("s/delegate/{}", call.id))
        .await
        .unwrap();
    let adds = child
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall && m.content.starts_with("nested_add"))
        .count();
    assert_eq!(adds, 1, "{child:#?}");
    assert_eq!(child[0].status, Status::Processed);
}

async fn a_decision_from_another_process_resumes_child_and_parent(db: &str) {
    let gateway = open(db).await;
    let counts = Counts::default();
    let agent = agents(&gateway, &counts, "bill");
    let paused = agent.send("s", "Bill me").await.unwrap();
    assert_eq!(paused.status, TurnStatus::AwaitingApproval);
    let pending = agent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0].path[0].tool, "bill");
    let serving = tokio::spawn({
        let agent = agent.clone();
        async move { agent.serve().await }
    });
    run_other(db, &format!("decide:{}", pending[0].id), DECIDED, false);
    let history = finished(&agent).await;
    serving.abort();
    assert_eq!(
        history.last().unwrap().content,
        "parent: billed: charged 500"
    );
    assert_eq!(counts.charges.load(Ordering::SeqCst), 1);
    let results = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .count();
    assert_eq!(results, 1, "{history:#?}");
    assert!(agent.pending_approvals("s").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_decision_from_another_process_resumes_child_and_parent() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("nested.db").display());
    a_decision_from_another_process_resumes_child_and_parent(&db).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_decision_from_another_process_resumes_child_and_parent() {
    let Some(url) = pg::fresh_database("nested_decide").await else {
        return;
    };
    a_decision_from_another_process_resumes_child_and_parent(&format!("postgres:{url}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_worker_killed_mid_child_resumes_it_from_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", dir.path().join("nested.db").display());
    killed_mid_child_resumes_from_its_history(&db).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_worker_killed_mid_child_resumes_it_from_its_history() {
    let Some(url) = pg::fresh_database("nested_kill").await else {
        return;
    };
    killed_mid_child_resumes_from_its_history(&format!("postgres:{url}")).await;
}
