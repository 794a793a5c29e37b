//! The runner's typed fast path (strict decoding straight into the
//! parameters) must be invisible: for any arguments, `execute` answers
//! exactly what the validating slow path (`Tool::call`) answers.
//!
//! - a property test over random argument objects, sent both as JSON and as
//!   text, to tools covering every `EXACT` standard type, defaults and
//!   optional parameters;
//! - the edges the fast path hands over: duplicate keys, `null` for a
//!   default, quoted numbers, trailing text;
//! - `ToolArg::EXACT` decides which types may take it;
//! - what happens after decoding (interruption, injection, panics) is the
//!   same on both paths.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};

use kesoku::{Message, Schema, State, ToolArg, ToolContext, ToolRequest, ToolRunner, tool};
use proptest::prelude::*;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

/// Echoes scalar arguments.
///
/// # Arguments
/// * `a` - A signed integer.
/// * `b` - A byte.
/// * `x` - A float.
/// * `flag` - A switch.
/// * `c` - A letter.
/// * `s` - Some text.
/// * `opt` - An optional integer.
#[tool]
#[allow(
    clippy::too_many_arguments,
    clippy::needless_pass_by_value,
    clippy::many_single_char_names
)]
fn f_scalars(a: i64, b: u8, x: f64, flag: bool, c: char, s: String, opt: Option<i32>) -> String {
    format!("{a} {b} {x:?} {flag} {c:?} {s:?} {opt:?}")
}

/// Echoes container arguments.
///
/// # Arguments
/// * `v` - Small integers.
/// * `m` - Optional switches by name.
/// * `t` - A pair.
/// * `arr` - Exactly two bytes.
/// * `any` - Any JSON.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_containers(
    v: Vec<i16>,
    m: BTreeMap<String, Option<bool>>,
    t: (u8, String),
    arr: [i8; 2],
    any: Value,
) -> String {
    format!("{v:?} {m:?} {t:?} {arr:?} {any}")
}

/// Echoes defaulted arguments.
///
/// # Arguments
/// * `n` - A count.
/// * `o` - An optional label, with a default.
/// * `p` - An optional list.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_defaults(
    #[arg(default = 7)] n: u32,
    #[arg(default = Some("d".to_owned()))] o: Option<String>,
    p: Option<Vec<u8>>,
) -> String {
    format!("{n} {o:?} {p:?}")
}

/// Takes nothing.
#[tool]
fn f_none() -> &'static str {
    "none"
}

/// Each tool, with its argument names.
const TOOLS: [(&str, &[&str]); 4] = [
    ("f_scalars", &["a", "b", "x", "flag", "c", "s", "opt"]),
    ("f_containers", &["v", "m", "t", "arr", "any"]),
    ("f_defaults", &["n", "o", "p"]),
    ("f_none", &[]),
];

/// A value of the type each known key expects, to reach the fast path often.
fn valid(key: &'static str) -> BoxedStrategy<Value> {
    match key {
        "a" => any::<i64>().prop_map(Value::from).boxed(),
        "b" => (0_u64..300).prop_map(Value::from).boxed(),
        "x" => prop_oneof![
            any::<i32>().prop_map(Value::from),
            (-1e6_f64..1e6).prop_map(Value::from)
        ]
        .boxed(),
        "flag" => any::<bool>().prop_map(Value::from).boxed(),
        "c" => prop_oneof![4 => "[a-zé]", 1 => "[a-z]{0,3}"]
            .prop_map(Value::from)
            .boxed(),
        "s" | "o" => any::<String>().prop_map(Value::from).boxed(),
        "opt" => prop_oneof![Just(Value::Null), any::<i32>().prop_map(Value::from)].boxed(),
        "v" | "p" => prop::collection::vec(-300_i64..300, 0..4)
            .prop_map(|v| json!(v))
            .boxed(),
        "m" => prop::collection::btree_map(
            "[a-c]",
            prop_oneof![Just(Value::Null), any::<bool>().prop_map(Value::from)],
            0..3,
        )
        .prop_map(|m| json!(m))
        .boxed(),
        "t" => (0_u64..300, "[a-z]{0,3}")
            .prop_map(|(n, s)| json!([n, s]))
            .boxed(),
        "arr" => prop_oneof![
            4 => prop::collection::vec(-128_i64..128, 2),
            1 => prop::collection::vec(-200_i64..200, 1..4),
        ]
        .prop_map(|v| json!(v))
        .boxed(),
        "n" => prop_oneof![Just(Value::Null), any::<u32>().prop_map(Value::from)].boxed(),
        _ => any_json().boxed(),
    }
}

/// Anything at all, including the coercible strings the slow path fixes.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9_f64..1e9).prop_map(Value::from),
        prop_oneof![Just("5"), Just("-3"), Just("2.5"), Just("true"), Just("x")]
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]", inner, 0..3).prop_map(|m| json!(m)),
        ]
    })
}

/// An arguments object: each key mostly valid, sometimes absent, sometimes
/// anything; now and then an unknown key.
fn arguments(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let fields: Vec<BoxedStrategy<Option<Value>>> = keys
        .iter()
        .map(|&k| {
            prop_oneof![
                16 => valid(k).prop_map(Some),
                1 => Just(None),
                1 => any_json().prop_map(Some),
            ]
            .boxed()
        })
        .collect();
    (fields, prop::option::weighted(0.1, "[a-z]{1,4}")).prop_map(|(values, extra)| {
        let mut map = serde_json::Map::new();
        for (key, value) in keys.iter().zip(values) {
            if let Some(value) = value {
                map.insert((*key).to_owned(), value);
            }
        }
        if let Some(extra) = extra {
            map.entry(extra).or_insert(Value::Null);
        }
        Value::Object(map)
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// What `execute` answered, against what the slow path answers for the
/// same request: content and the `tool_error` text, or the same error.
fn assert_same_as_slow_path(runner: &ToolRunner, request: &ToolRequest) {
    let rt = runtime();
    let result = rt.block_on(runner.execute(request, &Message::tool_call("s", request), None));
    let tool = runner.registry().get(&request.name).unwrap();
    let expected = match request.parse_arguments() {
        Err(e) => Err(e.to_string()),
        Ok(args) => rt
            .block_on(tool.call(args.into_owned(), runner.context()))
            .map(|out| out.text())
            .map_err(|e| e.to_string()),
    };
    let got = match result.meta_str("tool_error") {
        Some(error) => Err(error.to_owned()),
        None => Ok(result.content.clone()),
    };
    assert_eq!(got, expected, "{request:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn execute_answers_what_the_validating_path_answers(
        args in (arguments(TOOLS[0].1), arguments(TOOLS[1].1), arguments(TOOLS[2].1), arguments(TOOLS[3].1)),
    ) {
        let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
        for ((name, _), args) in TOOLS.iter().zip([args.0, args.1, args.2, args.3]) {
            let text = Value::String(args.to_string());
            assert_same_as_slow_path(&runner, &ToolRequest::new("c", *name, args));
            assert_same_as_slow_path(&runner, &ToolRequest::new("c", *name, text));
        }
    }
}

#[test]
fn the_edges_the_fast_path_hands_over_answer_as_before() {
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let rt = runtime();
    let run = |name: &str, args: Value| {
        let request = ToolRequest::new("c", name, args);
        assert_same_as_slow_path(&runner, &request);
        rt.block_on(runner.execute(&request, &Message::tool_call("s", &request), None))
    };
    // A key given twice: the parsed object keeps the last one.
    let r = run("f_defaults", json!(r#"{"n": 1, "n": 2}"#));
    assert_eq!(r.content, "2 Some(\"d\") None");
    // `null` for a defaulted argument means the default, also for an `Option`.
    let r = run("f_defaults", json!({"n": null, "o": null}));
    assert_eq!(r.content, "7 Some(\"d\") None");
    // Quoted scalars are coerced on the slow path.
    let r = run("f_defaults", json!(r#"{"n": "3"}"#));
    assert_eq!(r.content, "3 Some(\"d\") None");
    // Trailing text is invalid JSON, reported with its place.
    let r = run("f_none", json!("{} x"));
    assert!(
        r.meta_str("tool_error")
            .unwrap()
            .contains("trailing characters")
    );
    // Every problem at once, with paths.
    let r = run(
        "f_containers",
        json!({"v": [1, 100_000], "arr": [1], "t": [1, 2]}),
    );
    let error = r.meta_str("tool_error").unwrap();
    for part in [
        "`v[1]`",
        "`arr`",
        "`t[1]`",
        "`m` is required",
        "`any` is required",
    ] {
        assert!(error.contains(part), "{part} in {error}");
    }
    // Empty arguments, in every form models send them.
    for empty in [json!({}), json!(null), json!(""), json!("  "), json!("{}")] {
        assert_eq!(run("f_none", empty).content, "none");
    }
}

/// A string that also accepts numbers: its `Deserialize` is more lenient
/// than its schema.
#[derive(Debug)]
struct Lenient(String);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Lenient(match v {
            Value::String(s) => s,
            other => other.to_string(),
        }))
    }
}

impl ToolArg for Lenient {
    const SCHEMA: Schema = <String as ToolArg>::SCHEMA;
}

/// The same type, wrongly claiming to be exact.
#[derive(Debug, Deserialize)]
struct Claims(Lenient);

impl ToolArg for Claims {
    const SCHEMA: Schema = <String as ToolArg>::SCHEMA;
    const EXACT: bool = true;
}

/// Takes a lenient string.
///
/// # Arguments
/// * `v` - A string.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_lenient(v: Lenient) -> String {
    v.0
}

/// Takes a string that claims to be exact.
///
/// # Arguments
/// * `v` - A string.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_claims(v: Claims) -> String {
    v.0.0
}

#[test]
fn only_exact_types_take_the_fast_path() {
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let rt = runtime();
    let run = |name: &str| {
        let request = ToolRequest::new("c", name, json!({"v": 5}));
        rt.block_on(runner.execute(&request, &Message::tool_call("s", &request), None))
    };
    // Not exact (the default): the schema is checked first; with coercion
    // on, the number 5 is not a string and is reported.
    assert_eq!(
        run("f_lenient").meta_str("tool_error"),
        Some(
            "invalid arguments for tool `f_lenient`: argument `v`: expected a string, got number 5"
        )
    );
    // Claimed exact: the strict decode succeeds and is trusted, which is
    // why `EXACT` must only be set when it is true.
    assert_eq!(run("f_claims").content, "5");
    let schema = |name: &str| runner.registry().get(name).unwrap().schema().unwrap();
    assert!(!schema("f_lenient").exact && schema("f_claims").exact);
    assert!(schema("f_scalars").exact && schema("f_containers").exact && schema("f_none").exact);
}

/// Reads a counter from the state.
///
/// # Arguments
/// * `n` - A number.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_state(n: u8, counter: State<AtomicUsize>) -> usize {
    counter.fetch_add(usize::from(n), Ordering::SeqCst)
}

/// Panics while decoding its argument.
#[derive(Debug)]
struct Explodes;

impl<'de> Deserialize<'de> for Explodes {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        panic!("Explodes::deserialize panicked as designed")
    }
}

impl ToolArg for Explodes {
    const SCHEMA: Schema = Schema::Any;
    const EXACT: bool = true;
}

/// Takes an argument whose decoding panics.
///
/// # Arguments
/// * `e` - Anything.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_explodes(e: Explodes) -> String {
    format!("{e:?}")
}

#[test]
fn after_decoding_both_paths_behave_alike() {
    let rt = runtime();
    let asked = AtomicUsize::new(0);
    let interrupted = || {
        asked.fetch_add(1, Ordering::SeqCst);
        true
    };
    let execute = |runner: &ToolRunner, name: &str, args: Value, interrupt: bool| {
        let request = ToolRequest::new("c", name, args);
        let call = Message::tool_call("s", &request);
        let check: Option<&(dyn Fn() -> bool + Send + Sync)> =
            if interrupt { Some(&interrupted) } else { None };
        rt.block_on(runner.execute(&request, &call, check))
    };
    let bare = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));

    // Interrupted: asked once, on the fast path (valid) and the slow one.
    for args in [json!({"n": 1}), json!({"n": "1"})] {
        asked.store(0, Ordering::SeqCst);
        let r = execute(&bare, "f_state", args, true);
        assert_eq!(r.meta_str("error_kind"), Some("interrupted"));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }
    // A missing state is an injection error naming the type, on both paths.
    for args in [json!({"n": 1}), json!({"n": "1"})] {
        let r = execute(&bare, "f_state", args, false);
        assert_eq!(r.meta_str("error_kind"), Some("injection"));
        assert!(r.meta_str("tool_error").unwrap().contains("AtomicUsize"));
    }
    let with_state = ToolRunner::new(
        kesoku::default_registry(),
        ToolContext::new("s").with_state(AtomicUsize::new(0)),
    );
    assert_eq!(
        execute(&with_state, "f_state", json!({"n": 2}), false).content,
        "0"
    );
    assert_eq!(
        execute(&with_state, "f_state", json!({"n": "3"}), false).content,
        "2"
    );
    assert_eq!(
        execute(&with_state, "f_state", json!(r#"{"n": 0}"#), false).content,
        "5"
    );

    // A panic while decoding is a panic result, not a crash.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = execute(&bare, "f_explodes", json!({"e": 1}), false);
    std::panic::set_hook(hook);
    assert_eq!(r.meta_str("error_kind"), Some("panic"));
    assert!(
        r.meta_str("tool_error")
            .unwrap()
            .contains("panicked as designed")
    );
}

/// Echoes a 128-bit integer.
///
/// # Arguments
/// * `n` - A big number.
#[tool]
fn f_big(n: i128) -> String {
    n.to_string()
}

/// Echoes any JSON.
///
/// # Arguments
/// * `v` - Anything.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_any(v: Value) -> usize {
    v.to_string().len()
}

/// An optional byte behind a newtype, as some hand-written types are.
#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read through `Debug` only
struct Maybe(Option<u8>);

impl ToolArg for Maybe {
    const SCHEMA: Schema = <Option<u8> as ToolArg>::SCHEMA;
    const EXACT: bool = true;
}

/// Echoes an optional newtype.
///
/// # Arguments
/// * `m` - Maybe a byte.
#[tool]
fn f_maybe(m: Maybe) -> String {
    format!("{m:?}")
}

fn boom() -> u8 {
    panic!("Explodes::deserialize panicked as designed: a default")
}

/// A default that panics, and a decoding that panics.
///
/// # Arguments
/// * `n` - A count.
/// * `e` - Anything.
/// * `b` - A byte.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn f_order(#[arg(default = boom())] n: u8, e: Option<Explodes>, b: u8) -> String {
    format!("{n} {e:?} {b}")
}

#[test]
fn the_paths_agree_at_the_edges_of_serde_json() {
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    // Beyond 64 bits the validating path reads numbers as floats; 128-bit
    // integers are not `EXACT`, so both answers come from it.
    for text in [r#"{"n": 100000000000000000000}"#, r#"{"n": -5}"#] {
        assert_same_as_slow_path(&runner, &ToolRequest::new("c", "f_big", json!(text)));
    }
    // serde_json's nesting limit counts the arguments object as one level.
    for depth in [125, 126, 127, 128] {
        let text = format!(r#"{{"v": {}{}}}"#, "[".repeat(depth), "]".repeat(depth));
        assert_same_as_slow_path(&runner, &ToolRequest::new("c", "f_any", json!(text)));
    }
    // An absent optional argument reads as `null`, also through a newtype.
    for args in [json!({}), json!("{}"), json!({"m": null}), json!({"m": 3})] {
        let request = ToolRequest::new("c", "f_maybe", args);
        assert_same_as_slow_path(&runner, &request);
    }
    let request = ToolRequest::new("c", "f_maybe", json!({}));
    let r = runtime().block_on(runner.execute(&request, &Message::tool_call("s", &request), None));
    assert_eq!(r.content, "Maybe(None)");
}

#[test]
fn user_code_runs_after_the_interruption_check_and_validation() {
    let rt = runtime();
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let asked = AtomicUsize::new(0);
    let yes = || {
        asked.fetch_add(1, Ordering::SeqCst);
        true
    };
    let execute = |args: Value, check: Option<&(dyn Fn() -> bool + Send + Sync)>| {
        let request = ToolRequest::new("c", "f_order", args);
        rt.block_on(runner.execute(&request, &Message::tool_call("s", &request), check))
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Interrupted: nothing of the tool's runs, not even a default.
    let r = execute(json!({"b": 1}), Some(&yes));
    assert_eq!(r.meta_str("error_kind"), Some("interrupted"));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // A bad argument is reported, not a panic of another one's decoding.
    let r = execute(json!({"n": 1, "e": 1, "b": "x"}), None);
    assert_eq!(r.meta_str("error_kind"), Some("invalid_arguments"), "{r:?}");
    // Valid arguments whose decoding panics: the panic is the answer.
    let r = execute(json!({"n": 1, "e": 1, "b": 1}), None);
    assert_eq!(r.meta_str("error_kind"), Some("panic"));
    let r = execute(json!({"b": 1}), None);
    assert_eq!(r.meta_str("error_kind"), Some("panic"));
    // A panic in the caller's own check is the caller's, not the tool's.
    let check_panics = || -> bool { panic!("the check itself") };
    let escaped = std::panic::catch_unwind(AssertUnwindSafe(|| {
        execute(json!({"n": 1, "b": 1}), Some(&check_panics))
    }));
    std::panic::set_hook(hook);
    assert!(escaped.is_err());
}
