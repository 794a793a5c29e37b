//! What a step costs on a long session once compaction is active: an
//! agent turn (a tool call, its result, the answer: two model calls) on
//! a session of N = 1,000 and N = 100,000 stored messages, with a context
//! window small enough that both are compacted (to about 3,000 tokens).
//! Each model call is a real `ClaudeLlm` building its request in full,
//! with its prefix cache (dropped by a [`Sink`]); then the turn comes
//! from a script.
//!
//! Sessions are prefilled in a `MemoryStore` and each warmed by two
//! untimed turns (the first loads the whole history and compacts
//! it, which is once per process); then at most [`TURNS_PER_SESSION`]
//! timed turns (or N/10, four messages each) run before a fresh session:
//! N grows from 1,000 to at most 2,000, and from 100,000 to at most
//! 140,000.
//! The ratio printed at the end is the step's cost at 100,000 over its
//! cost at 1,000, from this run's medians.
//!
//! Run with `cargo bench -p kesoku-bench --bench compaction -- --warm-up-time 1 --measurement-time 5`.

#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{Criterion, SamplingMode};
use kesoku::agent::Compaction;
use kesoku::llm::{Agent, ClaudeLlm, Llm};
use kesoku::store::{MemoryStore, Store};
use kesoku_bench::{Encoded, Sink};

/// Timed turns per session, at least: N grows by four messages a turn.
const TURNS_PER_SESSION: u64 = 250;
/// The tokens a request may hold beyond the reply's room.
const USABLE: u64 = 6_000;

fn steps(c: &mut Criterion) {
    let rt = kesoku_bench::runtime();
    let tools = kesoku_bench::weather_tools();
    let claude: Arc<dyn Llm> = Arc::new(ClaudeLlm::new("k").with_transport(Sink::new("claude")));
    let mut group = c.benchmark_group("compaction");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for n in [1_000_usize, 100_000] {
        // One agent and store for every batch, a fresh session every
        // `chunk` turns: prefilled and warmed untimed.
        let store = Arc::new(MemoryStore::new());
        let agent = Agent::builder(Encoded {
            backend: Arc::clone(&claude),
            script: kesoku_bench::weather_script(),
        })
        .registry(Arc::clone(&tools))
        .store(Arc::clone(&store) as Arc<dyn Store>)
        .max_steps(2)
        .context_window(USABLE + 4_096)
        .compaction(Compaction::DropOldestTurns)
        .build()
        .expect("an agent");
        // A tenth of N at most: N grows by at most 40%.
        let chunk = TURNS_PER_SESSION.max(n as u64 / 10);
        let mut sessions = kesoku_bench::WarmSessions::new(Arc::clone(&store), n, chunk);
        group.bench_function(format!("step_at_{n}"), |b| {
            b.iter_custom(|iters| rt.block_on(sessions.steps(&agent, iters)));
        });
    }
    group.finish();
}

fn summary() {
    let median = |id: &str| kesoku_bench::median_ns("compaction", id);
    if let (Some(small), Some(large)) = (median("step_at_1000"), median("step_at_100000")) {
        println!(
            "\ncompaction (medians, µs per step): N = 1,000: {:.1} | N = 100,000: {:.1} | ratio {:.2}×",
            small / 1e3,
            large / 1e3,
            large / small
        );
    }
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    steps(&mut c);
    c.final_summary();
    summary();
}
