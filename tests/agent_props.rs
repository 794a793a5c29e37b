//! The pairing invariant of the agent loop under random scripts, tool
//! failures and interruptions: however turns end, every tool call in the
//! stored history has exactly one result pointing at it, and every user
//! message ends `processed`, `interrupted` or `error`.

use std::collections::HashMap;
use std::time::Duration;

use kesoku::llm::{Agent, ScriptedLlm};
use kesoku::{MessageType, Role, Status, ToolRegistry, tool};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Waits, then succeeds or fails.
///
/// # Arguments
/// * `fail` - Whether to fail.
/// * `ms` - How long to wait first.
#[tool]
async fn flaky(fail: bool, ms: u64) -> Result<String, String> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    if fail {
        Err("flaky failed".into())
    } else {
        Ok("fine".into())
    }
}

/// Runs alone, after a short wait.
#[tool(sequential)]
async fn alone() -> &'static str {
    tokio::time::sleep(Duration::from_millis(2)).await;
    "alone"
}

#[derive(Debug, Clone)]
enum Turn {
    Text,
    Calls(Vec<(bool, u64, bool)>),
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        1 => Just(Turn::Text),
        3 => prop::collection::vec((any::<bool>(), 0_u64..8, prop::bool::weighted(0.2)), 1..4)
            .prop_map(Turn::Calls),
    ]
}

fn script(turns: &[Turn]) -> Value {
    let mut n = 0;
    let turns: Vec<Value> = turns
        .iter()
        .map(|t| match t {
            Turn::Text => json!({"text": "answer"}),
            Turn::Calls(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|&(fail, ms, sequential)| {
                        n += 1;
                        if sequential {
                            json!({"id": format!("c{n}"), "name": "alone", "arguments": {}})
                        } else {
                            json!({"id": format!("c{n}"), "name": "flaky", "arguments": {"fail": fail, "ms": ms}})
                        }
                    })
                    .collect();
                json!({"tool_calls": calls})
            }
        })
        .collect();
    Value::Array(turns)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_call_gets_one_result_however_turns_end(
        turns in prop::collection::vec(turn(), 1..8),
        sends in prop::collection::vec(0_u64..12, 1..4),
        max_steps in 1_usize..5,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut tools = ToolRegistry::new();
            tools.register(flaky::TOOL).unwrap();
            tools.register(alone::TOOL).unwrap();
            let agent = Agent::builder(ScriptedLlm::from_json(script(&turns)).unwrap())
                .registry(tools)
                .max_steps(max_steps)
                .build()
                .unwrap();
            // Prompts sent a few milliseconds apart, each from its own task:
            // a later one interrupts whatever is running.
            let mut tasks = Vec::new();
            for (i, delay) in sends.iter().enumerate() {
                tokio::time::sleep(Duration::from_millis(*delay)).await;
                let agent = agent.clone();
                tasks.push(tokio::spawn(async move { agent.send("s", &format!("prompt {i}")).await }));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            let history = agent.history("s").await.unwrap();
            let mut results: HashMap<&str, usize> = HashMap::new();
            for m in history.iter().filter(|m| m.kind == MessageType::ToolResult) {
                *results.entry(m.parent_id.as_deref().unwrap()).or_default() += 1;
            }
            let calls: Vec<&str> = history
                .iter()
                .filter(|m| m.kind == MessageType::ToolCall)
                .map(|m| m.id.as_str())
                .collect();
            for call in &calls {
                assert_eq!(results.get(call), Some(&1), "call {call} in {history:#?}");
            }
            assert_eq!(results.len(), calls.len(), "a result without a call");
            for m in history.iter().filter(|m| m.role == Role::User) {
                assert!(
                    matches!(m.status, Status::Processed | Status::Interrupted | Status::Error),
                    "{m:?}"
                );
            }
            // The last prompt is never interrupted: nothing came after it.
            let last = history.iter().rev().find(|m| m.role == Role::User).unwrap();
            assert_ne!(last.status, Status::Interrupted);
        });
    }
}
