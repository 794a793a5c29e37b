//! What a pause for approval costs: a turn whose one call needs a
//! person's yes, until it pauses (`pause`), then the decision and the
//! turn resumed to its answer (`decide_resume`), on `MemoryStore` and on
//! `SqliteStore` (a file), each on a fresh session of 1,000 messages.
//!
//! Run with `cargo bench -p kesoku-bench --bench approval -- --warm-up-time 1 --measurement-time 5`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::{MemoryStore, MessageLog, SqliteStore, Store};
use kesoku::{DynamicTool, Message, MessageType, Role, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// The session's length before the measured turn.
const MESSAGES: usize = 1_000;

static NEXT: AtomicU64 = AtomicU64::new(0);

fn registry() -> Arc<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    let tool = DynamicTool::new(
        "delete_note",
        "Deletes a note.",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        |args, _| async move { Ok(ToolOutput::new(json!(format!("deleted {}", args["n"])))) },
    )
    .expect("a valid tool")
    .needs_approval();
    tools.register(tool).expect("one tool");
    Arc::new(tools)
}

/// Per prompt: a call that needs approval, then the answer.
fn model() -> ScriptedLlm {
    ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "delete_note", "arguments": {"n": 1}}]},
        {"text": "Done: {{c1}}"}
    ]))
    .expect("a valid script")
    .per_prompt()
}

fn prefill(session: &str) -> Vec<Message> {
    (0..MESSAGES)
        .map(|i| {
            let (role, status) = if i % 2 == 0 {
                (Role::User, Status::Processed)
            } else {
                (Role::Assistant, Status::Delivered)
            };
            Message::new(session, role, MessageType::Text, format!("message {i}"))
                .with_status(status)
        })
        .collect()
}

fn stores() -> Vec<(&'static str, Arc<dyn Store>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("approval.sqlite")).expect("a database"));
    vec![
        ("memory", Arc::new(MemoryStore::new()), None),
        ("sqlite", sqlite, Some(dir)),
    ]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("approval");
    group.sample_size(20).sampling_mode(SamplingMode::Flat);
    for (name, store, _dir) in stores() {
        let agent = Agent::builder(model())
            .registry(registry())
            .store(Arc::clone(&store))
            .build()
            .expect("an agent");
        // Each iteration: a fresh session, prefilled (untimed); its turn
        // to the pause, then the decision and the resumed turn.
        let run = |iters: u64, timed_part: usize| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let session = format!("s{}", NEXT.fetch_add(1, Ordering::Relaxed));
                    for m in prefill(&session) {
                        store.insert(&m).await.expect("prefill");
                    }
                    let start = Instant::now();
                    let paused = agent.send(&session, "Delete note 1").await.expect("a turn");
                    let mid = Instant::now();
                    assert_eq!(paused.status, TurnStatus::AwaitingApproval);
                    let waiting = paused.pending_approvals().remove(0);
                    assert!(
                        agent
                            .approve(&waiting.id)
                            .await
                            .expect("a decision")
                            .is_ready()
                    );
                    let done = agent
                        .resume(&waiting.prompt_id)
                        .await
                        .expect("resumed here");
                    assert_eq!(done.answer.as_deref(), Some("Done: deleted 1"));
                    total += if timed_part == 0 {
                        mid - start
                    } else {
                        mid.elapsed()
                    };
                }
                total
            })
        };
        group.bench_function(format!("{name}/pause"), |b| b.iter_custom(|n| run(n, 0)));
        group.bench_function(format!("{name}/decide_resume"), |b| {
            b.iter_custom(|n| run(n, 1));
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
}
