//! The agent's own cost per turn, with nothing of a backend: the model is
//! a bare `ScriptedLlm` (no request built), so the turn is the agent's
//! machine, its view of the history, the runner and the store. It uses
//! only API that older versions have too, so it runs unchanged on an
//! older commit for a back-to-back comparison.
//!
//! - `bare_turn/{store}_k{K}/{N}`: one warm turn of K model calls (K − 1
//!   tool-call steps, then the answer) on a session of about N messages,
//!   with `MemoryStore` and `SqliteStore` (a file).
//!
//! Run with `cargo bench -p kesoku-bench --bench bare_turn -- --warm-up-time 1 --measurement-time 3`.

#![allow(missing_docs)]
use criterion::{BenchmarkId, Criterion, SamplingMode};
use kesoku::llm::{Agent, ContentBlock, ScriptedLlm, TurnStatus};
use kesoku::store::{MemoryStore, SqliteStore, Store};
use kesoku::{
    DynamicTool, Message, MessageType, Role, Status, ToolOutput, ToolRegistry, ToolRequest, keys,
};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
static NEXT: AtomicU64 = AtomicU64::new(0);
const WARM_TURNS: usize = 2;
/// `turns` times: `steps − 1` calls of `get_weather`, then an answer.
fn script(steps: usize, turns: usize) -> ScriptedLlm {
    let mut replies = Vec::new();
    for turn in 0..turns {
        replies.extend((1..steps).map(|i| {
            json!({"tool_calls": [{
                "id": format!("turn_{turn}_step_{i}"),
                "name": "get_weather",
                "arguments": {"city": "Paris", "days": 2}
            }]})
        }));
        replies.push(json!({"text": "It will be sunny in Paris."}));
    }
    ScriptedLlm::from_json(replies.into()).expect("a valid script")
}

fn registry() -> Arc<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    let tool = DynamicTool::new(
        "get_weather",
        "Reports the weather.",
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "How many days."}
            },
            "required": ["city"],
            "additionalProperties": false
        }),
        |args, _| async move {
            Ok(ToolOutput::new(
                json!({"sky": "sunny", "city": args["city"].clone()}),
            ))
        },
    )
    .expect("a valid tool");
    tools.register(tool).expect("one tool");
    Arc::new(tools)
}

/// A stored history of `n` messages, four per round (question, call,
/// result with an image one round in eight, answer) as the `request`
/// bench builds it, padded with text so that no call is left unanswered
/// (an orphan would be healed, which is not what a step costs).
fn history(session: &str, n: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(n);
    let mut round = 0;
    while out.len() + 4 <= n {
        out.push(
            Message::new(
                session,
                Role::User,
                MessageType::Text,
                format!("Weather in city {round}?"),
            )
            .with_status(Status::Processed),
        );
        let request = ToolRequest::new(
            format!("call_{round}"),
            "get_weather",
            json!({"city": format!("city {round}"), "days": 2}),
        );
        let call = Message::tool_call(session, &request);
        let mut result = Message::new(
            session,
            Role::Tool,
            MessageType::ToolResult,
            format!("sunny in city {round}"),
        )
        .with_parent(call.id.clone())
        .with_status(Status::Responded);
        result
            .metadata
            .insert(keys::CALL_ID.into(), request.id.clone().into());
        result
            .metadata
            .insert(keys::TOOL_NAME.into(), request.name.clone().into());
        result.metadata.insert(
            keys::TOOL_RESULT.into(),
            json!({"sky": "sunny", "round": round}),
        );
        if round % 8 == 0 {
            let image = ContentBlock::image("image/png", vec![7; 256]);
            result.metadata.insert(
                keys::CONTENT_BLOCKS.into(),
                serde_json::to_value([image]).expect("a block"),
            );
        }
        let answer = Message::new(
            session,
            Role::Assistant,
            MessageType::Text,
            format!("It is sunny in city {round}."),
        );
        out.extend([call, result, answer]);
        round += 1;
    }
    while out.len() < n {
        let role = if out.len() % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        out.push(Message::new(session, role, MessageType::Text, "Thanks."));
    }
    out
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tools = registry();
    let mut group = c.benchmark_group("bare_turn");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for n in [1_000usize, 10_000] {
        for sqlite in [false, true] {
            for k in [1usize, 4] {
                let id = BenchmarkId::new(
                    format!("{}_k{k}", if sqlite { "sqlite" } else { "memory" }),
                    n,
                );
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let dir = tempfile::tempdir().unwrap();
                        let store: Arc<dyn Store> = if sqlite {
                            Arc::new(SqliteStore::open(dir.path().join("a.sqlite")).unwrap())
                        } else {
                            Arc::new(MemoryStore::new())
                        };
                        let turns =
                            usize::try_from(iters).expect("iterations fit") * (1 + WARM_TURNS);
                        let agent = Agent::builder(script(k, turns))
                            .registry(Arc::clone(&tools))
                            .store(Arc::clone(&store))
                            .max_steps(k)
                            .build()
                            .unwrap();
                        rt.block_on(async {
                            let mut timed = Duration::ZERO;
                            for _ in 0..iters {
                                let session = format!("s{}", NEXT.fetch_add(1, Ordering::Relaxed));
                                for m in history(&session, n.saturating_sub(2 * k * WARM_TURNS)) {
                                    store.insert(&m).await.unwrap();
                                }
                                for _ in 0..WARM_TURNS {
                                    let o = agent.send(&session, "And in Lyon?").await.unwrap();
                                    assert_eq!(o.status, TurnStatus::Completed);
                                }
                                let start = Instant::now();
                                let o = agent.send(&session, "And in Paris?").await.unwrap();
                                timed += start.elapsed();
                                assert_eq!(o.status, TurnStatus::Completed);
                            }
                            timed
                        })
                    });
                });
            }
        }
    }
    group.finish();
}
