//! The agent's own cost, with the model mocked at the depth of the
//! transport: every model call is a real call of one of the three
//! backends, through a transport ([`Sink`]) that drops the request body it
//! built and answers at once; the turn then comes from a script, without
//! waiting.
//!
//! - `agent_turn/{backend}_{store}_k{K}/{N}`: one turn of K model calls
//!   (K − 1 tool-call steps, then the answer) on a session that already
//!   holds N messages, with `MemoryStore` and `SqliteStore`. Every turn
//!   gets a fresh session prefilled through the store (not timed), so the
//!   history does not grow across iterations. K = 1 is the turn overhead;
//!   the per-step figures are printed after criterion's report.
//! - `agent_sessions/{store}`: 1,000 sessions at once, each a two-step
//!   turn against a model that answers after 20 ms; throughput is in
//!   stored messages (four per turn). `store_writes/{store}` is the same
//!   writes with no agent and no model, the store's share of that time.
//!
//! Run with `cargo bench -p kesoku-bench --bench agent -- --warm-up-time 1 --measurement-time 3`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use kesoku::llm::{
    Agent, ClaudeLlm, ContentBlock, GeminiLlm, Llm, OpenAiLlm, ScriptedLlm, TurnStatus,
};
use kesoku::store::{MemoryStore, SqliteStore, Store};
use kesoku::{
    DynamicTool, Message, MessageType, Role, Status, ToolOutput, ToolRegistry, ToolRequest, keys,
};
use kesoku_bench::{Encoded, Sink};
use serde_json::json;

/// History lengths, as in the `request` and `store` benches.
const LENGTHS: [usize; 3] = [10, 1_000, 10_000];
/// Model calls per measured turn: one answer alone (the turn overhead),
/// and three tool steps before it.
const STEPS: [usize; 2] = [1, 4];
/// Untimed turns before a warm one. The first loads and encodes the whole
/// history; the second pays for the allocator's tidying after it (glibc
/// consolidates the first's freed blocks at its next large allocation),
/// which is no step's cost.
const WARM_TURNS: usize = 2;
/// Concurrent sessions, and the turn limit the agent is given for them.
const SESSIONS: usize = 1_000;
/// Messages each concurrent turn stores: the prompt, the call, its
/// result and the answer.
const MESSAGES_PER_TURN: usize = 4;

/// Unique session ids across every case of one run.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn session_id(prefix: &str) -> String {
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The backend whose request body the mock builds.
#[derive(Clone, Copy, Debug)]
enum Wire {
    Claude,
    OpenAi,
    Gemini,
}

impl Wire {
    const ALL: [Wire; 3] = [Wire::Claude, Wire::OpenAi, Wire::Gemini];

    fn name(self) -> &'static str {
        match self {
            Wire::Claude => "claude",
            Wire::OpenAi => "openai",
            Wire::Gemini => "gemini",
        }
    }
}

/// The real backends, shared by every agent of a case so that their
/// lowered tool schemas stay cached, as they do in a long-lived agent.
#[derive(Clone)]
struct Backends {
    claude: Arc<ClaudeLlm>,
    openai: Arc<OpenAiLlm>,
    gemini: Arc<GeminiLlm>,
}

impl Backends {
    fn new() -> Self {
        Backends {
            claude: Arc::new(ClaudeLlm::new("k").with_transport(Sink::new("claude"))),
            openai: Arc::new(OpenAiLlm::new("k").with_transport(Sink::new("openai"))),
            gemini: Arc::new(GeminiLlm::new("k").with_transport(Sink::new("gemini"))),
        }
    }
}

impl Backends {
    fn get(&self, wire: Wire) -> Arc<dyn Llm> {
        match wire {
            Wire::Claude => self.claude.clone(),
            Wire::OpenAi => self.openai.clone(),
            Wire::Gemini => self.gemini.clone(),
        }
    }
}

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

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Sqlite,
}

impl Kind {
    const ALL: [Kind; 2] = [Kind::Memory, Kind::Sqlite];

    fn name(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Sqlite => "sqlite",
        }
    }

    /// A new, empty store; the temp dir lives as long as it is used.
    fn open(self) -> (Arc<dyn Store>, Option<tempfile::TempDir>) {
        match self {
            Kind::Memory => (Arc::new(MemoryStore::new()), None),
            Kind::Sqlite => {
                let dir = tempfile::tempdir().expect("a temp dir");
                let store = SqliteStore::open(dir.path().join("agent.sqlite")).expect("a database");
                (Arc::new(store), Some(dir))
            }
        }
    }
}

fn case(wire: Wire, kind: Kind, steps: usize) -> String {
    format!("{}_{}_k{steps}", wire.name(), kind.name())
}

/// One K-step turn on a history of N, per backend and store: the first
/// turn of an agent on the session (`warm` false), or a turn after one it
/// already ran there (`warm` true), which is what every turn of a
/// conversation but its first costs.
fn turns(c: &mut Criterion, name: &str, warm: bool, steps: &[usize]) {
    let rt = kesoku_bench::runtime();
    let backends = Backends::new();
    let tools = registry();
    let mut group = c.benchmark_group(name);
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for n in LENGTHS {
        for kind in Kind::ALL {
            for wire in Wire::ALL {
                for &k in steps {
                    let id = BenchmarkId::new(case(wire, kind, k), n);
                    group.bench_function(id, |b| {
                        b.iter_custom(|iters| {
                            // A store and an agent per batch keep memory
                            // bounded; the backends (and their cached
                            // lowered schemas) are shared.
                            let (store, _dir) = kind.open();
                            let model = Encoded {
                                backend: backends.get(wire),
                                // The untimed turns play it too.
                                script: script(k, 1 + WARM_TURNS),
                            };
                            let agent = Agent::builder(model)
                                .registry(Arc::clone(&tools))
                                .store(Arc::clone(&store))
                                .max_steps(k)
                                .build()
                                .expect("an agent");
                            rt.block_on(async {
                                let mut timed = Duration::ZERO;
                                for _ in 0..iters {
                                    let session = session_id("turn");
                                    // A warm turn's history holds N
                                    // messages once the untimed turns
                                    // stored their prompts, calls,
                                    // results and answers (2K each).
                                    let warm_turns = if warm { WARM_TURNS } else { 0 };
                                    let before = n.saturating_sub(2 * k * warm_turns);
                                    for m in history(&session, before) {
                                        store.insert(&m).await.expect("prefill");
                                    }
                                    for _ in 0..warm_turns {
                                        let outcome = agent
                                            .send(&session, "And in Lyon?")
                                            .await
                                            .expect("a turn");
                                        assert_eq!(outcome.status, TurnStatus::Completed);
                                    }
                                    let start = Instant::now();
                                    let outcome = agent
                                        .send(&session, "And in Paris?")
                                        .await
                                        .expect("a turn");
                                    timed += start.elapsed();
                                    assert_eq!(outcome.status, TurnStatus::Completed);
                                }
                                timed
                            })
                        });
                    });
                }
            }
        }
    }
    group.finish();
}

/// Posts `count` concurrent two-step turns to fresh sessions; returns
/// once all have completed.
async fn concurrent_turns(agent: &Agent, count: usize) {
    let turns: Vec<_> = (0..count)
        .map(|_| {
            let agent = agent.clone();
            let session = session_id("many");
            tokio::spawn(async move {
                let outcome = agent
                    .send(&session, "Weather in Paris?")
                    .await
                    .expect("a turn");
                assert_eq!(outcome.status, TurnStatus::Completed);
                assert_eq!(outcome.messages.len(), MESSAGES_PER_TURN - 1);
            })
        })
        .collect();
    for t in turns {
        t.await.expect("a turn task");
    }
}

/// The writes of `count` two-step turns, with no agent and no model: per
/// session the prompt, its claim, the call, the result, the answer and
/// the prompt's final status, from `count` tasks at once.
async fn store_writes(store: &Arc<dyn Store>, count: usize) {
    let writers: Vec<_> = (0..count)
        .map(|_| {
            let store = Arc::clone(store);
            let session = session_id("writes");
            tokio::spawn(async move {
                let mut h = history(&session, MESSAGES_PER_TURN).into_iter();
                let prompt = h
                    .next()
                    .expect("a prompt")
                    .with_status(Status::PendingAgent);
                store.insert(&prompt).await.expect("insert");
                let claim = [Status::PendingAgent];
                store
                    .transition(&prompt.id, &claim, Status::Processing)
                    .await
                    .expect("claim");
                for m in h {
                    store.insert(&m).await.expect("insert");
                }
                store
                    .transition(&prompt.id, &[Status::Processing], Status::Processed)
                    .await
                    .expect("settle");
            })
        })
        .collect();
    for w in writers {
        w.await.expect("a writer");
    }
}

/// 1,000 sessions, each a two-step turn, model latency 20 ms.
fn sessions(c: &mut Criterion) {
    let rt = kesoku_bench::runtime();
    let tools = registry();
    let mut group = c.benchmark_group("agent_sessions");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements((SESSIONS * MESSAGES_PER_TURN) as u64));
    for kind in Kind::ALL {
        let (store, _dir) = kind.open();
        let model = script(2, 1).with_latency(Duration::from_millis(20));
        let agent = Agent::builder(model)
            .registry(Arc::clone(&tools))
            .store(Arc::clone(&store))
            .max_concurrent_turns(SESSIONS)
            .build()
            .expect("an agent");
        group.bench_function(kind.name(), |b| {
            b.to_async(&rt).iter(|| concurrent_turns(&agent, SESSIONS));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("store_writes");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements((SESSIONS * MESSAGES_PER_TURN) as u64));
    for kind in Kind::ALL {
        let (store, _dir) = kind.open();
        group.bench_function(kind.name(), |b| {
            b.to_async(&rt).iter(|| store_writes(&store, SESSIONS));
        });
    }
    group.finish();
}

/// The per-step figures, from criterion's medians: a turn of K steps over
/// K, and the marginal step, (turn(K) − turn(1)) / (K − 1).
fn summary() {
    let k = STEPS[1];
    println!(
        "\nagent step overhead (µs): backend store N | turn k=1 | turn k={k} | turn/{k} | marginal step"
    );
    for n in LENGTHS {
        for kind in Kind::ALL {
            for wire in Wire::ALL {
                let median = |k| {
                    kesoku_bench::median_ns("agent_turn", &format!("{}/{n}", case(wire, kind, k)))
                };
                let (Some(one), Some(many)) = (median(1), median(k)) else {
                    continue;
                };
                #[allow(clippy::cast_precision_loss)]
                let kf = k as f64;
                println!(
                    "{:>6} {:>6} {n:>6} | {:>9.1} | {:>9.1} | {:>8.1} | {:>8.1}",
                    wire.name(),
                    kind.name(),
                    one / 1e3,
                    many / 1e3,
                    many / kf / 1e3,
                    (many - one) / (kf - 1.0) / 1e3,
                );
            }
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    turns(&mut c, "agent_turn", true, &STEPS);
    turns(&mut c, "agent_first_turn", false, &STEPS[..1]);
    sessions(&mut c);
    c.final_summary();
    summary();
}
