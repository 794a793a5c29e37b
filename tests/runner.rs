//! `ToolRunner`: every step of the lifecycle, and the packaging of results.

// Some tools are async only to exercise the async path.
#![allow(clippy::unused_async)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kesoku::{
    Gateway, Message, MessageType, Role, State, Status, ToolContext, ToolRequest, ToolRunner, tool,
};
use serde_json::{Value, json};

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Sleeps, then answers.
///
/// # Arguments
/// * `ms` - How long to sleep.
#[tool(timeout = "50ms")]
async fn nap(ms: u64) -> &'static str {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    "rested"
}

/// Sleeps without a timeout of its own.
///
/// # Arguments
/// * `ms` - How long to sleep.
#[tool]
async fn long_nap(ms: u64) -> &'static str {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    "rested long"
}

/// Panics while awaiting.
#[tool]
async fn async_boom() -> u8 {
    tokio::task::yield_now().await;
    panic!("async kaboom")
}

/// Reports the thread it ran on.
#[tool]
fn thread_id() -> String {
    format!("{:?}", std::thread::current().id())
}

struct Tally(AtomicUsize);

/// Counts with shared state.
#[tool]
fn count(tally: State<Tally>) -> usize {
    tally.0.0.fetch_add(1, Ordering::SeqCst) + 1
}

/// Marks that a newer user message arrived, as a UI would.
#[tool]
fn user_typed(flag: State<AtomicBool>) -> &'static str {
    flag.store(true, Ordering::SeqCst);
    "noted"
}

/// Posts progress, then finishes.
///
/// # Arguments
/// * `steps` - How many steps.
#[tool]
async fn progress(steps: u32, context: &ToolContext) -> Result<String, String> {
    for i in 1..=steps {
        context
            .post(format!("step {i} of {steps}"))
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok("done".into())
}

/// Tracks how many calls of itself overlap.
#[derive(Default)]
struct Overlap {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Overlap {
    async fn hold(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(15)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

struct SeqOverlap(Overlap);
struct ParOverlap(Overlap);

/// Runs alone.
#[tool(sequential)]
async fn alone(o: State<SeqOverlap>) {
    o.0.0.hold().await;
}

/// Runs beside others.
#[tool]
async fn together(o: State<ParOverlap>) {
    o.0.0.hold().await;
}

fn context() -> ToolContext {
    ToolContext::new("session-9")
        .with_original_msg_id("user-msg-1")
        .with_state(Tally(AtomicUsize::new(0)))
        .with_state(AtomicBool::new(false))
        .with_state(SeqOverlap(Overlap::default()))
        .with_state(ParOverlap(Overlap::default()))
}

fn runner() -> ToolRunner {
    ToolRunner::new(kesoku::default_registry(), context())
}

fn call(id: &str, name: &str, args: Value) -> (ToolRequest, Message) {
    let request = ToolRequest::new(id, name, args);
    let message = Message::tool_call("session-9", &request);
    (request, message)
}

async fn run_one(runner: &ToolRunner, name: &str, args: Value) -> Message {
    let (request, message) = call("call_1", name, args);
    runner.execute(&request, &message, None).await
}

fn error_of(m: &Message) -> (&str, &str) {
    (
        m.meta_str("error_kind").unwrap_or("<none>"),
        m.meta_str("tool_error").unwrap_or("<none>"),
    )
}

#[tokio::test]
async fn a_result_is_packaged_as_the_seed_system_does() {
    let runner = runner();
    let (request, tool_call) = call("toolu_42", "add", json!({"a": 2, "b": 3}));
    let result = runner.execute(&request, &tool_call, None).await;
    assert_eq!(result.role, Role::Tool);
    assert_eq!(result.kind, MessageType::ToolResult);
    assert_eq!(result.status, Status::Responded);
    assert_eq!(result.parent_id.as_deref(), Some(tool_call.id.as_str()));
    assert_eq!(result.sender, "add");
    assert_eq!(result.session_id, "session-9");
    assert_eq!(result.content, "5");
    assert_eq!(result.metadata["tool_name"], "add");
    assert_eq!(result.metadata["call_id"], "toolu_42");
    assert_eq!(result.metadata["tool_result"], json!(5));
    assert!(result.metadata.get("tool_error").is_none());
    assert!(result.metadata["duration_ms"].is_u64());
    assert_ne!(result.id, tool_call.id);
    // The wire shape, as stored.
    let wire = serde_json::to_value(&result).unwrap();
    assert_eq!(wire["role"], "tool");
    assert_eq!(wire["type"], "tool_result");
    assert_eq!(wire["status"], "responded");
}

#[tokio::test]
async fn invalid_json_says_where_it_failed() {
    let m = run_one(&runner(), "add", json!("{\"a\": 1, b: 2}")).await;
    let (kind, error) = error_of(&m);
    assert_eq!(kind, "invalid_json");
    assert_eq!(
        error,
        "the arguments of `add` are not valid JSON: key must be a string at line 1, column 10"
    );
    assert_eq!(m.content, format!("Error: {error}"));
    assert_eq!(m.status, Status::Responded);
}

#[tokio::test]
async fn truncated_json_is_reported_as_cut_off_with_advice() {
    let m = run_one(&runner(), "add", json!("{\"a\": 1, \"b\": 2")).await;
    let (kind, error) = error_of(&m);
    assert_eq!(kind, "truncated_json");
    assert!(
        error.starts_with("the arguments of `add` were cut off after 15 characters"),
        "{error}"
    );
    assert!(error.contains("send a shorter call"), "{error}");
}

#[tokio::test]
async fn string_arguments_as_openai_sends_them_work() {
    let m = run_one(&runner(), "add", json!("{\"a\": 20, \"b\": 22}")).await;
    assert_eq!(m.content, "42");
}

#[tokio::test]
async fn arguments_are_coerced_and_validated() {
    let runner = runner();
    assert_eq!(
        run_one(&runner, "add", json!({"a": "20", "b": 22}))
            .await
            .content,
        "42"
    );
    let m = run_one(&runner, "add", json!({"a": 1})).await;
    assert_eq!(
        error_of(&m),
        (
            "invalid_arguments",
            "invalid arguments for tool `add`: argument `b` is required (The second integer.)"
        )
    );
}

#[tokio::test]
async fn an_unknown_tool_lists_the_available_ones() {
    let m = run_one(&runner(), "ad", json!({})).await;
    let (kind, error) = error_of(&m);
    assert_eq!(kind, "unknown_tool");
    assert!(
        error.starts_with(
            "unknown tool `ad`; did you mean `add`?; available tools: `add`, `alone`, `async_boom`"
        ),
        "{error}"
    );
    assert_eq!(m.sender, "ad");
}

#[tokio::test]
async fn a_missing_state_names_the_type() {
    let bare = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let m = run_one(&bare, "count", json!({})).await;
    let (kind, error) = error_of(&m);
    assert_eq!(kind, "injection");
    assert!(
        error.contains("no state of type `runner::Tally`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_tool_timeout_names_its_limit() {
    let started = Instant::now();
    let m = run_one(&runner(), "nap", json!({"ms": 5_000})).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        error_of(&m),
        (
            "timeout",
            "tool `nap` timed out after 50ms (its time limit); it may still be running in the background"
        )
    );
    // Within the limit it answers.
    assert_eq!(
        run_one(&runner(), "nap", json!({"ms": 1})).await.content,
        "rested"
    );
}

#[tokio::test]
async fn the_runner_default_timeout_applies_to_tools_without_one() {
    let runner = runner().with_default_timeout(Duration::from_millis(30));
    let m = run_one(&runner, "long_nap", json!({"ms": 5_000})).await;
    assert_eq!(error_of(&m).0, "timeout");
    assert!(error_of(&m).1.contains("after 30ms"));
    // A tool's own limit wins over the runner's.
    let m = run_one(&runner, "nap", json!({"ms": 40})).await;
    assert_eq!(m.content, "rested");
}

#[tokio::test]
async fn cancellation_stops_waiting_tools() {
    let runner = runner();
    let token = runner.context().cancellation().clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        token.cancel();
    });
    let started = Instant::now();
    let m = run_one(&runner, "long_nap", json!({"ms": 10_000})).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(error_of(&m), ("cancelled", "tool `long_nap` was cancelled"));
    canceller.await.unwrap();
}

#[tokio::test]
async fn panics_become_results_and_the_batch_goes_on() {
    let runner = runner();
    let calls = vec![
        call("c1", "async_boom", json!({})),
        call("c2", "add", json!({"a": 1, "b": 1})),
    ];
    let results = runner.execute_all(&calls, None).await;
    assert_eq!(
        error_of(&results[0]),
        ("panic", "tool `async_boom` panicked: async kaboom")
    );
    assert_eq!(results[1].content, "2");
}

#[tokio::test]
async fn sync_tools_run_off_the_async_worker() {
    let worker = format!("{:?}", std::thread::current().id());
    let m = run_one(&runner(), "thread_id", json!({})).await;
    assert!(m.content.starts_with("ThreadId("), "{}", m.content);
    assert_ne!(m.content, worker);
}

#[tokio::test]
async fn interruption_is_checked_as_each_call_starts() {
    // One at a time, so "as each call starts" is observable: the second
    // call sets the flag, and only the calls after it are skipped.
    let runner = runner().with_max_concurrency(1);
    let flag = runner.context().state::<AtomicBool>().unwrap();
    let is_interrupted = move || flag.load(Ordering::SeqCst);
    let calls = vec![
        call("c1", "add", json!({"a": 1, "b": 1})),
        call("c2", "user_typed", json!({})),
        call("c3", "add", json!({"a": 2, "b": 2})),
        call("c4", "count", json!({})),
    ];
    let results = runner.execute_all(&calls, Some(&is_interrupted)).await;
    assert_eq!(results[0].content, "2");
    assert_eq!(results[1].content, "noted");
    for (result, (request, tool_call)) in results.iter().zip(&calls).skip(2) {
        assert_eq!(
            error_of(result),
            (
                "interrupted",
                format!(
                    "the call to `{}` was aborted because a newer user message arrived; it did not run",
                    request.name
                )
                .as_str()
            )
        );
        assert_eq!(result.parent_id.as_deref(), Some(tool_call.id.as_str()));
        assert_eq!(result.status, Status::Responded);
    }
    // The interrupted `count` never ran.
    let tally = runner.context().state::<Tally>().unwrap();
    assert_eq!(tally.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn execute_all_returns_one_result_per_call_in_order() {
    let runner = runner();
    let calls: Vec<_> = (0..20)
        .map(|i| {
            if i % 3 == 0 {
                call(&format!("c{i}"), "nope", json!({}))
            } else {
                call(&format!("c{i}"), "nap", json!({"ms": 20 - i}))
            }
        })
        .collect();
    let results = runner.execute_all(&calls, None).await;
    assert_eq!(results.len(), calls.len());
    for (result, (request, tool_call)) in results.iter().zip(&calls) {
        assert_eq!(result.parent_id.as_deref(), Some(tool_call.id.as_str()));
        assert_eq!(result.metadata["call_id"], request.id.as_str());
    }
}

#[tokio::test]
async fn concurrency_is_bounded_and_sequential_tools_run_alone() {
    let runner = runner().with_max_concurrency(3);
    let together: Vec<_> = (0..8)
        .map(|i| call(&format!("t{i}"), "together", json!({})))
        .collect();
    runner.execute_all(&together, None).await;
    let par = runner.context().state::<ParOverlap>().unwrap();
    assert_eq!(
        par.0.max.load(Ordering::SeqCst),
        3,
        "bounded at 3, and reached it"
    );

    // A batch mixing both: the sequential tool never overlaps anything.
    let runner = runner.with_max_concurrency(8);
    let mixed: Vec<_> = (0..8)
        .map(|i| {
            call(
                &format!("m{i}"),
                if i % 2 == 0 { "alone" } else { "together" },
                json!({}),
            )
        })
        .collect();
    let seq = runner.context().state::<SeqOverlap>().unwrap();
    let results = runner.execute_all(&mixed, None).await;
    assert!(results.iter().all(|m| !m.is_tool_error()));
    assert_eq!(seq.0.max.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_post_progress_through_the_gateway() {
    let gateway = Gateway::in_memory();
    let runner = ToolRunner::new(
        kesoku::default_registry(),
        ToolContext::new("s-5")
            .with_original_msg_id("u-1")
            .with_progress(gateway.clone()),
    );
    let m = run_one(&runner, "progress", json!({"steps": 2})).await;
    assert_eq!(m.content, "done");
    let posted = gateway.history("s-5").await.unwrap();
    assert_eq!(posted.len(), 2);
    assert_eq!(posted[1].content, "step 2 of 2");
    assert_eq!(posted[1].session_id, "s-5");
    assert_eq!(posted[1].parent_id.as_deref(), Some("u-1"));
}

static SYNC_RUNNING: AtomicBool = AtomicBool::new(false);

/// A slow sync tool that outlives its timeout.
#[tool(timeout = "20ms")]
fn slow_sync() {
    SYNC_RUNNING.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(150));
    SYNC_RUNNING.store(false, Ordering::SeqCst);
}

/// Reports whether the slow sync tool was still running when it started.
#[tool(sequential)]
async fn check_alone() -> bool {
    SYNC_RUNNING.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_timed_out_sync_tool_still_keeps_sequential_tools_waiting() {
    let runner = runner().with_max_concurrency(2);
    let calls = vec![
        call("c1", "slow_sync", json!({})),
        call("c2", "check_alone", json!({})),
    ];
    let started = Instant::now();
    let results = runner.execute_all(&calls, None).await;
    assert_eq!(error_of(&results[0]).0, "timeout");
    assert_eq!(
        results[1].content, "false",
        "the sequential tool overlapped a running one"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(140),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_panic_while_decoding_arguments_becomes_a_result() {
    let mut registry = kesoku::ToolRegistry::new();
    let fragile = kesoku::DynamicTool::new(
        "fragile",
        "Reads n before it runs.",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        |args, _| {
            let n = args["n"].as_i64().expect("n is an integer");
            async move { Ok(kesoku::ToolOutput::new(json!(n))) }
        },
    )
    .unwrap();
    registry.register(fragile).unwrap();
    let runner = ToolRunner::new(registry, ToolContext::new("s"));
    let calls = vec![
        call("c1", "fragile", json!({})),
        call("c2", "fragile", json!({"n": 4})),
    ];
    let results = runner.execute_all(&calls, None).await;
    assert_eq!(
        error_of(&results[0]),
        ("panic", "tool `fragile` panicked: n is an integer")
    );
    assert_eq!(results[1].content, "4");
}

/// Draws a tiny picture.
///
/// # Arguments
/// * `label` - What to call it.
#[tool]
fn draw(label: String) -> Result<kesoku::ToolOutput, String> {
    if label.is_empty() {
        return Err("nothing to draw".into());
    }
    let png = kesoku::ContentBlock::image("image/png", vec![137, 80, 78, 71]);
    Ok(kesoku::ToolOutput::new(json!({"label": label})).with_block(png))
}

/// Returns a document.
#[tool]
fn paper() -> kesoku::ToolOutput {
    let pdf = kesoku::ContentBlock::document("application/pdf", b"%PDF".to_vec());
    kesoku::ToolOutput::new("a page".into()).with_block(pdf)
}

#[tokio::test]
async fn content_blocks_travel_with_the_result() {
    let m = run_one(&runner(), "draw", json!({"label": "square"})).await;
    assert_eq!(m.metadata["tool_result"], json!({"label": "square"}));
    assert_eq!(m.content, r#"{"label":"square"}"#);
    assert_eq!(
        m.metadata["content_blocks"],
        json!([{"type": "image", "mime_type": "image/png", "data": "iVBORw=="}])
    );
    let e = run_one(&runner(), "draw", json!({"label": ""})).await;
    assert_eq!(error_of(&e), ("failed", "nothing to draw"));
    let m = run_one(&runner(), "paper", json!({})).await;
    assert_eq!(m.content, "a page");
    assert_eq!(
        m.metadata["content_blocks"][0]["mime_type"],
        "application/pdf"
    );
}

#[tokio::test]
async fn the_interruption_check_runs_once_for_a_call_that_does_not_wait() {
    let asked = AtomicUsize::new(0);
    let is_interrupted = || {
        asked.fetch_add(1, Ordering::SeqCst);
        false
    };
    let (request, message) = call("c1", "add", json!({"a": 1, "b": 2}));
    let m = runner()
        .execute(&request, &message, Some(&is_interrupted))
        .await;
    assert_eq!(m.content, "3");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}
