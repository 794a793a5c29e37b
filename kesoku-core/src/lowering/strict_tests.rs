//! Strict-mode lowering, rule by rule.

use serde_json::{Value, json};

use super::lower;
use crate::lowering::common::test_support::keys;
use crate::lowering::{LoweringReport, Severity};

fn run(schema: &Value) -> (Value, LoweringReport) {
    crate::lowering::common::test_support::run(lower, schema)
}

#[test]
fn optional_properties_become_required_and_nullable() {
    let (out, r) = run(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "A."},
            "n": {"type": ["integer", "null"], "description": "N."},
            "limit": {"type": "integer", "minimum": 0, "maximum": 10, "description": "How many.", "default": 5},
            "kind": {"type": "string", "enum": ["x", "y"], "description": "Kind."}
        },
        "required": ["a"],
        "additionalProperties": false
    }));
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "description": "A."},
                "n": {"type": ["integer", "null"], "description": "N."},
                "limit": {"type": ["integer", "null"], "minimum": 0, "maximum": 10, "description": "How many. Default: 5."},
                "kind": {"description": "Kind.", "anyOf": [{"type": "string", "enum": ["x", "y"]}, {"type": "null"}]}
            },
            "required": ["a", "n", "limit", "kind"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        keys(&r),
        [
            ("/properties/limit/default", "default", Severity::Lossy),
            ("/properties/n", "required", Severity::Rewritten),
            ("/properties/limit", "required", Severity::Rewritten),
            ("/properties/kind", "required", Severity::Rewritten),
        ]
    );
    assert_eq!(
        r.entries[0].detail,
        "strict mode does not support `default`; moved to the description"
    );
    assert_eq!(
        r.entries[2].detail,
        "optional property `limit` is now required and accepts null, as strict mode requires; null means absent"
    );
}

#[test]
fn open_maps_and_untyped_schemas_are_reported_not_rewritten() {
    let input = json!({
        "type": "object",
        "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "boolean"}, "description": "M."},
            "o": {"type": "object"},
            "any": {"description": "Anything."}
        },
        "required": ["m", "o", "any"],
        "additionalProperties": false
    });
    let (out, r) = run(&input);
    assert_eq!(out, input);
    assert_eq!(
        keys(&r),
        [
            (
                "/properties/m/additionalProperties",
                "additionalProperties",
                Severity::Unsupported
            ),
            (
                "/properties/o",
                "additionalProperties",
                Severity::Unsupported
            ),
            ("/properties/any", "type", Severity::Unsupported),
        ]
    );
    assert_eq!(
        r.entries[0].detail,
        "an open map (any key, each value boolean) cannot be expressed in strict mode, where every key must be listed; kept as is"
    );
}

#[test]
fn unions_tuples_and_unsupported_constraints() {
    let dot = json!({"type": "string", "const": "Dot"});
    let circle = json!({"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"], "additionalProperties": false});
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {
            "shape": {"oneOf": [dot, circle]},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "minItems": 2, "maxItems": 2},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "c": {"type": "string", "minLength": 1, "maxLength": 1},
            "d": {"type": "string", "format": "uri", "uniqueItems": false},
            "x": {"allOf": [{"type": "string"}]}
        },
        "required": ["shape", "pair", "tags", "c", "d", "x"],
        "additionalProperties": false
    }));
    let p = &out["properties"];
    assert_eq!(p["shape"], json!({"anyOf": [dot, circle]}));
    assert_eq!(
        p["pair"],
        json!({
            "type": "array",
            "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "minItems": 2, "maxItems": 2,
            "description": "Exactly 2 items, in this order: string, integer."
        })
    );
    assert_eq!(
        p["tags"],
        json!({"type": "array", "items": {"type": "string"}, "description": "Items must be unique."})
    );
    assert_eq!(
        p["c"],
        json!({"type": "string", "description": "Exactly 1 character."})
    );
    assert_eq!(
        p["d"],
        json!({"type": "string", "description": "Format: \"uri\"."})
    );
    assert_eq!(p["x"], json!({"allOf": [{"type": "string"}]}));
    assert_eq!(
        keys(&r),
        [
            ("/properties/shape/oneOf", "oneOf", Severity::Rewritten),
            (
                "/properties/pair/prefixItems",
                "prefixItems",
                Severity::Lossy
            ),
            (
                "/properties/tags/uniqueItems",
                "uniqueItems",
                Severity::Lossy
            ),
            ("/properties/c/minLength", "minLength", Severity::Lossy),
            ("/properties/c/maxLength", "maxLength", Severity::Lossy),
            ("/properties/d/format", "format", Severity::Lossy),
            ("/properties/x/allOf", "allOf", Severity::Unsupported),
        ]
    );
}

#[test]
fn refs_with_siblings_are_inlined_and_recursion_kept() {
    let tree = json!({
        "type": "object",
        "description": "A tree.",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
        },
        "required": ["label", "children"],
        "additionalProperties": false
    });
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Tree", "description": "The tree."}},
        "required": ["tree"],
        "additionalProperties": false,
        "$defs": {"Tree": tree}
    }));
    let mut inlined = tree.clone();
    inlined["description"] = "The tree.".into();
    assert_eq!(out["properties"]["tree"], inlined);
    assert_eq!(out["$defs"]["Tree"], tree);
    assert_eq!(
        keys(&r),
        [("/properties/tree/$ref", "$ref", Severity::Rewritten)]
    );
    assert_eq!(
        r.entries[0].detail,
        "inlined `#/$defs/Tree`: strict mode rejects keywords next to `$ref` (here description)"
    );
}

#[test]
fn a_reference_to_itself_with_siblings_drops_the_siblings() {
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {"l": {"$ref": "#/$defs/L", "description": "L."}},
        "required": ["l"],
        "additionalProperties": false,
        "$defs": {"L": {"type": "object", "properties": {"next": {"$ref": "#/$defs/L", "description": "Next."}}, "required": ["next"], "additionalProperties": false}}
    }));
    assert_eq!(
        out["properties"]["l"]["properties"]["next"],
        json!({"$ref": "#/$defs/L"})
    );
    assert_eq!(
        keys(&r),
        [
            // Inside the copy inlined at `l`, `next` points back into it.
            ("/properties/l/$ref", "$ref", Severity::Rewritten),
            ("/$defs/L/properties/next/$ref", "$ref", Severity::Lossy),
            // In `$defs` itself, `next` is inlined once.
            ("/$defs/L/properties/next/$ref", "$ref", Severity::Rewritten),
        ]
    );
}

#[test]
fn the_root_must_be_a_plain_object() {
    let (_, r) = run(
        &json!({"anyOf": [{"type": "object", "properties": {}, "additionalProperties": false}]}),
    );
    assert_eq!(
        keys(&r),
        [
            ("", "type", Severity::Unsupported),
            ("/anyOf", "anyOf", Severity::Unsupported),
        ]
    );
}

#[test]
fn objects_without_additional_properties_are_closed() {
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "examples": [{"a": "x"}]
    }));
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": false,
            "description": "examples: [{\"a\":\"x\"}]."
        })
    );
    assert_eq!(
        keys(&r),
        [
            ("/examples", "examples", Severity::Lossy),
            (
                "/additionalProperties",
                "additionalProperties",
                Severity::Rewritten
            ),
        ]
    );
}

// Claude's structured outputs: the same walker, another profile.

fn run_anthropic(schema: &Value) -> (Value, LoweringReport) {
    crate::lowering::common::test_support::run(super::lower_anthropic, schema)
}

#[test]
fn claude_keeps_optional_properties_optional_and_moves_bounds_to_the_description() {
    let (out, r) = run_anthropic(&json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0, "maximum": 255, "description": "How many."},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 2},
            "site": {"type": ["string", "null"], "format": "uri"},
            "inner": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}
        },
        "required": ["count"]
    }));
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "description": "How many. minimum: 0. maximum: 255."},
                "tags": {"type": "array", "items": {"type": "string", "description": "At most 8 characters."}, "description": "At least 2 items."},
                "site": {"type": ["string", "null"], "format": "uri"},
                "inner": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false}
            },
            "required": ["count"],
            "additionalProperties": false
        })
    );
    let lossy: Vec<_> = keys(&r)
        .into_iter()
        .filter(|k| k.2 == Severity::Lossy)
        .map(|k| k.1)
        .collect();
    assert_eq!(lossy, ["minimum", "maximum", "maxLength", "minItems"]);
    assert!(!r.has_unsupported(), "{r}");
    assert!(
        r.iter()
            .any(|e| e.detail == "Claude's structured output takes `minItems` of 0 or 1 only; moved to the description"),
        "{r}"
    );
}

#[test]
fn claude_refuses_recursion_and_open_maps() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/Node"},
            "scores": {"type": "object", "additionalProperties": {"type": "number"}}
        },
        "required": ["tree", "scores"],
        "additionalProperties": false,
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["children"],
                "additionalProperties": false
            }
        }
    });
    let (_, r) = run_anthropic(&schema);
    let unsupported: Vec<_> = r
        .iter()
        .filter(|e| e.severity == Severity::Unsupported)
        .map(|e| (e.path.as_str(), e.detail.as_str()))
        .collect();
    assert_eq!(
        unsupported,
        [
            (
                "/$defs/Node",
                "`Node` contains itself, and Claude's structured output takes no recursive schema; kept as is, so Anthropic will reject it"
            ),
            (
                "/properties/scores/additionalProperties",
                "an open map (any key, each value number) cannot be expressed in Claude's structured output, where every key must be listed; kept as is"
            ),
        ]
    );
    // OpenAI's strict mode takes the same recursion.
    let (_, r) = run(&schema);
    assert!(r.iter().all(|e| e.path != "/$defs/Node"), "{r}");
}
