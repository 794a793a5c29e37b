//! What a turn costs when the agent kept no view of its session (a
//! fresh process, or a view dropped past `view_budget`): one turn of
//! the weather script (a tool call, its result, the answer; two model
//! calls, zero latency) on a session of 1,000, 10,000 and 100,000 stored
//! messages, on `MemoryStore` and `SqliteStore` (a file), with the
//! default compaction (`DropOldestTurns`) and a context window of
//! [`WINDOW`] tokens, which every case outgrows (1,000 messages are
//! about 15,000 tokens).
//!
//! - `cold`: `view_budget(0)`, so no view is kept and every turn reads
//!   its session from the store.
//! - `round_robin`: the default budget (50,000 messages) and eight
//!   sessions of 10,000 messages, their turns taken in turn: the views
//!   do not all fit, and least-recently-used drops the one needed next.
//! - `kept`: a budget large enough for every view, one session: the
//!   floor a turn costs when it reads only what was stored since.
//!
//! Medians of [`TURNS`] timed turns per case, after two untimed ones;
//! the ratio of each size's figure to the 1,000-message one is printed.
//!
//! Run with `cargo bench -p kesoku-bench --bench cold_turn`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, TurnStatus};
use kesoku::store::{MemoryStore, SqliteStore, Store};

/// The context window the agent is told (tokens, with the reply's room).
const WINDOW: u64 = 16_384;
/// Timed turns per case.
const TURNS: usize = 40;

fn main() {
    let rt = kesoku_bench::runtime();
    println!(
        "{:>12} {:>8} {:>10} {:>12} {:>8}",
        "case", "store", "messages", "median µs", "vs 1,000"
    );
    for sqlite in [false, true] {
        let name = if sqlite { "sqlite" } else { "memory" };
        let mut base = None;
        for n in [1_000, 10_000, 100_000] {
            let median = rt.block_on(case(sqlite, &[n], 0));
            let base = *base.get_or_insert(median);
            print_row("cold", name, n, median, base);
        }
        let median = rt.block_on(case(sqlite, &[10_000; 8], 50_000));
        print_row("round_robin", name, 80_000, median, base.unwrap_or(median));
        let median = rt.block_on(case(sqlite, &[10_000], 1_000_000));
        print_row("kept", name, 10_000, median, base.unwrap_or(median));
    }
}

fn print_row(case: &str, store: &str, n: usize, median: Duration, base: Duration) {
    println!(
        "{case:>12} {store:>8} {n:>10} {:>12.0} {:>7.2}×",
        median.as_secs_f64() * 1e6,
        median.as_secs_f64() / base.as_secs_f64()
    );
}

/// The median turn on sessions of `sizes` messages, taken in turn, with
/// views kept up to `budget` messages.
async fn case(sqlite: bool, sizes: &[usize], budget: usize) -> Duration {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("cold.sqlite");
    let store: Arc<dyn Store> = if sqlite {
        Arc::new(SqliteStore::open(&path).expect("a database"))
    } else {
        Arc::new(MemoryStore::new())
    };
    let sessions: Vec<String> = (0..sizes.len()).map(|i| format!("cold-{i}")).collect();
    for (session, &n) in sessions.iter().zip(sizes) {
        for m in kesoku_bench::weather_rounds(session, n) {
            store.insert(&m).await.expect("prefill");
        }
    }
    let agent = Agent::builder(kesoku_bench::weather_script())
        .registry(kesoku_bench::weather_tools())
        .store(store)
        .max_steps(2)
        .context_window(WINDOW)
        .view_budget(budget)
        .build()
        .expect("an agent");
    let mut times = Vec::with_capacity(TURNS);
    for i in 0..TURNS + 2 * sessions.len() {
        let session = &sessions[i % sessions.len()];
        let start = Instant::now();
        let outcome = agent.send(session, "And in Paris?").await.expect("a turn");
        let took = start.elapsed();
        assert_eq!(outcome.status, TurnStatus::Completed);
        if i >= 2 * sessions.len() {
            times.push(took);
        }
    }
    times.sort_unstable();
    times[times.len() / 2]
}
