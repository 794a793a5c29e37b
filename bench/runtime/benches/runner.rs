//! The runner's per-call cost against the floor of doing the same work by
//! hand (with and without building the result `Message` that `execute`
//! returns), and a batch of 1,000 concurrent calls.
//!
//! Run with `cargo bench -p kesoku-bench --bench runner`; it prints the
//! ratios `docs/performance.md` quotes after criterion's own report.

// The tools are async only to exercise the async path.
#![allow(clippy::unused_async, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use kesoku::{
    Message, MessageType, Role, Status, ToolContext, ToolRequest, ToolRunner, keys, tool,
};
use serde::Deserialize;
use serde_json::json;

/// Adds two integers, on the blocking pool.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
fn add_sync(a: i64, b: i64) -> i64 {
    a + b
}

/// Adds two integers, awaited.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
async fn add_async(a: i64, b: i64) -> i64 {
    a + b
}

/// Sleeps 10 ms.
#[tool]
async fn sleep_10ms() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// The floor: what a hand-written handler does for the same call.
#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

fn add_direct(a: i64, b: i64) -> i64 {
    a + b
}

const RAW: &str = r#"{"a": 20, "b": 22}"#;

/// The `tool_result` message `execute` returns, built field by field.
fn hand_built_result(
    request: &ToolRequest,
    call: &Message,
    out: serde_json::Value,
    elapsed: Duration,
) -> Message {
    let mut m = Message::new(
        call.session_id.clone(),
        Role::Tool,
        MessageType::ToolResult,
        out.to_string(),
    )
    .with_sender(request.name.clone())
    .with_status(Status::Responded)
    .with_parent(call.id.clone());
    let meta = &mut m.metadata;
    meta.insert(keys::TOOL_NAME.into(), request.name.clone().into());
    meta.insert(keys::CALL_ID.into(), request.id.clone().into());
    meta.insert(keys::TOOL_RESULT.into(), out);
    #[allow(clippy::cast_possible_truncation)]
    meta.insert(
        keys::DURATION_MS.into(),
        (elapsed.as_millis() as u64).into(),
    );
    m
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn per_call(c: &mut Criterion) {
    let rt = runtime();
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("bench"));
    let mut group = c.benchmark_group("per_call");
    group.bench_function("floor", |b| {
        b.iter(|| {
            let args: AddArgs = serde_json::from_str(black_box(RAW)).expect("valid");
            let out = add_direct(args.a, args.b);
            serde_json::to_value(out).expect("encodes")
        });
    });
    // The same, plus building by hand the result `Message` that `execute`
    // must return: a fresh id, timestamps, copied ids and the metadata map.
    let request = ToolRequest::new("call_1", "add_async", json!(RAW));
    let call = Message::tool_call("bench", &request);
    group.bench_function("floor_with_message", |b| {
        b.iter(|| {
            let started = Instant::now();
            let args: AddArgs = serde_json::from_str(black_box(RAW)).expect("valid");
            let out = serde_json::to_value(add_direct(args.a, args.b)).expect("encodes");
            hand_built_result(&request, &call, out, started.elapsed())
        });
    });
    // OpenAI-style string arguments: the runner parses them, as the floor does.
    for name in ["add_async", "add_sync"] {
        let request = ToolRequest::new("call_1", name, json!(RAW));
        let call = Message::tool_call("bench", &request);
        group.bench_function(format!("execute_{name}"), |b| {
            b.to_async(&rt)
                .iter(|| runner.execute(black_box(&request), &call, None));
        });
    }
    // Anthropic/Gemini-style object arguments, and arguments that need the
    // validating slow path (a quoted number to coerce).
    for (id, args) in [
        ("execute_add_async_object_args", json!({"a": 20, "b": 22})),
        (
            "execute_add_async_coerced",
            json!(r#"{"a": "20", "b": 22}"#),
        ),
    ] {
        let request = ToolRequest::new("call_1", "add_async", args);
        let call = Message::tool_call("bench", &request);
        group.bench_function(id, |b| {
            b.to_async(&rt)
                .iter(|| runner.execute(black_box(&request), &call, None));
        });
    }
    group.finish();
}

fn batch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("bench"))
        .with_max_concurrency(1000);
    let calls: Vec<(ToolRequest, Message)> = (0..1000)
        .map(|i| {
            let request = ToolRequest::new(format!("call_{i}"), "sleep_10ms", json!({}));
            let call = Message::tool_call("bench", &request);
            (request, call)
        })
        .collect();
    let mut group = c.benchmark_group("batch");
    group.sample_size(20);
    group.bench_function("1000_calls_sleeping_10ms", |b| {
        b.to_async(&rt).iter(|| async {
            let results = runner.execute_all(&calls, None).await;
            assert_eq!(results.len(), 1000);
            results
        });
    });
    group.finish();

    // One plain wall-clock figure, for docs/performance.md.
    let started = Instant::now();
    let results = rt.block_on(runner.execute_all(&calls, None));
    let wall = started.elapsed();
    assert!(results.iter().all(|m| !m.is_tool_error()));
    println!("\n1,000 concurrent calls of a tool sleeping 10 ms: {wall:.2?} wall time");
}

fn report() {
    let median = |id| kesoku_bench::median_ns("per_call", id);
    println!("\nper call (median), against the floor of from_str + direct call + encode,");
    println!("and against that floor plus building the result Message by hand:");
    let (Some(floor), Some(with_message)) = (median("floor"), median("floor_with_message")) else {
        return;
    };
    println!("  {:<32} {floor:>9.0} ns", "floor");
    println!("  {:<32} {with_message:>9.0} ns", "floor_with_message");
    for id in [
        "execute_add_async",
        "execute_add_async_object_args",
        "execute_add_async_coerced",
        "execute_add_sync",
    ] {
        if let Some(t) = median(id) {
            println!(
                "  {id:<32} {t:>9.0} ns   {:>6.1}x floor   {:>5.1}x floor_with_message",
                t / floor,
                t / with_message
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    per_call(&mut c);
    batch(&mut c);
    c.final_summary();
    report();
}
