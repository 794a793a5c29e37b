//! `#[derive(ToolArg)]`: schemas that follow the serde representation, and
//! decoding through them.

// The enums and structs exist for their schemas; most fields are never read.
#![allow(dead_code)]

use std::collections::BTreeMap;

use kesoku::{Schema, ToolArg, ToolContext, tool};
use serde::Deserialize;
use serde_json::{Value, json};

fn schema_of<T: ToolArg>() -> Value {
    T::SCHEMA.to_json()
}

/// Search options.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(rename_all = "camelCase")]
struct Options {
    /// Largest number of hits.
    max_hits: u32,
    /// Case-sensitive matching.
    #[serde(default)]
    case_sensitive: bool,
    /// A renamed field.
    #[serde(rename = "q")]
    query_text: String,
    /// Never sent by the model.
    #[serde(skip)]
    #[allow(dead_code)]
    internal: Vec<u8>,
    /// An optional note.
    note: Option<String>,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(Debug, Deserialize, ToolArg)]
struct Paging {
    /// Page number.
    page: u16,
}

#[test]
fn struct_fields_follow_serde() {
    assert_eq!(
        schema_of::<Options>(),
        json!({
            "type": "object",
            "description": "Search options.",
            "properties": {
                "maxHits": {"type": "integer", "minimum": 0, "maximum": u32::MAX, "description": "Largest number of hits."},
                "caseSensitive": {"type": "boolean", "description": "Case-sensitive matching."},
                "q": {"type": "string", "description": "A renamed field."},
                "note": {"type": ["string", "null"], "description": "An optional note."},
                "page": {"type": "integer", "minimum": 0, "maximum": 65535, "description": "Page number."}
            },
            "required": ["maxHits", "q", "page"],
            "additionalProperties": false
        })
    );
}

/// Sort order.
#[derive(Debug, Deserialize, ToolArg, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Order {
    Newest,
    OldestFirst,
    #[serde(rename = "by-score")]
    ByScore,
}

#[test]
fn unit_enums_are_string_enums() {
    assert_eq!(
        schema_of::<Order>(),
        json!({"type": "string", "enum": ["newest", "oldest_first", "by-score"], "description": "Sort order."})
    );
}

/// A shape, externally tagged.
#[derive(Debug, Deserialize, ToolArg)]
enum Shape {
    /// A dot.
    Dot,
    /// A circle.
    Circle {
        /// Radius.
        r: f64,
    },
    /// A square of this side.
    Square(f64),
    /// A rectangle.
    Rect(f64, f64),
}

#[test]
fn data_enums_are_externally_tagged_one_of() {
    let s = schema_of::<Shape>();
    let alts = s["oneOf"].as_array().unwrap();
    assert_eq!(alts.len(), 4);
    assert_eq!(
        alts[0],
        json!({"type": "string", "const": "Dot", "description": "A dot."})
    );
    assert_eq!(
        alts[1],
        json!({
            "type": "object", "description": "A circle.",
            "properties": {"Circle": {
                "type": "object", "description": "A circle.",
                "properties": {"r": {"type": "number", "description": "Radius."}},
                "required": ["r"], "additionalProperties": false
            }},
            "required": ["Circle"], "additionalProperties": false
        })
    );
    assert_eq!(alts[2]["properties"]["Square"], json!({"type": "number"}));
    assert_eq!(
        alts[3]["properties"]["Rect"]["prefixItems"],
        json!([{"type": "number"}, {"type": "number"}])
    );
}

/// A command, internally tagged.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Command {
    /// Stop.
    Stop,
    /// Move.
    Move {
        /// Steps.
        steps: u8,
    },
}

/// A message, adjacently tagged.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(tag = "t", content = "c")]
enum Msg {
    Ping,
    Text(String),
}

#[test]
fn internally_and_adjacently_tagged_enums() {
    let s = schema_of::<Command>();
    assert_eq!(
        s["oneOf"][0],
        json!({
            "type": "object", "description": "Stop.",
            "properties": {"kind": {"type": "string", "const": "stop"}},
            "required": ["kind"], "additionalProperties": false
        })
    );
    assert_eq!(s["oneOf"][1]["properties"]["kind"]["const"], "move");
    assert_eq!(
        s["oneOf"][1]["properties"]["steps"]["description"],
        "Steps."
    );
    assert_eq!(s["oneOf"][1]["required"], json!(["kind", "steps"]));

    let m = schema_of::<Msg>();
    assert_eq!(m["oneOf"][0]["required"], json!(["t"]));
    assert_eq!(m["oneOf"][1]["properties"]["c"], json!({"type": "string"}));
    assert_eq!(m["oneOf"][1]["required"], json!(["t", "c"]));
}

/// A tree of labels.
#[derive(Debug, Deserialize, ToolArg)]
struct Tree {
    /// The label.
    label: String,
    /// The subtrees.
    children: Vec<Tree>,
}

#[test]
fn recursive_types_use_defs_and_refs() {
    let s = schema_of::<Tree>();
    assert_eq!(s["$ref"], "#/$defs/Tree");
    let def = &s["$defs"]["Tree"];
    assert_eq!(
        def["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Tree"})
    );
    assert_eq!(def["description"], "A tree of labels.");
}

/// A transparent wrapper.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(transparent)]
struct Meters(f64);

/// A newtype.
#[derive(Debug, Deserialize, ToolArg)]
struct Id(u64);

#[test]
fn newtypes_are_their_inner_type() {
    assert_eq!(
        schema_of::<Meters>(),
        json!({"type": "number", "description": "A transparent wrapper."})
    );
    assert_eq!(schema_of::<Id>()["type"], "integer");
    assert!(matches!(<Id as ToolArg>::SCHEMA, Schema::Named(n) if n.name == "Id"));
}

/// Searches a tree.
///
/// # Arguments
/// * `tree` - The tree.
/// * `options` - How to search.
/// * `order` - The order.
/// * `shapes` - Shapes by name.
/// * `commands` - Commands to run.
#[tool]
fn search(
    tree: Tree,
    options: Options,
    order: Order,
    shapes: BTreeMap<String, Shape>,
    commands: Vec<Command>,
) -> String {
    format!(
        "{} {} {} {} {:?} {} {} {}",
        tree.label,
        tree.children.len(),
        options.max_hits,
        options.q_len(),
        order,
        shapes.len(),
        commands.len(),
        options.paging.page + u16::from(options.case_sensitive) + u16::from(options.note.is_some())
    )
}

impl Options {
    fn q_len(&self) -> usize {
        self.query_text.len()
    }
}

#[test]
fn recursive_defs_sit_at_the_root_of_tool_parameters() {
    let p = search::SCHEMA.parameters_json();
    assert_eq!(p["properties"]["tree"]["$ref"], "#/$defs/Tree");
    assert_eq!(p["properties"]["tree"]["description"], "The tree.");
    assert!(p["$defs"]["Tree"].is_object());
}

#[tokio::test]
async fn derived_types_decode_and_validate() {
    let tool = kesoku::default_registry().get("search").unwrap();
    let ctx = ToolContext::new("s");
    let good = json!({
        "tree": {"label": "root", "children": [{"label": "a", "children": []}]},
        "options": {"maxHits": "3", "q": "abc", "page": 2},
        "order": "oldest_first",
        "shapes": {"c": {"Circle": {"r": 1.5}}, "d": "Dot", "s": {"Square": 2}},
        "commands": [{"kind": "stop"}, {"kind": "move", "steps": 3}]
    });
    let out = tool.call(good.clone(), &ctx).await.unwrap();
    assert_eq!(out.text(), "root 1 3 3 OldestFirst 3 2 2");

    let mut bad = good.clone();
    bad["tree"]["children"][0]["children"] = json!([{"label": 5, "children": []}]);
    let e = tool.call(bad, &ctx).await.unwrap_err().to_string();
    assert!(
        e.contains(
            "argument `tree.children[0].children[0].label`: expected a string, got number 5"
        ),
        "{e}"
    );

    let mut bad = good.clone();
    bad["order"] = json!("newest_first");
    let e = tool.call(bad, &ctx).await.unwrap_err().to_string();
    assert!(
        e.contains("argument `order`: expected one of `newest`, `oldest_first`, `by-score`, got \"newest_first\"; did you mean `oldest_first`?"),
        "{e}"
    );

    let mut bad = good.clone();
    bad["commands"][1] = json!({"kind": "move", "steps": "many"});
    let e = tool.call(bad, &ctx).await.unwrap_err().to_string();
    assert!(
        e.contains("argument `commands[1].steps`: expected an integer from 0 to 255"),
        "{e}"
    );

    let mut bad = good;
    bad["options"]["page"] = json!(70000);
    let e = tool.call(bad, &ctx).await.unwrap_err().to_string();
    assert!(
        e.contains("argument `options.page`: expected an integer from 0 to 65535, got 70000"),
        "{e}"
    );
}

/// Settings with defaults.
#[derive(Debug, Deserialize, ToolArg)]
struct Settings {
    /// Verbose output.
    #[serde(default)]
    verbose: bool,
    /// Retries.
    #[serde(default = "three")]
    retries: u8,
}

fn three() -> u8 {
    3
}

/// Applies settings.
///
/// # Arguments
/// * `settings` - The settings.
#[tool]
fn apply(settings: Settings) -> String {
    format!("{} {}", settings.verbose, settings.retries)
}

#[tokio::test]
async fn null_for_a_defaulted_field_means_absent() {
    // OpenAI's strict mode makes every field required and nullable, so
    // models send null for the ones they leave out.
    let tool = kesoku::default_registry().get("apply").unwrap();
    let out = tool
        .call(
            json!({"settings": {"verbose": null, "retries": null}}),
            &ToolContext::new("s"),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "false 3");
}

/// An arithmetic expression, internally tagged and recursive.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Expr {
    /// A number.
    Num {
        /// Its value.
        value: f64,
    },
    /// A sum.
    Add {
        /// Left side.
        left: Box<Expr>,
        /// Right side.
        right: Box<Expr>,
    },
    /// A difference.
    Sub {
        /// Left side.
        left: Box<Expr>,
        /// Right side.
        right: Box<Expr>,
    },
}

fn eval(e: &Expr) -> f64 {
    match e {
        Expr::Num { value } => *value,
        Expr::Add { left, right } => eval(left) + eval(right),
        Expr::Sub { left, right } => eval(left) - eval(right),
    }
}

/// Evaluates an expression.
///
/// # Arguments
/// * `expr` - The expression.
#[tool]
fn evaluate(expr: Expr) -> f64 {
    eval(&expr)
}

/// An id, untagged.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(untagged)]
enum AnyId {
    Num(u64),
    Name(String),
}

/// Echoes an id's kind.
///
/// # Arguments
/// * `id` - The id.
#[tool]
fn id_kind(id: AnyId) -> String {
    format!("{id:?}")
}

/// Measures a shape.
///
/// # Arguments
/// * `shape` - The shape.
#[tool]
fn measure(shape: Shape) -> String {
    format!("{shape:?}")
}

#[tokio::test]
async fn nested_tagged_enums_validate_in_linear_time() {
    // 40 levels of Add/Sub: exponential if every variant were tried at every level.
    let mut expr = json!({"op": "num", "value": 1});
    for i in 0..40 {
        let op = if i % 2 == 0 { "add" } else { "sub" };
        expr = json!({"op": op, "left": expr, "right": {"op": "num", "value": "2"}});
    }
    let started = std::time::Instant::now();
    let tool = kesoku::default_registry().get("evaluate").unwrap();
    let out = tool
        .call(json!({"expr": expr}), &ToolContext::new("s"))
        .await
        .unwrap();
    assert_eq!(out.value, json!(1.0));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A wrong tag deep inside is named precisely.
    let bad = json!({"expr": {"op": "add", "left": {"op": "num", "value": 1}, "right": {"op": "mul", "value": 2}}});
    let e = tool
        .call(bad, &ToolContext::new("s"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("expr.right"), "{e}");
}

#[tokio::test]
async fn a_quoted_value_keeps_its_string_variant() {
    let tool = kesoku::default_registry().get("id_kind").unwrap();
    let ctx = ToolContext::new("s");
    assert_eq!(
        tool.call(json!({"id": "007"}), &ctx).await.unwrap().text(),
        "Name(\"007\")"
    );
    assert_eq!(
        tool.call(json!({"id": 7}), &ctx).await.unwrap().text(),
        "Num(7)"
    );
}

#[tokio::test]
async fn the_variant_whose_shape_matched_gives_the_error() {
    let tool = kesoku::default_registry().get("measure").unwrap();
    let e = tool
        .call(
            json!({"shape": {"Circle": {"r": "big"}}}),
            &ToolContext::new("s"),
        )
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid arguments for tool `measure`: argument `shape.Circle.r`: expected a number, got string \"big\""
    );
}

mod graph_a {
    /// A list node, recursive.
    #[derive(Debug, serde::Deserialize, kesoku::ToolArg)]
    pub(crate) struct Node {
        /// The value.
        pub(crate) value: i32,
        /// The next node.
        pub(crate) next: Option<Box<Node>>,
    }
}

mod graph_b {
    /// A plain node of the same name.
    #[derive(Debug, serde::Deserialize, kesoku::ToolArg)]
    pub(crate) struct Node {
        /// A label.
        pub(crate) label: String,
    }
}

/// Takes two different types that share a name.
///
/// # Arguments
/// * `plain` - A plain node.
/// * `list` - A linked list.
#[tool]
fn two_nodes(plain: graph_b::Node, list: graph_a::Node) -> String {
    format!(
        "{} {}",
        plain.label,
        list.value + list.next.map_or(0, |n| n.value)
    )
}

#[tokio::test]
async fn same_named_types_are_told_apart() {
    let p = two_nodes::SCHEMA.parameters_json();
    // The plain node is inlined; the recursive one is referenced.
    assert_eq!(
        p["properties"]["plain"]["properties"]["label"]["type"],
        "string"
    );
    assert_eq!(p["properties"]["list"]["$ref"], "#/$defs/Node");
    assert_eq!(p["$defs"]["Node"]["properties"]["value"]["type"], "integer");
    let tool = kesoku::default_registry().get("two_nodes").unwrap();
    let out = tool
        .call(json!({"plain": {"label": "x"}, "list": {"value": 1, "next": {"value": 2, "next": null}}}), &ToolContext::new("s"))
        .await
        .unwrap();
    assert_eq!(out.text(), "x 3");
}

/// An email address, read from a string.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(try_from = "String")]
struct Email {
    user: String,
    domain: String,
}

impl TryFrom<String> for Email {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let (user, domain) = s.split_once('@').ok_or_else(|| format!("`{s}` has no @"))?;
        Ok(Email {
            user: user.into(),
            domain: domain.into(),
        })
    }
}

fn hex<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).unwrap_or("?"), 16).map_err(serde::de::Error::custom)
        })
        .collect()
}

/// A blob with a custom reader.
#[derive(Debug, Deserialize, ToolArg)]
struct Blob {
    /// Hex-encoded bytes.
    #[serde(deserialize_with = "hex")]
    bytes: Vec<u8>,
}

/// Sends a blob.
///
/// # Arguments
/// * `to` - The recipient.
/// * `blob` - The data.
#[tool]
fn send_blob(to: Email, blob: Blob) -> String {
    format!("{}@{} {:?}", to.user, to.domain, blob.bytes)
}

#[tokio::test]
async fn from_and_deserialize_with_follow_the_wire_format() {
    let p = send_blob::SCHEMA.parameters_json();
    assert_eq!(p["properties"]["to"]["type"], "string");
    assert_eq!(
        p["properties"]["blob"]["properties"]["bytes"],
        json!({"description": "Hex-encoded bytes."})
    );
    let tool = kesoku::default_registry().get("send_blob").unwrap();
    let ctx = ToolContext::new("s");
    let out = tool
        .call(json!({"to": "a@b.c", "blob": {"bytes": "0aff"}}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.text(), "a@b.c [10, 255]");
    let e = tool
        .call(json!({"to": "nobody", "blob": {"bytes": "00"}}), &ctx)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("`nobody` has no @"), "{e}");
}

/// A record with a catch-all for extra keys.
#[derive(Debug, Deserialize, ToolArg)]
struct Record {
    /// Its id.
    id: u32,
    /// Everything else, as numbers.
    #[serde(flatten)]
    extra: BTreeMap<String, f64>,
}

/// Stores a record.
///
/// # Arguments
/// * `record` - The record.
#[tool]
fn store(record: Record) -> String {
    format!("{} {:?}", record.id, record.extra)
}

#[tokio::test]
async fn a_flattened_map_takes_the_other_keys() {
    let p = store::SCHEMA.parameters_json();
    assert_eq!(
        p["properties"]["record"]["additionalProperties"],
        json!({"type": "number"})
    );
    let tool = kesoku::default_registry().get("store").unwrap();
    let ctx = ToolContext::new("s");
    let out = tool
        .call(
            json!({"record": {"id": 1, "height": 2.5, "width": "3"}}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "1 {\"height\": 2.5, \"width\": 3.0}");
    let e = tool
        .call(json!({"record": {"id": 1, "height": "tall"}}), &ctx)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("argument `record.height`: expected a number"),
        "{e}"
    );
}

/// A chapter of a book, which holds books in turn: two types that contain
/// each other.
#[derive(Deserialize, ToolArg)]
#[allow(dead_code)]
struct Chapter {
    /// The title.
    title: String,
    /// Books quoted in it.
    quoted: Vec<Book>,
}

/// A book.
#[derive(Deserialize, ToolArg)]
#[allow(dead_code)]
struct Book {
    /// Its chapters.
    chapters: Option<Box<Chapter>>,
}

/// Types that contain each other still derive and render (with `$defs`),
/// as long as no tool declares targets for them.
#[test]
fn types_that_contain_each_other_derive_and_render() {
    let book = schema_of::<Book>();
    let text = book.to_string();
    assert!(text.contains("$ref"), "{text}");
    assert!(text.contains("quoted"), "{text}");
}
