//! A child's turn against a top-level one: the same agent (the weather
//! script: calls of a tool, a step each, then the answer, over
//! `MemoryStore`) run by `send`, and run as the tool of a parent
//! (`Agent::as_tool`). Each is the first turn of its session, as a
//! child's always is. The child's share of a parent's turn is the
//! parent's turn with the child less the same parent turn with a plain
//! tool in its place (same name, same script). Every turn runs in a task
//! of its own, as `serve` runs turns, on one thread. With 1 and [`STEPS`]
//! steps: the difference, over the steps added, is what one step costs,
//! top-level and in a child. Timed and with heap allocations counted (a
//! counting allocator), medians of [`TURNS`] turns.
//!
//! Run with `cargo bench -p kesoku-bench --bench nested_turn`.

#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::{DynamicTool, Gateway, ToolOutput, ToolRegistry};
use serde_json::json;

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
const TURNS: usize = 300;

fn main() {
    // One thread: what a step costs, without the wake-ups between a
    // machine's cores that an idle one adds to whichever task waits (on
    // two workers, a turn in a task of its own measured 17 to 84 µs from
    // run to run).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!("{:>34} {:>12} {:>12}", "case", "median µs", "allocations");
    let row = |name: &str, (t, a): (Duration, u64)| {
        println!("{name:>34} {:>12.1} {a:>12}", t.as_secs_f64() * 1e6);
    };
    let mut per_step = Vec::new();
    for steps in [1, STEPS] {
        let gateway = Gateway::in_memory();
        let child = Agent::builder(steps_script(steps))
            .name("weather")
            .registry(kesoku_bench::weather_tools())
            .gateway(gateway.clone())
            .max_steps(STEPS + 1)
            .build()
            .expect("the child");
        let with_child = Agent::builder(parent_script())
            .gateway(gateway.clone())
            .sub_agent(child.as_tool("ask_weather", "Asks the weather agent."))
            .build()
            .expect("the parent");
        let with_stub = Agent::builder(parent_script())
            .gateway(gateway)
            .registry(stub())
            .build()
            .expect("the parent with a plain tool");
        let top = rt.block_on(first_turns(&format!("top{steps}"), &child));
        let nested = rt.block_on(first_turns(&format!("nested{steps}"), &with_child));
        let stubbed = rt.block_on(first_turns(&format!("stub{steps}"), &with_stub));
        let child_share = (
            nested.0.saturating_sub(stubbed.0),
            nested.1.saturating_sub(stubbed.1),
        );
        row(&format!("top-level turn, {steps} step(s)"), top);
        row(&format!("the child's turn, {steps} step(s)"), child_share);
        per_step.push((top, child_share));
    }
    let marginal = |a: (Duration, u64), b: (Duration, u64)| {
        let n = u32::try_from(STEPS - 1).expect("a few steps");
        (
            b.0.saturating_sub(a.0) / n,
            (b.1.saturating_sub(a.1)) / u64::from(n),
        )
    };
    row("a step, top-level", marginal(per_step[0].0, per_step[1].0));
    row("a step, in a child", marginal(per_step[0].1, per_step[1].1));
}

/// Steps the longer child takes.
const STEPS: usize = 5;

/// The child's script: `steps` calls of `get_weather`, one a step, then
/// the answer.
fn steps_script(steps: usize) -> ScriptedLlm {
    let mut turns: Vec<serde_json::Value> = (0..steps)
        .map(|i| json!({"tool_calls": [{"id": format!("w{i}"), "name": "get_weather", "arguments": {"city": "Paris"}}]}))
        .collect();
    turns.push(json!({"text": "It will be sunny in Paris."}));
    ScriptedLlm::from_json(serde_json::Value::Array(turns))
        .expect("a valid script")
        .per_prompt()
}

/// The parent's script: one call of `ask_weather`, then the answer.
fn parent_script() -> ScriptedLlm {
    ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "p1", "name": "ask_weather", "arguments": {"prompt": "Weather in Paris?"}}]},
        {"text": "Sunny, it says."}
    ]))
    .expect("a valid script")
    .per_prompt()
}

/// `ask_weather` as a plain tool answering at once.
fn stub() -> ToolRegistry {
    let tool = DynamicTool::new(
        "ask_weather",
        "Asks the weather agent.",
        json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
        |_, _| async { Ok(ToolOutput::new(json!("It will be sunny in Paris."))) },
    )
    .expect("a valid tool");
    let mut registry = ToolRegistry::new();
    registry.register(tool).expect("one tool");
    registry
}

/// The median time and allocations of the first turn of a session of
/// `agent`, as a child's turn always is.
async fn first_turns(name: &str, agent: &Agent) -> (Duration, u64) {
    let (mut times, mut counts) = (Vec::new(), Vec::new());
    for i in 0..TURNS {
        let session = format!("{name}-{i}");
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let start = Instant::now();
        // In a task of its own, as `serve` runs each turn (and as a
        // child's turn runs): not on the thread that blocks on the bench.
        let turn = {
            let agent = agent.clone();
            tokio::spawn(async move { agent.send(&session, "Weather in Paris?").await })
        };
        let outcome = turn.await.expect("no panic").expect("a turn");
        times.push(start.elapsed());
        counts.push(ALLOCATIONS.load(Ordering::Relaxed) - before);
        assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
    }
    times.sort_unstable();
    counts.sort_unstable();
    (times[TURNS / 2], counts[TURNS / 2])
}
