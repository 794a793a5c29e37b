//! What a turn's store writes cost: one agent turn with one tool call
//! (the call, its result, the answer) on a session of about 1,000
//! messages, on `MemoryStore` and on `SqliteStore` (a file in a temp dir),
//! beside the floor of a write on the same disk: a bare `SQLite` commit in
//! WAL mode with `synchronous=NORMAL` (`SqliteStore`'s own settings), one
//! small `INSERT` per transaction, through rusqlite directly.
//!
//! - `store_turn/{memory,sqlite}`: a warm turn (the agent ran two turns
//!   of the session before, as every turn of a conversation but its first
//!   finds it), timed from `send` to its outcome. The sessions are
//!   prefilled before the store the agent uses is opened (a file is
//!   closed and opened again, which copies the log into it), so the
//!   turns pay for checkpointing their own writes, not the prefill's. Each model call is a
//!   real call of `ClaudeLlm` (its request built in full, with its prefix
//!   cache, and dropped by a [`Sink`] transport), then the turn comes from
//!   a script.
//! - `store_turn/{memory,sqlite}_bare`: the same with the bare script, so
//!   nearly all of the turn is the agent and the store.
//! - `store_turn/commit_floor`: one bare commit (`SQLite`'s own writes).
//!
//! After criterion's report it prints the ratio sqlite / memory, and how
//! many floors the difference is, from this run's medians.
//!
//! Run with `cargo bench -p kesoku-bench --bench store_turn -- --warm-up-time 1 --measurement-time 5`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use kesoku::llm::{Agent, ClaudeLlm, Llm, TurnStatus};
use kesoku::store::{MemoryStore, SqliteOptions, SqliteStore, Store};
use kesoku_bench::{Encoded, Sink};

/// The session's length when its timed turns start.
const MESSAGES: usize = 1_000;
/// Untimed turns before the timed ones: the first loads the whole
/// history, which is not what a turn of a conversation costs.
const WARM_TURNS: usize = 2;
/// Timed turns per session before a fresh one is filled: each adds four
/// messages, so the session stays between 1,000 and 1,100.
const TURNS_PER_SESSION: u64 = 25;

static NEXT: AtomicU64 = AtomicU64::new(0);

fn session_id() -> String {
    format!("turn-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Sqlite,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Sqlite => "sqlite",
        }
    }

    /// A new store holding `sessions` prefilled sessions (their ids); the
    /// temp dir lives as long as it is used. A file is closed after the
    /// prefill and opened again, which checkpoints the prefill's writes:
    /// a timed turn pays for copying its own writes into the file, as in
    /// a long run, not for copying the prefill's.
    fn open(self, sessions: u64) -> (Arc<dyn Store>, Vec<String>, Option<tempfile::TempDir>) {
        let ids: Vec<String> = (0..sessions).map(|_| session_id()).collect();
        let prefill = |store: Arc<dyn Store>| {
            let ids = ids.clone();
            async move {
                for session in &ids {
                    for m in kesoku_bench::weather_rounds(session, MESSAGES - 4 * WARM_TURNS) {
                        store.insert(&m).await.expect("prefill");
                    }
                }
            }
        };
        match self {
            Kind::Memory => {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                block_on(prefill(Arc::clone(&store)));
                (store, ids, None)
            }
            Kind::Sqlite => {
                let options = SqliteOptions::new();
                let dir = tempfile::tempdir().expect("a temp dir");
                let path = dir.path().join("turn.sqlite");
                let store: Arc<dyn Store> =
                    Arc::new(SqliteStore::open_with(&path, &options).expect("a database"));
                block_on(prefill(store));
                let store = SqliteStore::open_with(&path, &options).expect("the database again");
                (Arc::new(store), ids, Some(dir))
            }
        }
    }
}

/// Runs `work` to its end on a runtime of its own.
fn block_on(work: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(work);
}

/// Runs the warm turns of a prefilled session, bringing it to
/// [`MESSAGES`].
async fn warm_up(agent: &Agent, session: &str) {
    for _ in 0..WARM_TURNS {
        let outcome = agent.send(session, "And in Lyon?").await.expect("a turn");
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
}

fn turns(c: &mut Criterion) {
    let rt = kesoku_bench::runtime();
    let tools = kesoku_bench::weather_tools();
    // Shared by every agent, so its lowered schemas stay cached as in a
    // long-lived agent.
    let claude: Arc<dyn Llm> = Arc::new(ClaudeLlm::new("k").with_transport(Sink::new("claude")));
    let mut group = c.benchmark_group("store_turn");
    group.sample_size(20).sampling_mode(SamplingMode::Flat);
    let cases = [
        (Kind::Memory, true),
        (Kind::Sqlite, true),
        (Kind::Memory, false),
        (Kind::Sqlite, false),
    ];
    for (kind, encoding) in cases {
        let name = if encoding {
            kind.name().to_owned()
        } else {
            format!("{}_bare", kind.name())
        };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // A store and an agent per batch keep memory bounded.
                let (store, sessions, _dir) = kind.open(iters.div_ceil(TURNS_PER_SESSION));
                let builder = if encoding {
                    Agent::builder(Encoded {
                        backend: Arc::clone(&claude),
                        script: kesoku_bench::weather_script(),
                    })
                } else {
                    Agent::builder(kesoku_bench::weather_script())
                };
                let agent = builder
                    .registry(Arc::clone(&tools))
                    .store(Arc::clone(&store))
                    .max_steps(2)
                    .build()
                    .expect("an agent");
                rt.block_on(async {
                    let mut timed = Duration::ZERO;
                    let mut session = "";
                    for i in 0..iters {
                        if i % TURNS_PER_SESSION == 0 {
                            #[allow(clippy::cast_possible_truncation)] // a few sessions
                            let next = (i / TURNS_PER_SESSION) as usize;
                            session = &sessions[next];
                            warm_up(&agent, session).await;
                        }
                        let start = Instant::now();
                        let outcome = agent.send(session, "And in Paris?").await.expect("a turn");
                        timed += start.elapsed();
                        assert_eq!(outcome.status, TurnStatus::Completed);
                        assert_eq!(outcome.messages.len(), 3, "a call, its result, the answer");
                    }
                    timed
                })
            });
        });
    }
    group.bench_function("commit_floor", |b| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let conn = floor_connection(&dir.path().join("floor.sqlite"));
        let mut n = 0_i64;
        b.iter(|| {
            n += 1;
            let tx = conn.unchecked_transaction().expect("begin");
            tx.execute("INSERT INTO t (n, v) VALUES (?1, 'a small row')", [n])
                .expect("insert");
            tx.commit().expect("commit");
        });
    });
    group.finish();
}

/// A connection as `SqliteStore` opens its writer: WAL,
/// `synchronous=NORMAL`, and a table of small rows.
fn floor_connection(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("a database");
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .expect("WAL");
    assert!(mode.eq_ignore_ascii_case("wal"));
    conn.pragma_update(None, "synchronous", "NORMAL")
        .expect("synchronous");
    conn.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .expect("a table");
    conn
}

/// The ratios and the floor, from this run's medians.
fn summary() {
    let median = |id: &str| kesoku_bench::median_ns("store_turn", id);
    let Some(floor) = median("commit_floor") else {
        return;
    };
    println!(
        "\nstore_turn (medians, µs): model | memory | sqlite | sqlite/memory | commit floor | (sqlite − memory)/floor"
    );
    for (model, memory, sqlite) in [
        ("encoding", "memory", "sqlite"),
        ("bare", "memory_bare", "sqlite_bare"),
    ] {
        let (Some(memory), Some(sqlite)) = (median(memory), median(sqlite)) else {
            continue;
        };
        println!(
            "{model:>8} | {:>7.1} | {:>7.1} | {:>5.2}× | {:>5.1} | {:>5.1}",
            memory / 1e3,
            sqlite / 1e3,
            sqlite / memory,
            floor / 1e3,
            (sqlite - memory) / floor,
        );
    }
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    turns(&mut c);
    c.final_summary();
    summary();
}
