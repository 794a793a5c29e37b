//! Properties of the runner over random input:
//! - pairing: every call of a random batch (ok, error, panic, timeout,
//!   unknown tool, invalid JSON, interrupted) gets exactly one result, in
//!   order, with the right `parent_id`;
//! - fuzzing: arbitrary JSON (and arbitrary text) sent to every tool in this
//!   test binary, including the library's, never panics and always yields
//!   one well-formed result.

use std::collections::BTreeMap;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kesoku::{
    Message, MessageType, State, Status, ToolArg, ToolContext, ToolRequest, ToolRunner, tool,
};
use kesoku_test_lib as _;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

const PANIC_MESSAGE: &str = "an intended panic from p_panic";

/// Answers.
///
/// # Arguments
/// * `n` - A number.
#[tool]
fn p_ok(n: i64) -> i64 {
    n.wrapping_mul(2)
}

/// Always fails.
#[tool]
fn p_err() -> Result<(), String> {
    Err("p_err failed as designed".into())
}

/// Always panics.
#[tool]
async fn p_panic() -> u8 {
    tokio::task::yield_now().await;
    panic!("{PANIC_MESSAGE}")
}

/// Never finishes in time.
#[tool(timeout = "5ms")]
async fn p_slow() {
    tokio::time::sleep(Duration::from_secs(10)).await;
}

/// Marks that a newer user message arrived.
#[tool]
fn p_interrupt(flag: State<AtomicBool>) {
    flag.store(true, Ordering::SeqCst);
}

/// A shape.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)] // read through `Debug` only
enum Shape {
    /// A circle.
    Circle {
        /// Radius.
        r: f64,
    },
    /// A polygon.
    Polygon {
        /// Corners.
        points: Vec<(i32, i32)>,
    },
}

/// Many types at once, for the fuzzer.
///
/// # Arguments
/// * `shape` - A shape.
/// * `tags` - Tags.
/// * `weights` - Weights by name.
/// * `initial` - A letter.
/// * `level` - A small number.
/// * `note` - An optional note.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn p_many(
    shape: Shape,
    tags: Vec<String>,
    weights: BTreeMap<String, f32>,
    initial: char,
    level: u8,
    note: Option<String>,
) -> String {
    format!("{shape:?} {tags:?} {weights:?} {initial} {level} {note:?}")
}

/// What a generated call should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ok,
    Err,
    Panic,
    Timeout,
    Unknown,
    BadJson,
    Interrupt,
}

impl Kind {
    fn request(self, id: &str) -> ToolRequest {
        match self {
            Kind::Ok => ToolRequest::new(id, "p_ok", json!({"n": 21})),
            Kind::Err => ToolRequest::new(id, "p_err", json!({})),
            Kind::Panic => ToolRequest::new(id, "p_panic", json!({})),
            Kind::Timeout => ToolRequest::new(id, "p_slow", json!({})),
            Kind::Unknown => ToolRequest::new(id, "p_missing", json!({})),
            Kind::BadJson => ToolRequest::new(id, "p_ok", json!("{\"n\": 1,,}")),
            Kind::Interrupt => ToolRequest::new(id, "p_interrupt", json!({})),
        }
    }

    /// The `error_kind` expected, or `None` for success.
    fn outcome(self) -> Option<&'static str> {
        match self {
            Kind::Ok | Kind::Interrupt => None,
            Kind::Err => Some("failed"),
            Kind::Panic => Some("panic"),
            Kind::Timeout => Some("timeout"),
            Kind::Unknown => Some("unknown_tool"),
            Kind::BadJson => Some("invalid_json"),
        }
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Ok),
        Just(Kind::Err),
        Just(Kind::Panic),
        Just(Kind::Timeout),
        Just(Kind::Unknown),
        Just(Kind::BadJson),
        Just(Kind::Interrupt),
    ]
}

/// Keeps the expected panics of `p_panic` out of the test output, and
/// lets every other panic through.
fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let expected = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|m| m == PANIC_MESSAGE);
            if !expected {
                default(info);
            }
        }));
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Checks the shape every result must have, whatever happened.
fn assert_well_formed(result: &Message, request: &ToolRequest, call: &Message) {
    assert_eq!(result.kind, MessageType::ToolResult);
    assert_eq!(result.status, Status::Responded);
    assert_eq!(result.parent_id.as_deref(), Some(call.id.as_str()));
    assert_eq!(result.meta_str("call_id"), Some(request.id.as_str()));
    assert_eq!(result.meta_str("tool_name"), Some(request.name.as_str()));
    let has_result = result.metadata.contains_key("tool_result");
    let has_error = result.metadata.contains_key("tool_error");
    assert!(
        has_result != has_error,
        "exactly one of tool_result / tool_error: {result:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_call_gets_exactly_one_result_in_order(
        kinds in prop::collection::vec(kind(), 1..12),
        concurrency in 1_usize..6,
    ) {
        quiet_expected_panics();
        let flag = std::sync::Arc::new(AtomicBool::new(false));
        let ctx = ToolContext::new("prop").with_state_arc(flag.clone());
        let runner = ToolRunner::new(kesoku::default_registry(), ctx).with_max_concurrency(concurrency);
        let calls: Vec<(ToolRequest, Message)> = kinds
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let request = k.request(&format!("call_{i}"));
                let message = Message::tool_call("prop", &request);
                (request, message)
            })
            .collect();
        let is_interrupted = move || flag.load(Ordering::SeqCst);
        let results = runtime().block_on(runner.execute_all(&calls, Some(&is_interrupted)));

        prop_assert_eq!(results.len(), calls.len());
        for (result, (request, call)) in results.iter().zip(&calls) {
            assert_well_formed(result, request, call);
        }
        // One at a time, the outcome of every call is known: after the
        // first interrupting call, the rest are skipped (invalid JSON is
        // caught before the interruption check, as step 1 comes first).
        if concurrency == 1 {
            let first_interrupt = kinds.iter().position(|k| *k == Kind::Interrupt);
            for (i, (k, result)) in kinds.iter().zip(&results).enumerate() {
                let expected = match first_interrupt {
                    Some(at) if i > at && *k != Kind::BadJson => Some("interrupted"),
                    _ => k.outcome(),
                };
                prop_assert_eq!(result.meta_str("error_kind"), expected, "call {} ({:?})", i, k);
            }
        }
    }
}

/// Arbitrary JSON, biased toward the shapes and strings models send.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("n".to_owned()),
        Just("shape".to_owned()),
        Just("kind".to_owned()),
        Just("r".to_owned()),
        Just("points".to_owned()),
        Just("tags".to_owned()),
        Just("weights".to_owned()),
        Just("initial".to_owned()),
        Just("level".to_owned()),
        Just("note".to_owned()),
        Just("value".to_owned()),
        Just("to".to_owned()),
        Just("text".to_owned()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("5".to_owned()),
            Just("-3".to_owned()),
            Just("2.5".to_owned()),
            Just("true".to_owned()),
            Just("circle".to_owned()),
            Just("polygon".to_owned()),
            Just("meters".to_owned()),
            Just("x".to_owned()),
            any::<String>(),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_to_every_tool_yields_one_result(args in json_value(), raw in any::<String>()) {
        quiet_expected_panics();
        let ctx = ToolContext::new("fuzz").with_state(AtomicBool::new(false));
        let runner = ToolRunner::new(kesoku::default_registry(), ctx);
        let calls: Vec<(ToolRequest, Message)> = kesoku::default_registry()
            .names()
            .flat_map(|name| {
                [
                    ToolRequest::new(format!("{name}-json"), name, args.clone()),
                    ToolRequest::new(format!("{name}-text"), name, Value::String(raw.clone())),
                ]
            })
            .map(|request| {
                let message = Message::tool_call("fuzz", &request);
                (request, message)
            })
            .collect();
        let results = runtime().block_on(runner.execute_all(&calls, None));
        prop_assert_eq!(results.len(), calls.len());
        for (result, (request, call)) in results.iter().zip(&calls) {
            assert_well_formed(result, request, call);
        }
    }
}

#[test]
fn the_fuzzer_reaches_the_library_tools_and_valid_calls_succeed() {
    let names: Vec<&str> = kesoku::default_registry().names().collect();
    assert!(
        names.contains(&"convert_length") && names.contains(&"p_many"),
        "{names:?}"
    );
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let request = ToolRequest::new(
        "c",
        "p_many",
        json!({
            "shape": {"kind": "polygon", "points": [[0, 0], [1, "2"]]},
            "tags": [], "weights": {"a": "0.5"}, "initial": "k", "level": "7"
        }),
    );
    let result =
        runtime().block_on(runner.execute(&request, &Message::tool_call("s", &request), None));
    assert_eq!(
        result.content,
        "Polygon { points: [(0, 0), (1, 2)] } [] {\"a\": 0.5} k 7 None"
    );
}
