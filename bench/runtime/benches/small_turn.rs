//! The fixed cost of a small turn: one turn of the weather script (a tool
//! call, its result, the answer) on a session of about 10 messages in
//! `MemoryStore`, warm (its view kept), timed and with its heap
//! allocations counted (every thread's, through a counting allocator),
//! with the bare script and with each model call a real `ClaudeLlm`
//! request built in full (dropped by a [`Sink`]).
//!
//! Prints the median time and the median allocations of [`TURNS`] turns,
//! each on a fresh session after two untimed ones.
//!
//! Run with `cargo bench -p kesoku-bench --bench small_turn`.

#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ClaudeLlm, Llm, TurnStatus};
use kesoku::store::{MemoryStore, MessageLog as _, Store};
use kesoku_bench::{Encoded, Sink};

/// Counts every allocation (and reallocation) of the process.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Timed turns per case.
const TURNS: usize = 200;
/// Messages stored in each session before its turns.
const MESSAGES: usize = 8;

fn main() {
    let rt = kesoku_bench::runtime();
    let claude: Arc<dyn Llm> = Arc::new(ClaudeLlm::new("k").with_transport(Sink::new("claude")));
    println!("{:>10} {:>12} {:>12}", "model", "median µs", "allocations");
    for encoded in [false, true] {
        let (time, allocations) = rt.block_on(case(encoded.then(|| Arc::clone(&claude))));
        let name = if encoded { "claude" } else { "bare" };
        println!(
            "{name:>10} {:>12.1} {allocations:>12}",
            time.as_secs_f64() * 1e6
        );
    }
}

async fn case(claude: Option<Arc<dyn Llm>>) -> (Duration, u64) {
    let store = Arc::new(MemoryStore::new());
    let builder = match claude {
        Some(backend) => Agent::builder(Encoded {
            backend,
            script: kesoku_bench::weather_script(),
        }),
        None => Agent::builder(kesoku_bench::weather_script()),
    };
    let agent = builder
        .registry(kesoku_bench::weather_tools())
        .store(Arc::clone(&store) as Arc<dyn Store>)
        .max_steps(2)
        .build()
        .expect("an agent");
    let (mut times, mut counts) = (Vec::new(), Vec::new());
    for i in 0..TURNS {
        let session = format!("small-{i}");
        for m in kesoku_bench::weather_rounds(&session, MESSAGES) {
            store.insert(&m).await.expect("prefill");
        }
        for _ in 0..2 {
            agent.send(&session, "And in Lyon?").await.expect("a turn");
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let start = Instant::now();
        let outcome = agent.send(&session, "And in Paris?").await.expect("a turn");
        times.push(start.elapsed());
        counts.push(ALLOCATIONS.load(Ordering::Relaxed) - before);
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
    times.sort_unstable();
    counts.sort_unstable();
    (times[TURNS / 2], counts[TURNS / 2])
}
