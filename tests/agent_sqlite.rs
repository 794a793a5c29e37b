//! Tried as a new user would: two tools, a scripted model and a `SQLite`
//! file get a multi-step answer from `agent.send`; the file, reopened,
//! holds the whole turn, and a later agent on it resumes the session.

use kesoku::store::MessageLog;
use std::error::Error;

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::SqliteStore;
use kesoku::{Message, MessageType, Role, Status, ToolRegistry, keys, tool};
use serde_json::json;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Multiplies two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn multiply(a: i64, b: i64) -> i64 {
    a * b
}

fn registry() -> Result<ToolRegistry, Box<dyn Error>> {
    let mut registry = ToolRegistry::new();
    registry.register(add::TOOL)?;
    registry.register(multiply::TOOL)?;
    Ok(registry)
}

/// The call `call_id` to `tool` answers the session's first (user)
/// message, and has exactly one result, `result`, whose `parent_id` is
/// the call's message id.
fn assert_answered(
    history: &[Message],
    call_id: &str,
    tool: &str,
    result: &str,
) -> Result<(), Box<dyn Error>> {
    let user = &history[0];
    let call = history
        .iter()
        .find(|m| m.kind == MessageType::ToolCall && m.meta_str(keys::CALL_ID) == Some(call_id))
        .ok_or_else(|| format!("no stored call `{call_id}`"))?;
    assert_eq!(call.meta_str(keys::TOOL_NAME), Some(tool));
    assert_eq!(call.parent_id.as_deref(), Some(user.id.as_str()));
    let results: Vec<&Message> = history
        .iter()
        .filter(|m| {
            m.kind == MessageType::ToolResult && m.parent_id.as_deref() == Some(call.id.as_str())
        })
        .collect();
    assert_eq!(results.len(), 1, "one result for `{call_id}`: {results:#?}");
    assert_eq!(results[0].content, result, "the result of `{call_id}`");
    assert_eq!(results[0].meta_str(keys::CALL_ID), Some(call_id));
    assert!(!results[0].is_tool_error(), "`{call_id}` succeeded");
    Ok(())
}

const PROMPT: &str = "What are 2 + 3 and 4 * 5?\nBe brief.";

#[tokio::test]
async fn a_multi_step_turn_is_kept_in_the_file_and_resumed() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kesoku.sqlite");

    // Step 1: both calls at once; step 2: the answer, quoting both.
    let llm = ScriptedLlm::from_json(json!([
        {"tool_calls": [
            {"id": "call-add", "name": "add", "arguments": {"a": 2, "b": 3}},
            {"id": "call-mul", "name": "multiply", "arguments": {"a": 4, "b": 5}}
        ]},
        {"text": "2 + 3 = {{call-add}} and 4 * 5 = {{call-mul}}."}
    ]))?;
    let store = SqliteStore::open(&path)?;
    let agent = Agent::builder(llm)
        .registry(registry()?)
        .system_prompt("You are terse.")
        .store(store)
        .max_steps(8)
        .build()?;
    let outcome = agent.send("session-1", PROMPT).await?;
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("2 + 3 = 5 and 4 * 5 = 20."));
    // Everything lives in the file: nothing of the agent survives this.
    drop(agent);

    let store = SqliteStore::open(&path)?;
    let history = store.history("session-1").await?;
    let shape: Vec<(Role, MessageType)> = history.iter().map(|m| (m.role, m.kind)).collect();
    assert_eq!(
        shape,
        [
            (Role::User, MessageType::Text),
            (Role::Assistant, MessageType::ToolCall),
            (Role::Assistant, MessageType::ToolCall),
            (Role::Tool, MessageType::ToolResult),
            (Role::Tool, MessageType::ToolResult),
            (Role::Assistant, MessageType::Text),
        ],
        "the reopened history: {history:#?}"
    );

    let user = &history[0];
    assert_eq!(user.content, PROMPT);
    assert_eq!(user.status, Status::Processed, "the turn finished");
    assert_eq!(user.sender, "user");

    // Each result answers its call, by the call's message id.
    assert_answered(&history, "call-add", "add", "5")?;
    assert_answered(&history, "call-mul", "multiply", "20")?;

    let answer = history.last().ok_or("an empty history")?;
    assert_eq!(answer.content, "2 + 3 = 5 and 4 * 5 = 20.");
    assert_eq!(answer.parent_id.as_deref(), Some(user.id.as_str()));

    // Every field round-trips: what the turn posted is what the file holds
    // (ids, timestamps to the nanosecond, metadata, parents, statuses).
    assert_eq!(outcome.messages, history[1..], "posted vs. reopened");

    let sessions = store.sessions().await?;
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let session = &sessions[0];
    assert_eq!(session.id, "session-1");
    assert_eq!(
        session.title.as_deref(),
        Some("What are 2 + 3 and 4 * 5?"),
        "titled after the first line of the first prompt"
    );
    assert_eq!(session.messages, 6);
    assert!(session.created <= session.updated);
    assert_eq!(session.created, user.timestamp);
    assert_eq!(
        Some(session.updated),
        history.iter().map(|m| m.timestamp).max(),
        "updated: the latest message"
    );

    // A new agent on the reopened file: its model sees the earlier turn
    // (the placeholders quote results stored by the first agent).
    let llm = ScriptedLlm::from_json(json!([
        {"text": "Earlier: {{call-add}} and {{call-mul}}."}
    ]))?;
    let agent = Agent::builder(llm)
        .registry(registry()?)
        .system_prompt("You are terse.")
        .store(store)
        .max_steps(8)
        .build()?;
    let again = agent.send("session-1", "What did you find?").await?;
    assert_eq!(again.status, TurnStatus::Completed);
    assert_eq!(again.answer.as_deref(), Some("Earlier: 5 and 20."));
    drop(agent);

    let history = SqliteStore::open(&path)?.history("session-1").await?;
    let prompts: Vec<(&str, Status)> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.content.as_str(), m.status))
        .collect();
    assert_eq!(
        prompts,
        [
            (PROMPT, Status::Processed),
            ("What did you find?", Status::Processed)
        ]
    );
    assert_eq!(
        history.len(),
        8,
        "the first turn's six, then a prompt and its answer"
    );
    Ok(())
}
