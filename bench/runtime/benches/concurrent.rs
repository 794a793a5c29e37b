//! Turns per second of one `serve()` process whose sessions' turns run at
//! once: 1, 16 and 256 sessions, on `MemoryStore` and on `SqliteStore`
//! (a file in a temp dir), with a zero-latency model (the weather script:
//! one tool call, then the answer, so a turn makes four writes).
//!
//! Each round posts one prompt to each session at once and waits for
//! every answer; the first round is not timed (it makes the sessions).
//! Beside the turns, a task on the same runtime sleeps 1 ms at a time and
//! records how late it wakes: a store that stalled the runtime's worker
//! threads would show there. `max_concurrent_turns` is the session count.
//!
//! Run with `cargo bench -p kesoku-bench --bench concurrent`
//! (`KESOKU_BENCH_TURNS=N` for the turns timed per case, 4,096 unless
//! set; `KESOKU_BENCH_READERS=N` for `SqliteOptions::readers`;
//! `KESOKU_BENCH_ONLY=sqlite16,memory256` for only those cases, e.g. to
//! profile one).

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kesoku::gateway::Filter;
use kesoku::llm::Agent;
use kesoku::store::{MemoryStore, SqliteOptions, SqliteStore, Store};
use kesoku::{Message, MessageType, Role, Status};

/// Sessions whose turns run at once, per case.
const SESSIONS: [usize; 3] = [1, 16, 256];

fn main() {
    let turns: usize = std::env::var("KESOKU_BENCH_TURNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4_096);
    let runtime = kesoku_bench::runtime();
    println!(
        "{:>8} {:>8} {:>10} {:>9} {:>14} {:>14}",
        "sessions", "store", "turns/s", "vs memory", "tick late p99", "tick late max"
    );
    let only = std::env::var("KESOKU_BENCH_ONLY").ok();
    for sessions in SESSIONS {
        let mut memory = f64::NAN;
        for sqlite in [false, true] {
            let name = if sqlite { "sqlite" } else { "memory" };
            let wanted = format!("{name}{sessions}");
            if only
                .as_ref()
                .is_some_and(|o| !o.split(',').any(|c| c == wanted))
            {
                continue;
            }
            let run = runtime.block_on(case(sessions, sqlite, turns));
            if !sqlite {
                memory = run.rate;
            }
            // NaN (no memory case run) prints as such.
            println!(
                "{sessions:>8} {name:>8} {:>10.0} {:>8.0}% {:>11.2} ms {:>11.2} ms",
                run.rate,
                100.0 * run.rate / memory,
                run.late_p99.as_secs_f64() * 1e3,
                run.late_max.as_secs_f64() * 1e3,
            );
        }
    }
}

/// What one case measured.
struct Run {
    /// Turns per second.
    rate: f64,
    /// How late the 1 ms ticker woke: its 99th percentile and its worst.
    late_p99: Duration,
    late_max: Duration,
}

async fn case(sessions: usize, sqlite: bool, turns: usize) -> Run {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store: Arc<dyn Store> = if sqlite {
        let mut options = SqliteOptions::new();
        if let Some(readers) = std::env::var("KESOKU_BENCH_READERS")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            options = options.with_readers(readers);
        }
        let path = dir.path().join("concurrent.sqlite");
        Arc::new(SqliteStore::open_with(path, &options).expect("a database"))
    } else {
        Arc::new(MemoryStore::new())
    };
    let agent = Agent::builder(kesoku_bench::weather_script())
        .registry(kesoku_bench::weather_tools())
        .store(store)
        .max_concurrent_turns(sessions)
        .max_steps(2)
        .build()
        .expect("an agent");
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let gateway = agent.gateway().clone();
    let mut answers = gateway
        .listen(Filter::new().roles([Role::Assistant]))
        .await
        .expect("a listener");
    let mut round = async |r: usize| {
        for s in 0..sessions {
            let prompt = Message::new(
                format!("c-{s}"),
                Role::User,
                MessageType::Text,
                format!("round {r}"),
            )
            .with_status(Status::PendingAgent);
            gateway.post(prompt).await.expect("a post");
        }
        // Each turn stores two assistant messages: the call, the answer.
        for _ in 0..2 * sessions {
            answers
                .next()
                .await
                .expect("an answer")
                .expect("a delivery");
        }
    };
    round(0).await;
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = tokio::spawn(tick(Arc::clone(&stop)));
    let rounds = turns.div_ceil(sessions);
    let start = Instant::now();
    for r in 1..=rounds {
        round(r).await;
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Release);
    let mut late = ticker.await.expect("the ticker");
    server.abort();
    late.sort_unstable();
    #[allow(clippy::cast_precision_loss)] // a few thousand turns
    let rate = (rounds * sessions) as f64 / elapsed.as_secs_f64();
    Run {
        rate,
        late_p99: late.get(late.len() * 99 / 100).copied().unwrap_or_default(),
        late_max: late.last().copied().unwrap_or_default(),
    }
}

/// Sleeps 1 ms at a time until `stop`, and returns how late each wake-up
/// was.
async fn tick(stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut late = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let asked = Instant::now() + Duration::from_millis(1);
        tokio::time::sleep_until(asked.into()).await;
        late.push(Instant::now().saturating_duration_since(asked));
    }
    late
}
