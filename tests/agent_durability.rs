//! An agent process killed with SIGKILL in the middle of a turn loses no
//! message whose post returned, leaves a sound `SQLite` file, and its
//! interrupted turn resumes and completes in a new agent.
//!
//! The test binary re-runs itself as the child: with `CHILD_DB` set,
//! `child_runs_turns_until_killed` runs one whole turn, then a turn that
//! calls a fast tool, then a slow one that never returns. A gateway
//! listener in the child prints every message delivered to it as one JSON
//! line; the gateway delivers only after the store saved, so each printed
//! message is one whose post returned. The slow tool waits until its own
//! call was printed, then tells the parent, which kills the child and
//! checks the file in-process.

use kesoku::store::MessageLog;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kesoku::gateway::Filter;
use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::SqliteStore;
use kesoku::{Message, MessageType, Role, Status, ToolRegistry, keys, tool};
use serde_json::json;
use tokio::sync::Notify;

/// The database the child writes to; unset in the parent.
const CHILD_DB: &str = "KESOKU_AGENT_DURABILITY_DB";
/// What the child prints before each message it saw posted.
const POSTED: &str = "@posted ";
/// What the slow tool prints once it runs.
const SLOW_STARTED: &str = "@slow-started";
/// The whole exchange with the child, start to kill, must fit in this.
const CHILD_DEADLINE: Duration = Duration::from_secs(20);
/// The resumed turn must finish within this.
const RESUME_DEADLINE: Duration = Duration::from_secs(10);

/// The session both processes use.
const SESSION: &str = "s";
/// The prompt of the turn the kill interrupts.
const PROMPT: &str = "Add 2 and 3, then run the job";

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn durable_add(a: i64, b: i64) -> i64 {
    a + b
}

/// Set by the child's listener once it printed the slow tool's call, so
/// the parent has every message before it kills.
static SLOW_CALL_PRINTED: Notify = Notify::const_new();

/// Tells the parent it runs, then waits far longer than the parent does.
///
/// # Arguments
/// * `label` - What it waits for.
#[tool]
async fn durable_slow(label: String) -> String {
    SLOW_CALL_PRINTED.notified().await;
    print_line(SLOW_STARTED);
    tokio::time::sleep(Duration::from_secs(60)).await;
    format!("{label}: done")
}

fn tools() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(durable_add::TOOL).unwrap();
    r.register(durable_slow::TOOL).unwrap();
    r
}

/// One line on stdout, flushed at once: a line must not sit in a buffer
/// the kill throws away, and lines of two tasks must not interleave.
fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// The child's side: does nothing unless re-run by
/// `a_killed_agent_loses_nothing_and_its_turn_resumes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_runs_turns_until_killed() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let store = SqliteStore::open(path).unwrap();
    let script = json!([
        {"text": "warmed up"},
        {"tool_calls": [{"id": "fast", "name": "durable_add", "arguments": {"a": 2, "b": 3}}]},
        {"tool_calls": [{"id": "slow", "name": "durable_slow", "arguments": {"label": "job"}}]},
        {"text": "done: {{fast}} {{slow}}"}
    ]);
    let agent = Agent::builder(ScriptedLlm::from_json(script).unwrap())
        .registry(tools())
        .store(store)
        .build()
        .unwrap();
    // Listening before the first send: every message posted is delivered.
    let mut posted = agent
        .gateway()
        .listen(Filter::new().after(0))
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Some(delivery) = posted.next().await {
            let message = delivery.unwrap().message;
            print_line(&format!(
                "{POSTED}{}",
                serde_json::to_string(&message).unwrap()
            ));
            if message.kind == MessageType::ToolCall
                && message.meta_str(keys::CALL_ID) == Some("slow")
            {
                SLOW_CALL_PRINTED.notify_one();
            }
        }
    });
    let warm = agent.send(SESSION, "hi").await.unwrap();
    assert_eq!(warm.status, TurnStatus::Completed);
    // Never returns: the slow tool outlives the parent's patience.
    let outcome = agent.send(SESSION, PROMPT).await;
    panic!("the slow turn ended before the kill: {outcome:?}");
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Errors only mean it has exited already.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the child said before it was killed: the messages it saw posted,
/// in order.
fn run_child_until_slow_tool(path: &Path, stderr_path: &Path) -> Vec<Message> {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_runs_turns_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB, path)
        .stdout(Stdio::piped())
        // A file, not a pipe nobody reads: the child never blocks on it.
        .stderr(File::create(stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();

    // A thread reads, so the parent can give up at the deadline even if
    // the child hangs silently.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let child_said = || std::fs::read_to_string(stderr_path).unwrap_or_default();

    let deadline = Instant::now() + CHILD_DEADLINE;
    let mut posted = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "the slow tool did not start within {CHILD_DEADLINE:?}; {} messages seen; stderr:\n{}",
                posted.len(),
                child_said()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                "the child exited before the slow tool started; {} messages seen; stderr:\n{}",
                posted.len(),
                child_said()
            ),
        };
        // The first line may follow libtest's "test child_... ... ".
        if let Some((_, json)) = line.split_once(POSTED) {
            let message: Message = serde_json::from_str(json).unwrap_or_else(|e| {
                panic!("the child printed a message we cannot read: {e}: {json}")
            });
            posted.push(message);
        } else if line.contains(SLOW_STARTED) {
            break;
        }
    }
    // SIGKILL on Unix: no destructor runs, nothing is flushed or
    // checkpointed; the WAL is left as it is.
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "the child died of SIGKILL");
    }
    #[cfg(not(unix))]
    assert!(!status.success(), "the child was killed");
    posted
}

/// The ids of `messages`, in order.
fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// Every tool call in `history` has exactly one result, pointing at it,
/// and no result lacks its call.
fn assert_paired(history: &[Message]) {
    let mut results: HashMap<&str, usize> = HashMap::new();
    for m in history.iter().filter(|m| m.kind == MessageType::ToolResult) {
        let parent = m.parent_id.as_deref().expect("a tool result has a parent");
        *results.entry(parent).or_default() += 1;
    }
    let calls: Vec<&Message> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall)
        .collect();
    for call in &calls {
        assert_eq!(
            results.get(call.id.as_str()),
            Some(&1),
            "call {} ({}) has exactly one result",
            call.id,
            call.content
        );
    }
    assert_eq!(
        results.values().sum::<usize>(),
        calls.len(),
        "no result without a call"
    );
}

#[test]
fn a_killed_agent_loses_nothing_and_its_turn_resumes() {
    if std::env::var_os(CHILD_DB).is_some() {
        return;
    }
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let posted = run_child_until_slow_tool(&path, &dir.path().join("child.stderr"));

    // What the child posted, in order: the whole first turn, then the
    // second one up to the slow call, whose tool was running at the kill.
    let shape: Vec<(Role, MessageType, Option<&str>)> = posted
        .iter()
        .map(|m| (m.role, m.kind, m.meta_str(keys::CALL_ID)))
        .collect();
    assert_eq!(
        shape,
        [
            (Role::User, MessageType::Text, None),
            (Role::Assistant, MessageType::Text, None),
            (Role::User, MessageType::Text, None),
            (Role::Assistant, MessageType::ToolCall, Some("fast")),
            (Role::Tool, MessageType::ToolResult, Some("fast")),
            (Role::Assistant, MessageType::ToolCall, Some("slow")),
        ],
        "the messages the child saw posted: {posted:#?}"
    );
    let (prompt, slow_call) = (&posted[2], &posted[5]);
    assert_eq!(prompt.content, PROMPT);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let before = assert_intact_after_kill(&store, &posted).await;
        resume_and_check(&store, &before, prompt, slow_call).await;
    });
    assert!(
        started.elapsed() < CHILD_DEADLINE,
        "the test took {:?}",
        started.elapsed()
    );
}

/// Checks the reopened file: sound, and every message the child saw
/// posted stored as it was posted. Returns the stored session.
async fn assert_intact_after_kill(store: &SqliteStore, posted: &[Message]) -> Vec<Message> {
    let (warm_prompt, prompt) = (&posted[0], &posted[2]);
    assert_eq!(
        store.check_integrity().await.unwrap(),
        "ok",
        "PRAGMA integrity_check after the kill"
    );

    // Every message whose post returned is stored as posted, field for
    // field. User messages alone have moved on since, through their
    // status: the first turn finished, the second was claimed.
    for m in posted {
        let expected_status = if m.id == warm_prompt.id {
            Status::Processed
        } else if m.id == prompt.id {
            Status::Processing
        } else {
            m.status
        };
        let expected = Message {
            status: expected_status,
            ..m.clone()
        };
        let stored = store.get(&m.id).await.unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(&expected),
            "the stored {:?} {:?} message `{}`",
            m.role,
            m.kind,
            m.id
        );
    }
    // Nothing else was posted: the slow call has no result yet.
    let before = store.history(SESSION).await.unwrap();
    assert_eq!(ids(&before), ids(posted), "the stored session");
    before
}

/// Resumes the interrupted turn in a new agent on the reopened `store`,
/// and checks that it completes with the orphaned call healed.
async fn resume_and_check(
    store: &Arc<SqliteStore>,
    before: &[Message],
    prompt: &Message,
    slow_call: &Message,
) {
    // A new agent on the reopened file, as after a restart. Its script
    // starts at turn 1 for the session: the resumed turn answers.
    let script = json!([{"text": "resumed: {{fast}}"}]);
    let agent = Agent::builder(ScriptedLlm::from_json(script).unwrap())
        .registry(tools())
        .store(Arc::clone(store))
        .build()
        .unwrap();
    assert_eq!(
        agent.recover().await.unwrap(),
        1,
        "the one user message left `processing` goes back to `pending_agent`"
    );
    assert_eq!(
        store.get(&prompt.id).await.unwrap().map(|m| m.status),
        Some(Status::PendingAgent)
    );
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let deadline = Instant::now() + RESUME_DEADLINE;
    loop {
        let status = store.get(&prompt.id).await.unwrap().map(|m| m.status);
        if status == Some(Status::Processed) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the resumed turn did not finish within {RESUME_DEADLINE:?}: the prompt is {status:?}; history: {:#?}",
            store.history(SESSION).await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.abort();

    let history = store.history(SESSION).await.unwrap();
    // What was there is untouched and first.
    assert_eq!(ids(&history[..before.len()]), ids(before));
    let added = &history[before.len()..];
    assert_eq!(
        added.iter().map(|m| (m.role, m.kind)).collect::<Vec<_>>(),
        [
            (Role::Tool, MessageType::ToolResult),
            (Role::Assistant, MessageType::Text)
        ],
        "the resumed turn adds the healing result, then the answer: {added:#?}"
    );

    // The slow call, orphaned by the kill, got exactly one result: an
    // error saying it was interrupted.
    let slow_results: Vec<&Message> = history
        .iter()
        .filter(|m| {
            m.kind == MessageType::ToolResult
                && m.parent_id.as_deref() == Some(slow_call.id.as_str())
        })
        .collect();
    assert_eq!(
        slow_results.len(),
        1,
        "results of the slow call: {slow_results:#?}"
    );
    let healed = slow_results[0];
    assert!(
        healed.is_tool_error(),
        "the healing result is an error: {healed:#?}"
    );
    assert!(
        healed.content.contains("interrupted"),
        "the healing result says the call was interrupted: {}",
        healed.content
    );
    assert_eq!(healed.meta_str(keys::ERROR_KIND), Some("interrupted"));
    assert_eq!(healed.meta_str(keys::CALL_ID), Some("slow"));
    assert_paired(&history);

    // The answer quotes the fast tool's real result, from before the
    // kill, and answers the resumed prompt.
    let answer = history.last().unwrap();
    assert_eq!(answer.role, Role::Assistant);
    assert_eq!(answer.content, "resumed: 5");
    assert_eq!(answer.parent_id.as_deref(), Some(prompt.id.as_str()));
    let prompts: Vec<Status> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.status)
        .collect();
    assert_eq!(prompts, [Status::Processed, Status::Processed]);
    assert_eq!(store.check_integrity().await.unwrap(), "ok");
}
