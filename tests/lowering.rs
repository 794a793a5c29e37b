//! Per-provider lowering of real `#[tool]` schemas: what each dialect
//! rewrites, drops and refuses.

// The types exist for their schemas; their fields are never read.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use kesoku::lowering::{Dialect, Lowered, Severity, ToolNames, lower};
use kesoku::tool;
use serde::Deserialize;
use serde_json::{Value, json};

/// A shape.
#[derive(Debug, Deserialize, kesoku::ToolArg)]
enum Shape {
    /// A dot.
    Dot,
    /// A circle.
    Circle {
        /// Radius.
        r: f64,
    },
}

/// A tree of labels.
#[derive(Debug, Deserialize, kesoku::ToolArg)]
struct Tree {
    /// The label.
    label: String,
    /// The subtrees.
    children: Vec<Tree>,
}

/// Finds notes.
///
/// # Arguments
/// * `query` - What to look for.
/// * `limit` - How many hits.
/// * `note` - An optional note.
#[tool]
fn find_notes(query: String, #[arg(default = 5)] limit: u32, note: Option<String>) -> String {
    format!("{query} {limit} {note:?}")
}

/// Stores tagged metadata.
///
/// # Arguments
/// * `tags` - Distinct tags.
/// * `meta` - Free-form counters.
/// * `pair` - A name and a count.
#[tool]
#[allow(clippy::needless_pass_by_value, clippy::implicit_hasher)]
fn store_meta(tags: HashSet<String>, meta: HashMap<String, i64>, pair: (String, u16)) -> usize {
    tags.len() + meta.len() + pair.0.len()
}

/// Draws a shape.
///
/// # Arguments
/// * `shape` - The shape.
/// * `fill` - A shape to fill it with.
#[tool]
fn draw(shape: Shape, fill: Option<Shape>) -> String {
    format!("{shape:?} {fill:?}")
}

/// Walks a tree.
///
/// # Arguments
/// * `tree` - The tree.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn walk_tree(tree: Tree) -> usize {
    tree.children.len()
}

const TOOLS: [&str; 4] = ["find_notes", "store_meta", "draw", "walk_tree"];

fn params(tool: &str) -> &'static Value {
    kesoku::default_registry()
        .get(tool)
        .unwrap()
        .parameters_ref()
}

fn lowered(dialect: Dialect, tool: &str) -> Lowered {
    lower(dialect, tool, params(tool))
}

/// `(path, keyword, severity)` of every entry.
fn keys(l: &Lowered) -> Vec<(&str, &str, Severity)> {
    l.report
        .iter()
        .map(|e| (e.path.as_str(), e.keyword.as_str(), e.severity))
        .collect()
}

#[test]
fn anthropic_and_mcp_take_the_schemas_as_they_are() {
    for dialect in [Dialect::Anthropic, Dialect::Mcp] {
        for tool in TOOLS {
            let l = lowered(dialect, tool);
            assert_eq!(&l.schema, params(tool));
            assert!(l.report.is_empty(), "{}", l.report);
        }
    }
    let report = kesoku::default_registry().lint(Dialect::Anthropic);
    assert!(report.is_empty(), "{report}");
    assert_eq!(report.to_string(), "no changes");
}

#[test]
fn openai_and_gemini_json_schema_only_drop_the_dialect() {
    for dialect in [Dialect::OpenAi, Dialect::GeminiJsonSchema] {
        for tool in TOOLS {
            let l = lowered(dialect, tool);
            let mut expected = params(tool).clone();
            expected.as_object_mut().unwrap().shift_remove("$schema");
            assert_eq!(l.schema, expected);
            assert!(l.report.is_empty(), "{}", l.report);
        }
    }
}

#[test]
fn openai_strict_makes_optional_parameters_required_and_nullable() {
    let l = lowered(Dialect::OpenAiStrict, "find_notes");
    let s = &l.schema;
    assert!(s.get("$schema").is_none());
    assert_eq!(s["required"], json!(["query", "limit", "note"]));
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["properties"]["limit"]["type"], json!(["integer", "null"]));
    assert_eq!(
        s["properties"]["limit"]["description"],
        "How many hits. Default: 5."
    );
    assert!(s["properties"]["limit"].get("default").is_none());
    assert_eq!(
        s["properties"]["note"],
        json!({"type": ["string", "null"], "description": "An optional note."})
    );
    assert_eq!(
        keys(&l),
        [
            ("/properties/limit/default", "default", Severity::Lossy),
            ("/properties/limit", "required", Severity::Rewritten),
            ("/properties/note", "required", Severity::Rewritten),
        ]
    );
    assert!(!l.report.has_unsupported() && !l.report.is_lossless());
    assert_eq!(
        l.report.entries[0].to_string(),
        "tool `find_notes` at /properties/limit/default: keyword `default` dropped: strict mode does not support `default`; moved to the description"
    );
}

#[test]
fn openai_strict_flags_open_maps_and_flattens_tuples_and_sets() {
    let l = lowered(Dialect::OpenAiStrict, "store_meta");
    let p = &l.schema["properties"];
    // The map is kept as it is: reported, never rewritten silently.
    assert_eq!(p["meta"], params("store_meta")["properties"]["meta"]);
    assert_eq!(
        p["tags"]["description"],
        "Distinct tags. Items must be unique."
    );
    assert_eq!(
        p["pair"]["items"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0, "maximum": 65535}]})
    );
    assert_eq!(
        keys(&l),
        [
            (
                "/properties/tags/uniqueItems",
                "uniqueItems",
                Severity::Lossy
            ),
            (
                "/properties/meta/additionalProperties",
                "additionalProperties",
                Severity::Unsupported
            ),
            (
                "/properties/pair/prefixItems",
                "prefixItems",
                Severity::Lossy
            ),
        ]
    );
    let lint = kesoku::default_registry().lint(Dialect::OpenAiStrict);
    let unsupported: Vec<&str> = lint.unsupported().map(|e| e.tool.as_str()).collect();
    assert!(unsupported.contains(&"store_meta"), "{lint}");
}

#[test]
fn openai_strict_unions_and_recursion() {
    let l = lowered(Dialect::OpenAiStrict, "draw");
    let shape = &l.schema["properties"]["shape"];
    assert!(shape.get("oneOf").is_none());
    assert_eq!(shape["anyOf"][0]["const"], "Dot");
    // `Option<Shape>` is already a union with null: only listed as required.
    assert_eq!(l.schema["required"], json!(["shape", "fill"]));
    assert_eq!(
        l.schema["properties"]["fill"]["anyOf"][1],
        json!({"type": "null"})
    );
    assert!(l.schema["properties"]["fill"]["anyOf"][0]["anyOf"].is_array());
    assert_eq!(
        keys(&l),
        [
            ("/properties/shape/oneOf", "oneOf", Severity::Rewritten),
            (
                "/properties/fill/anyOf/0/oneOf",
                "oneOf",
                Severity::Rewritten
            ),
            ("/properties/fill", "required", Severity::Rewritten),
        ]
    );
    assert!(l.report.is_lossless());

    let l = lowered(Dialect::OpenAiStrict, "walk_tree");
    let tree = &l.schema["properties"]["tree"];
    // `$ref` next to a description is inlined once; deeper levels refer to `$defs`.
    assert_eq!(tree["description"], "The tree.");
    assert_eq!(
        tree["properties"]["children"]["items"],
        json!({"$ref": "#/$defs/Tree"})
    );
    assert_eq!(l.schema["$defs"], params("walk_tree")["$defs"]);
    assert_eq!(
        keys(&l),
        [("/properties/tree/$ref", "$ref", Severity::Rewritten)]
    );
}

#[test]
fn gemini_parameters_use_the_openapi_subset() {
    let l = lowered(Dialect::GeminiOpenApi, "find_notes");
    assert_eq!(
        l.schema,
        json!({
            "type": "OBJECT",
            "properties": {
                "query": {"type": "STRING", "description": "What to look for."},
                "limit": {"type": "INTEGER", "minimum": 0, "maximum": u32::MAX, "description": "How many hits. Default: 5."},
                "note": {"type": "STRING", "nullable": true, "description": "An optional note."}
            },
            "required": ["query"],
            "propertyOrdering": ["query", "limit", "note"]
        })
    );

    let l = lowered(Dialect::GeminiOpenApi, "store_meta");
    let p = &l.schema["properties"];
    assert_eq!(
        p["meta"],
        json!({"type": "OBJECT", "description": "Free-form counters. Keys are free-form; each value is integer."})
    );
    assert_eq!(
        p["tags"]["description"],
        "Distinct tags. Items must be unique."
    );
    assert_eq!(
        p["pair"]["description"],
        "A name and a count. Exactly 2 items, in this order: string, integer."
    );

    let l = lowered(Dialect::GeminiOpenApi, "draw");
    let alts = &l.schema["properties"]["shape"]["anyOf"];
    assert_eq!(
        alts[0],
        json!({"type": "STRING", "enum": ["Dot"], "description": "A dot."})
    );
    assert_eq!(alts[1]["properties"]["Circle"]["type"], "OBJECT");
    // `Option<Shape>`: the null branch becomes `nullable`, `oneOf` an `anyOf`.
    let fill = &l.schema["properties"]["fill"];
    assert_eq!(fill["nullable"], true);
    assert_eq!(fill["description"], "A shape to fill it with.");
    assert_eq!(fill["anyOf"], *alts);
    assert!(l.report.unsupported().next().is_none());
}

#[test]
fn gemini_parameters_cannot_express_recursion() {
    let l = lowered(Dialect::GeminiOpenApi, "walk_tree");
    let tree = &l.schema["properties"]["tree"];
    assert_eq!(tree["description"], "The tree.");
    assert_eq!(tree["properties"]["label"]["type"], "STRING");
    assert_eq!(
        tree["properties"]["children"]["items"],
        json!({
            "type": "OBJECT",
            "description": "A tree of labels. A nested `Tree`, with the same structure as the enclosing one."
        })
    );
    assert!(l.schema.get("$defs").is_none());

    let lint = kesoku::default_registry().lint(Dialect::GeminiOpenApi);
    let unsupported: Vec<(&str, &str)> = lint
        .unsupported()
        .map(|e| (e.tool.as_str(), e.path.as_str()))
        .collect();
    assert!(
        unsupported.contains(&("walk_tree", "/$defs/Tree/properties/children/items/$ref")),
        "{lint}"
    );
    // A map is an OBJECT without properties, which Gemini refuses too.
    let refused: Vec<&str> = lint
        .for_tool("store_meta")
        .filter(|e| e.severity == Severity::Unsupported)
        .map(|e| e.path.as_str())
        .collect();
    assert_eq!(refused, ["/properties/meta/additionalProperties"], "{lint}");
    for tool in ["find_notes", "draw"] {
        assert_eq!(
            lint.for_tool(tool)
                .filter(|e| e.severity == Severity::Unsupported)
                .count(),
            0,
            "{lint}"
        );
    }
}

/// What Gemini's `parameters` accepts (PROVIDERS.md).
const GEMINI_ACCEPTED: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "propertyOrdering",
];

/// What it rejects (PROVIDERS.md), named for the failure message.
const GEMINI_REJECTED: &[&str] = &[
    "$schema",
    "additionalProperties",
    "const",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "propertyNames",
    "patternProperties",
    "$ref",
    "$defs",
];

/// Walks a lowered schema, following only subschema positions, so a
/// property *named* like a keyword is not mistaken for one.
fn assert_gemini_clean(v: &Value, path: &str) {
    let m = v
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not a schema object: {v}"));
    for k in m.keys() {
        assert!(
            !GEMINI_REJECTED.contains(&k.as_str()),
            "{path}: rejected keyword `{k}`"
        );
        assert!(
            GEMINI_ACCEPTED.contains(&k.as_str()),
            "{path}: unknown keyword `{k}`"
        );
    }
    if let Some(t) = m.get("type") {
        let t = t
            .as_str()
            .unwrap_or_else(|| panic!("{path}: type list {t}"));
        assert!(
            ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"].contains(&t),
            "{path}: type {t}"
        );
    }
    if let Some(e) = m.get("enum") {
        assert!(
            e.as_array().unwrap().iter().all(Value::is_string),
            "{path}: enum {e}"
        );
    }
    for (name, p) in m
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        assert_gemini_clean(p, &format!("{path}/properties/{name}"));
    }
    if let Some(items) = m.get("items") {
        assert_gemini_clean(items, &format!("{path}/items"));
    }
    for (i, alt) in m
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        assert_gemini_clean(alt, &format!("{path}/anyOf/{i}"));
    }
}

#[test]
fn gemini_parameters_contain_no_rejected_keyword_anywhere() {
    for tool in kesoku::default_registry() {
        let l = lower(Dialect::GeminiOpenApi, tool.name(), tool.parameters_ref());
        assert_gemini_clean(&l.schema, tool.name());
    }
}

#[test]
fn every_dialect_lowers_every_tool() {
    for dialect in Dialect::ALL {
        for tool in TOOLS {
            let l = lowered(dialect, tool);
            assert!(l.schema.is_object(), "{dialect} {tool}");
            for e in &l.report {
                assert_eq!(e.tool, tool);
                // Every path points into the original schema.
                let parent = e.path.rsplit_once('/').map_or("", |(p, _)| p);
                assert!(
                    params(tool).pointer(parent).is_some(),
                    "{dialect}: {e} does not point into the original"
                );
            }
        }
    }
}

#[test]
fn tool_names_are_valid_for_every_provider() {
    let registry = kesoku::default_registry();
    for dialect in Dialect::ALL {
        let names = ToolNames::new(dialect, registry.names());
        // kesoku names are portable already: nothing is renamed.
        assert_eq!(names.renamed().count(), 0, "{dialect}");
        assert_eq!(names.to_wire("walk_tree"), "walk_tree");
    }
    // MCP-style dotted names are mapped for OpenAI, and back.
    let names = ToolNames::new(
        Dialect::OpenAi,
        ["fs.read_file", "fs.write_file", "fs_read_file"],
    );
    assert_eq!(names.to_wire("fs_read_file"), "fs_read_file");
    assert_eq!(names.to_wire("fs.read_file"), "fs_read_file_2");
    assert_eq!(names.to_wire("fs.write_file"), "fs_write_file");
    assert_eq!(names.from_wire("fs_read_file_2"), "fs.read_file");
    assert_eq!(names.from_wire("fs_write_file"), "fs.write_file");
    assert_eq!(names.from_wire("unknown"), "unknown");
}
