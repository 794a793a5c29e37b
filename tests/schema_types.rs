//! The schema of every supported parameter type, rendered from the
//! compile-time constants.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use kesoku::tool;
use serde_json::{Value, json};

fn props(schema: &kesoku::ToolSchema) -> Value {
    schema.parameters_json()["properties"].clone()
}

/// Takes every scalar.
///
/// # Arguments
/// * `b` - A boolean.
/// * `i8_` - An i8.
/// * `i16_` - An i16.
/// * `i32_` - An i32.
/// * `i64_` - An i64.
/// * `i128_` - An i128.
/// * `isize_` - An isize.
/// * `u8_` - A u8.
/// * `u16_` - A u16.
/// * `u32_` - A u32.
/// * `u64_` - A u64.
/// * `u128_` - A u128.
/// * `usize_` - A usize.
/// * `f32_` - An f32.
/// * `f64_` - An f64.
/// * `s` - A string.
/// * `p` - A path.
/// * `c` - A char.
/// * `any` - Anything.
#[tool]
#[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
fn scalars(
    b: bool,
    i8_: i8,
    i16_: i16,
    i32_: i32,
    i64_: i64,
    i128_: i128,
    isize_: isize,
    u8_: u8,
    u16_: u16,
    u32_: u32,
    u64_: u64,
    u128_: u128,
    usize_: usize,
    f32_: f32,
    f64_: f64,
    s: String,
    p: PathBuf,
    c: char,
    any: Value,
) {
    let _ = (
        b, i8_, i16_, i32_, i64_, i128_, isize_, u8_, u16_, u32_, u64_, u128_, usize_, f32_, f64_,
        s, p, c, any,
    );
}

#[test]
fn scalar_schemas() {
    let p = props(scalars::SCHEMA);
    assert_eq!(
        p["b"],
        json!({"type": "boolean", "description": "A boolean."})
    );
    assert_eq!(
        p["i8_"],
        json!({"type": "integer", "minimum": -128, "maximum": 127, "description": "An i8."})
    );
    assert_eq!(p["i16_"]["minimum"], -32768);
    assert_eq!(p["i16_"]["maximum"], 32767);
    assert_eq!(p["i32_"]["minimum"], i32::MIN);
    assert_eq!(p["i32_"]["maximum"], i32::MAX);
    // 64- and 128-bit limits are not shown (a double cannot hold them, and
    // they tell the model nothing); the validator still enforces them.
    for wide in ["i64_", "i128_", "isize_"] {
        assert_eq!(
            p[wide],
            json!({"type": "integer", "description": p[wide]["description"]}),
            "{wide}"
        );
    }
    assert_eq!(
        p["u8_"],
        json!({"type": "integer", "minimum": 0, "maximum": 255, "description": "A u8."})
    );
    assert_eq!(p["u16_"]["maximum"], 65535);
    assert_eq!(p["u32_"]["maximum"], u32::MAX);
    // Unsigned wide types keep their `minimum` of 0.
    for wide in ["u64_", "u128_", "usize_"] {
        assert_eq!(
            p[wide],
            json!({"type": "integer", "minimum": 0, "description": p[wide]["description"]}),
            "{wide}"
        );
    }
    assert_eq!(
        p["f32_"],
        json!({"type": "number", "description": "An f32."})
    );
    assert_eq!(p["f64_"]["type"], "number");
    assert_eq!(
        p["s"],
        json!({"type": "string", "description": "A string."})
    );
    assert_eq!(p["p"], json!({"type": "string", "description": "A path."}));
    assert_eq!(
        p["c"],
        json!({"type": "string", "minLength": 1, "maxLength": 1, "description": "A char."})
    );
    assert_eq!(p["any"], json!({"description": "Anything."}));
}

/// Takes every container.
///
/// # Arguments
/// * `opt` - An optional integer.
/// * `list` - A list.
/// * `deque` - A deque.
/// * `fixed` - Exactly three.
/// * `hset` - A hash set.
/// * `bset` - A tree set.
/// * `hmap` - A hash map.
/// * `bmap` - A tree map.
/// * `pair` - A pair.
/// * `boxed` - A boxed bool.
/// * `nested` - Optional lists of optional strings.
#[tool]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn containers(
    opt: Option<i32>,
    list: Vec<String>,
    deque: VecDeque<u8>,
    fixed: [f64; 3],
    hset: HashSet<String>,
    bset: BTreeSet<i64>,
    hmap: HashMap<String, bool>,
    bmap: BTreeMap<String, Vec<u8>>,
    pair: (String, u16),
    boxed: Box<bool>,
    nested: Option<Vec<Option<String>>>,
) {
    let _ = (
        opt, list, deque, fixed, hset, bset, hmap, bmap, pair, boxed, nested,
    );
}

#[test]
fn container_schemas() {
    let full = containers::SCHEMA.parameters_json();
    let p = &full["properties"];
    assert_eq!(
        p["opt"],
        json!({"type": ["integer", "null"], "minimum": i32::MIN, "maximum": i32::MAX, "description": "An optional integer."})
    );
    assert_eq!(
        p["list"],
        json!({"type": "array", "items": {"type": "string"}, "description": "A list."})
    );
    assert_eq!(p["deque"]["items"]["maximum"], 255);
    assert_eq!(
        p["fixed"],
        json!({"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3, "description": "Exactly three."})
    );
    assert_eq!(p["hset"]["uniqueItems"], true);
    assert_eq!(p["bset"]["uniqueItems"], true);
    assert_eq!(
        p["hmap"],
        json!({"type": "object", "additionalProperties": {"type": "boolean"}, "description": "A hash map."})
    );
    assert_eq!(p["bmap"]["additionalProperties"]["type"], "array");
    assert_eq!(
        p["pair"],
        json!({
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": 0, "maximum": 65535}],
            "items": false, "minItems": 2, "maxItems": 2,
            "description": "A pair."
        })
    );
    assert_eq!(
        p["boxed"],
        json!({"type": "boolean", "description": "A boxed bool."})
    );
    assert_eq!(
        p["nested"],
        json!({"type": ["array", "null"], "items": {"type": ["string", "null"]}, "description": "Optional lists of optional strings."})
    );
    // Option parameters are the only optional ones.
    assert_eq!(
        full["required"],
        json!([
            "list", "deque", "fixed", "hset", "bset", "hmap", "bmap", "pair", "boxed"
        ])
    );
}

#[test]
fn arguments_object_is_strict_draft_2020_12() {
    let full = containers::SCHEMA.parameters_json();
    assert_eq!(
        full["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(full["type"], "object");
    assert_eq!(full["additionalProperties"], false);
    // Every property has a description.
    for (name, prop) in full["properties"].as_object().unwrap() {
        assert!(prop["description"].is_string(), "{name} has no description");
    }
}

/// Has defaults.
///
/// # Arguments
/// * `limit` - How many.
/// * `label` - A label.
/// * `flag` - A flag.
#[tool]
fn defaults(
    #[arg(default = 5)] limit: u32,
    #[arg(default = "none".to_string())] label: String,
    #[arg(default)] flag: bool,
) -> String {
    format!("{limit} {label} {flag}")
}

#[test]
fn defaults_show_in_schema_and_are_not_required() {
    let full = defaults::SCHEMA.parameters_json();
    assert_eq!(full["properties"]["limit"]["default"], 5);
    assert_eq!(full["properties"]["label"]["default"], "none");
    assert_eq!(full["properties"]["flag"]["default"], false);
    assert_eq!(full["required"], json!([]));
}

#[test]
fn schema_is_a_constant() {
    // Usable in const context: nothing is built at run time.
    const NAME: &str = defaults::SCHEMA.name;
    const N_ARGS: usize = defaults::SCHEMA.arguments.fields.len();
    assert_eq!(NAME, "defaults");
    assert_eq!(N_ARGS, 3);
}

/// Takes wide integers.
///
/// # Arguments
/// * `a` - An i64.
/// * `b` - A u64.
/// * `c` - A u128.
#[tool]
fn wide(a: i64, b: u64, c: u128) {
    let _ = (a, b, c);
}

#[tokio::test]
async fn wide_integer_bounds_are_enforced_though_not_shown() {
    let tool = kesoku::default_registry().get("wide").unwrap();
    let ctx = kesoku::ToolContext::new("s");
    let ok = tool
        .call(json!({"a": i64::MIN, "b": u64::MAX, "c": 0}), &ctx)
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    let err = tool
        .call(json!({"a": 1e30, "b": -1, "c": -1}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    for want in [
        "argument `a`: expected an integer from -9223372036854775808 to 9223372036854775807, got 1000000000000000019884624838656",
        "argument `b`: expected an integer from 0 to 18446744073709551615, got -1",
        "argument `c`: expected an integer from 0 to 340282366920938463463374607431768211455, got -1",
    ] {
        assert!(err.contains(want), "{want}\nnot in\n{err}");
    }
}
