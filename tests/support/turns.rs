//! What the agent tests of leases and panics share: a tool, a wait for a
//! settled history, and the pairing check.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use kesoku::llm::Agent;
use kesoku::{DynamicTool, Message, MessageType, Role, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// Session `s`'s history once it holds `n` messages and every prompt is
/// settled (an answer is stored before its prompt is marked), or as it is
/// at `deadline`.
pub(crate) async fn history_of_at_least(
    agent: &Agent,
    n: usize,
    deadline: Instant,
) -> Vec<Message> {
    loop {
        let history = agent.history("s").await.unwrap();
        let settled = history.iter().all(|m| {
            m.role != Role::User || !matches!(m.status, Status::Processing | Status::PendingAgent)
        });
        if (history.len() >= n && settled) || Instant::now() > deadline {
            return history;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every tool call in `history` has exactly one result.
pub(crate) fn assert_paired(history: &[Message]) {
    for call in history.iter().filter(|m| m.kind == MessageType::ToolCall) {
        let results = history
            .iter()
            .filter(|m| {
                m.kind == MessageType::ToolResult
                    && m.parent_id.as_deref() == Some(call.id.as_str())
            })
            .count();
        assert_eq!(results, 1, "results of call {}: {history:#?}", call.id);
    }
}

/// A tool that adds a and b.
pub(crate) fn adder() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            DynamicTool::new(
                "add",
                "Adds a and b.",
                json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
                |args, _| async move {
                    Ok(ToolOutput::new(json!(
                        args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
                    )))
                },
            )
            .unwrap(),
        )
        .unwrap();
    tools
}
