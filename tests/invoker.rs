//! The generated invoker: decoding, coercion, error messages, return types
//! and injected parameters.

// Some tools are async only to exercise the async path.
#![allow(clippy::unused_async)]

use kesoku::{State, ToolArg, ToolContext, ToolError, ToolOutput, tool};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

async fn call(name: &str, args: Value) -> Result<ToolOutput, ToolError> {
    call_with(name, args, &ToolContext::new("test-session")).await
}

async fn call_with(name: &str, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    kesoku::default_registry()
        .get(name)
        .unwrap_or_else(|| panic!("tool {name} is not registered"))
        .call(args, ctx)
        .await
}

async fn error(name: &str, args: Value) -> String {
    call(name, args).await.unwrap_err().to_string()
}

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// A point.
#[derive(Debug, Deserialize, Serialize, ToolArg)]
struct Point {
    /// Horizontal.
    x: i32,
    /// Vertical.
    y: i32,
}

/// Sums the x coordinates of points.
///
/// # Arguments
/// * `points` - The points.
/// * `scale` - A factor.
#[tool]
fn sum_x(points: Vec<Point>, scale: f64) -> f64 {
    f64::from(points.iter().map(|p| p.x).sum::<i32>()) * scale
}

/// Negates a flag.
///
/// # Arguments
/// * `flag` - The flag.
/// * `count` - A small count.
#[tool(coerce = false)]
fn strict(flag: bool, count: u8) -> String {
    format!("{} {count}", !flag)
}

/// Divides.
///
/// # Arguments
/// * `a` - Dividend.
/// * `b` - Divisor.
#[tool]
fn divide(a: f64, b: f64) -> Result<f64, String> {
    if b == 0.0 {
        Err("division by zero".into())
    } else {
        Ok(a / b)
    }
}

/// Does nothing.
#[tool]
fn nothing() {}

/// Greets.
///
/// # Arguments
/// * `name` - Who.
/// * `greeting` - How.
/// * `times` - How often.
#[tool]
fn greet(name: String, greeting: Option<String>, #[arg(default = 1)] times: usize) -> String {
    let g = greeting.unwrap_or_else(|| "Hello".into());
    vec![format!("{g}, {name}!"); times].join(" ")
}

struct Counter(std::sync::atomic::AtomicU32);

/// Reports who called.
///
/// # Arguments
/// * `note` - A note.
#[tool]
async fn whoami(note: String, context: &ToolContext, counter: State<Counter>) -> String {
    let n = counter
        .0
        .0
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!(
        "{} {} {note} {n}",
        context.session_id(),
        context.original_msg_id().unwrap_or("-")
    )
}

/// Reports the thread it ran on.
#[tool]
fn thread_id() -> String {
    format!("{:?}", std::thread::current().id())
}

/// Panics.
#[tool]
fn boom() -> u8 {
    panic!("the tool exploded")
}

#[tokio::test]
async fn calls_async_tool() {
    assert_eq!(
        call("add", json!({"a": 2, "b": 40})).await.unwrap().value,
        json!(42)
    );
}

#[tokio::test]
async fn missing_argument_names_it_with_its_description() {
    assert_eq!(
        error("add", json!({"a": 1})).await,
        "invalid arguments for tool `add`: argument `b` is required (The second integer.)"
    );
}

#[tokio::test]
async fn unknown_argument_lists_the_valid_ones_and_suggests() {
    assert_eq!(
        error("add", json!({"a": 1, "b": 2, "bb": 3})).await,
        "invalid arguments for tool `add`: unknown argument `bb`; did you mean `b`?; valid arguments are `a`, `b`"
    );
}

#[tokio::test]
async fn wrong_type_says_what_was_expected_and_what_came() {
    assert_eq!(
        error("add", json!({"a": "x", "b": 2})).await,
        format!(
            "invalid arguments for tool `add`: argument `a`: expected an integer from {} to {}, got string \"x\"",
            i64::MIN,
            i64::MAX
        )
    );
}

#[tokio::test]
async fn every_problem_is_reported_at_once() {
    let e = error("add", json!({"a": true, "c": 1})).await;
    assert!(
        e.starts_with("invalid arguments for tool `add` (3 problems):"),
        "{e}"
    );
    assert!(e.contains("- unknown argument `c`"), "{e}");
    assert!(e.contains("- argument `a`: expected an integer"), "{e}");
    assert!(
        e.contains("- argument `b` is required (The second integer.)"),
        "{e}"
    );
}

#[tokio::test]
async fn nested_errors_carry_a_json_path() {
    let e = error(
        "sum_x",
        json!({"points": [{"x": 1, "y": 2}, {"x": "one", "y": 2}], "scale": 1}),
    )
    .await;
    assert!(
        e.contains("argument `points[1].x`: expected an integer"),
        "{e}"
    );
    let e = error("sum_x", json!({"points": [{"x": 1}], "scale": 1})).await;
    assert_eq!(
        e,
        "invalid arguments for tool `sum_x`: argument `points[0].y` is required (Vertical.)"
    );
    let e = error(
        "sum_x",
        json!({"points": [{"x": 1, "y": 1, "z": 0}], "scale": 1}),
    )
    .await;
    assert_eq!(
        e,
        "invalid arguments for tool `sum_x`: unknown argument `points[0].z`; valid arguments are `x`, `y`"
    );
}

#[tokio::test]
async fn lenient_coercion_is_on_by_default() {
    assert_eq!(
        call("add", json!({"a": "5", "b": " 6 "}))
            .await
            .unwrap()
            .value,
        json!(11)
    );
    // 2.0 is an integer to a model.
    assert_eq!(
        call("add", json!({"a": 2.0, "b": 1})).await.unwrap().value,
        json!(3)
    );
    let out = call(
        "sum_x",
        json!({"points": [{"x": "3", "y": "4"}], "scale": "2.5"}),
    )
    .await;
    assert_eq!(out.unwrap().value, json!(7.5));
    assert_eq!(
        call("strict", json!({"flag": false, "count": 3}))
            .await
            .unwrap()
            .text(),
        "true 3"
    );
}

#[tokio::test]
async fn coercion_rejects_what_does_not_parse() {
    let e = error("add", json!({"a": "5x", "b": 1})).await;
    assert!(e.contains("argument `a`: expected an integer"), "{e}");
    let e = error("add", json!({"a": 2.5, "b": 1})).await;
    assert!(e.contains("got number 2.5"), "{e}");
}

#[tokio::test]
async fn coercion_can_be_switched_off() {
    let e = error("strict", json!({"flag": "true", "count": "3"})).await;
    assert!(
        e.contains("argument `flag`: expected a boolean, got string \"true\""),
        "{e}"
    );
    assert!(
        e.contains("argument `count`: expected an integer from 0 to 255, got string \"3\""),
        "{e}"
    );
}

#[tokio::test]
async fn integer_ranges_are_checked() {
    let e = error("strict", json!({"flag": true, "count": 300})).await;
    assert_eq!(
        e,
        "invalid arguments for tool `strict`: argument `count`: expected an integer from 0 to 255, got 300"
    );
}

#[tokio::test]
async fn arguments_must_be_an_object() {
    assert_eq!(
        error("add", json!([1, 2])).await,
        "invalid arguments for tool `add`: the arguments must be a JSON object, got an array of 2 items"
    );
    // null is an empty object, for tools without arguments.
    assert_eq!(
        call("nothing", Value::Null).await.unwrap().value,
        Value::Null
    );
}

#[tokio::test]
async fn result_err_becomes_an_error_not_a_panic() {
    assert_eq!(
        call("divide", json!({"a": 1, "b": 4})).await.unwrap().value,
        json!(0.25)
    );
    let e = call("divide", json!({"a": 1, "b": 0})).await.unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m == "division by zero"),
        "{e:?}"
    );
}

#[tokio::test]
async fn unit_return_is_null_with_empty_text() {
    let out = call("nothing", json!({})).await.unwrap();
    assert_eq!(out.value, Value::Null);
    assert_eq!(out.text(), "");
}

#[tokio::test]
async fn options_and_defaults_apply_when_absent_or_null() {
    assert_eq!(
        call("greet", json!({"name": "Ada"})).await.unwrap().text(),
        "Hello, Ada!"
    );
    let out = call(
        "greet",
        json!({"name": "Ada", "greeting": null, "times": null}),
    )
    .await;
    assert_eq!(out.unwrap().text(), "Hello, Ada!");
    let out = call(
        "greet",
        json!({"name": "Ada", "greeting": "Hi", "times": 2}),
    )
    .await;
    assert_eq!(out.unwrap().text(), "Hi, Ada! Hi, Ada!");
    // A required argument may not be null.
    let e = error("greet", json!({"name": null})).await;
    assert!(
        e.contains("argument `name`: expected a string, got null"),
        "{e}"
    );
}

#[tokio::test]
async fn context_and_state_are_injected_and_hidden_from_the_schema() {
    let tool = kesoku::default_registry().get("whoami").unwrap();
    assert_eq!(tool.parameters()["required"], json!(["note"]));
    assert_eq!(
        tool.parameters()["properties"].as_object().unwrap().len(),
        1
    );

    let ctx = ToolContext::new("s-1")
        .with_original_msg_id("m-7")
        .with_state(Counter(std::sync::atomic::AtomicU32::new(10)));
    let out = call_with("whoami", json!({"note": "hi"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.text(), "s-1 m-7 hi 10");
    let out = call_with("whoami", json!({"note": "again"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.text(), "s-1 m-7 again 11");
}

#[tokio::test]
async fn missing_state_is_an_error_naming_the_type() {
    let e = call("whoami", json!({"note": "hi"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "cannot inject `kesoku_core::tool::context::State<invoker::Counter>` into tool `whoami`"
        ),
        "{e}"
    );
    assert!(e.contains("no state of type `invoker::Counter`"), "{e}");
}

// A current-thread runtime has one worker: the test's own thread.
#[tokio::test]
async fn sync_tools_run_off_the_async_worker() {
    let worker = format!("{:?}", std::thread::current().id());
    let tool = kesoku::default_registry().get("thread_id").unwrap();
    assert!(!tool.is_async());
    let ran_on = tool
        .call(json!({}), &ToolContext::new("s"))
        .await
        .unwrap()
        .text();
    assert_ne!(ran_on, worker);
    assert!(ran_on.starts_with("ThreadId("), "{ran_on}");
}

#[tokio::test]
async fn a_panicking_sync_tool_becomes_an_error() {
    let e = call("boom", json!({})).await.unwrap_err();
    assert_eq!(e.to_string(), "tool `boom` panicked: the tool exploded");
}

#[test]
fn the_function_stays_callable_as_written() {
    assert_eq!(divide(6.0, 3.0), Ok(2.0));
    assert_eq!(greet("Bo".into(), None, 2), "Hello, Bo! Hello, Bo!");
    let fut = add(1, 2);
    assert_eq!(
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(fut),
        3
    );
}

mod user_state {
    use kesoku::{ToolArg, tool};
    use serde::Deserialize;

    /// A door state: the user's own type named `State`.
    #[derive(Debug, Deserialize, ToolArg)]
    #[serde(rename_all = "lowercase")]
    pub(crate) enum State {
        /// Open.
        Open,
        /// Closed.
        Closed,
    }

    /// Sets a door.
    ///
    /// # Arguments
    /// * `state` - The new state.
    #[tool]
    pub(crate) fn set_door(state: State) -> String {
        format!("{state:?}")
    }
}

#[tokio::test]
async fn a_user_type_named_state_is_a_model_argument() {
    let tool = kesoku::default_registry().get("set_door").unwrap();
    assert_eq!(tool.parameters()["required"], json!(["state"]));
    assert_eq!(
        call("set_door", json!({"state": "open"}))
            .await
            .unwrap()
            .text(),
        "Open"
    );
    let _ = user_state::set_door(user_state::State::Closed);
}

/// An alias that hides `Result`.
type Outcome = Result<u32, String>;

/// Checks a code.
///
/// # Arguments
/// * `code` - The code.
#[tool]
fn check_code(code: u32) -> Outcome {
    if code == 42 {
        Ok(code)
    } else {
        Err(format!("code {code} is wrong"))
    }
}

#[tokio::test]
async fn a_result_alias_still_reports_errors() {
    assert_eq!(
        call("check_code", json!({"code": 42})).await.unwrap().value,
        json!(42)
    );
    let e = call("check_code", json!({"code": 7})).await.unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m == "code 7 is wrong"),
        "{e:?}"
    );
}

/// A sync tool with every kind of parameter, in a mixed order: its calls go
/// through the code shared per signature.
///
/// # Arguments
/// * `word` - A word.
/// * `times` - How often.
#[tool]
fn sync_mixed(
    counter: State<Counter>,
    word: String,
    context: ToolContext,
    #[arg(default = 2)] times: usize,
) -> Vec<String> {
    let n = counter
        .0
        .0
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    vec![format!("{} {word} {n}", context.session_id()); times]
}

#[tokio::test]
async fn a_sync_tool_gets_every_kind_of_parameter() {
    let tool = kesoku::default_registry().get("sync_mixed").unwrap();
    assert_eq!(tool.parameters()["required"], json!(["word"]));
    let ctx = ToolContext::new("s-2").with_state(Counter(std::sync::atomic::AtomicU32::new(5)));
    let out = call_with("sync_mixed", json!({"word": "hi"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.value, json!(["s-2 hi 5", "s-2 hi 5"]));
    let out = call_with("sync_mixed", json!({"word": "yo", "times": 1}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.value, json!(["s-2 yo 6"]));
    // A bad argument is reported before anything is injected: the missing
    // state is not the error.
    let e = call("sync_mixed", json!({"word": 3})).await.unwrap_err();
    assert!(e.to_string().contains("`word`"), "{e}");
    let e = call("sync_mixed", json!({"word": "x"})).await.unwrap_err();
    assert!(e.to_string().starts_with("cannot inject"), "{e}");
}

/// Sums thirteen numbers: more parameters than the shared code takes, so
/// it gets a function of its own.
///
/// # Arguments
/// * `a` - 1.
/// * `b` - 2.
/// * `c` - 3.
/// * `d` - 4.
/// * `e` - 5.
/// * `f` - 6.
/// * `g` - 7.
/// * `h` - 8.
/// * `i` - 9.
/// * `j` - 10.
/// * `k` - 11.
/// * `l` - 12.
/// * `m` - 13.
#[tool]
#[allow(clippy::too_many_arguments, clippy::many_single_char_names)]
fn sum13(
    a: u8,
    b: u8,
    c: u8,
    d: u8,
    e: u8,
    f: u8,
    g: u8,
    h: u8,
    i: u8,
    j: u8,
    k: u8,
    l: u8,
    m: u8,
) -> u32 {
    [a, b, c, d, e, f, g, h, i, j, k, l, m]
        .iter()
        .map(|&x| u32::from(x))
        .sum()
}

#[tokio::test]
async fn a_tool_of_thirteen_parameters_is_called() {
    let args: serde_json::Map<String, Value> = "abcdefghijklm"
        .chars()
        .zip(1_u8..)
        .map(|(name, v)| (name.to_string(), json!(v)))
        .collect();
    let out = call("sum13", Value::Object(args)).await.unwrap();
    assert_eq!(out.value, json!(91));
}
