//! Gemini `parameters` lowering, rule by rule.

use serde_json::{Value, json};

use super::lower;
use crate::lowering::common::test_support::keys;
use crate::lowering::{LoweringReport, Severity};

fn run(schema: &Value) -> (Value, LoweringReport) {
    crate::lowering::common::test_support::run(lower, schema)
}

#[test]
fn null_unions_const_and_one_of() {
    let (out, r) = run(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "minimum": 0, "maximum": 9, "description": "N."},
            "o": {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
                    {"type": "null"}
                ],
                "description": "O."
            },
            "shape": {"oneOf": [
                {"type": "string", "const": "Dot", "description": "A dot."},
                {"type": "object", "properties": {"Circle": {"type": "number"}}, "required": ["Circle"], "additionalProperties": false}
            ]}
        },
        "required": ["shape"],
        "additionalProperties": false
    }));
    assert_eq!(
        out,
        json!({
            "type": "OBJECT",
            "properties": {
                "n": {"type": "INTEGER", "nullable": true, "minimum": 0, "maximum": 9, "description": "N."},
                "o": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "required": ["a"], "description": "O.", "nullable": true},
                "shape": {"anyOf": [
                    {"type": "STRING", "enum": ["Dot"], "description": "A dot."},
                    {"type": "OBJECT", "properties": {"Circle": {"type": "NUMBER"}}, "required": ["Circle"]}
                ]}
            },
            "required": ["shape"],
            "propertyOrdering": ["n", "o", "shape"]
        })
    );
    assert_eq!(
        keys(&r),
        [
            ("/properties/n/type", "type", Severity::Rewritten),
            ("/properties/o/anyOf", "anyOf", Severity::Rewritten),
            (
                "/properties/o/anyOf/0/additionalProperties",
                "additionalProperties",
                Severity::Lossy
            ),
            ("/properties/shape/oneOf", "oneOf", Severity::Rewritten),
            (
                "/properties/shape/oneOf/0/const",
                "const",
                Severity::Rewritten
            ),
            (
                "/properties/shape/oneOf/1/additionalProperties",
                "additionalProperties",
                Severity::Lossy
            ),
            (
                "/additionalProperties",
                "additionalProperties",
                Severity::Lossy
            ),
        ]
    );
    assert_eq!(
        r.entries[0].detail,
        "the type list became `\"type\": \"INTEGER\"` with `nullable: true`"
    );
}

#[test]
fn dropped_constraints_move_into_descriptions() {
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "description": "Tags."},
            "limit": {"type": "integer", "default": 5, "exclusiveMinimum": 0, "multipleOf": 5},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Meta."},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "minItems": 2, "maxItems": 2}
        },
        "required": ["tags"]
    }));
    assert_eq!(
        out["properties"],
        json!({
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "description": "Tags. Items must be unique."},
            "limit": {"type": "INTEGER", "description": "Default: 5. Greater than 0. A multiple of 5."},
            "meta": {"type": "OBJECT", "description": "Meta. Keys are free-form; each value is integer."},
            "pair": {
                "type": "ARRAY",
                "items": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
                "minItems": 2, "maxItems": 2,
                "description": "Exactly 2 items, in this order: string, integer."
            }
        })
    );
    assert_eq!(
        out["propertyOrdering"],
        json!(["tags", "limit", "meta", "pair"])
    );
    assert_eq!(
        keys(&r),
        [
            (
                "/properties/tags/uniqueItems",
                "uniqueItems",
                Severity::Lossy
            ),
            ("/properties/limit/default", "default", Severity::Lossy),
            (
                "/properties/limit/exclusiveMinimum",
                "exclusiveMinimum",
                Severity::Lossy
            ),
            (
                "/properties/limit/multipleOf",
                "multipleOf",
                Severity::Lossy
            ),
            // A map is an OBJECT without properties: refused.
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
}

#[test]
fn refs_are_inlined_and_recursion_stops_at_a_placeholder() {
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Tree", "description": "The tree."}},
        "required": ["tree"],
        "additionalProperties": false,
        "$defs": {"Tree": {
            "type": "object",
            "description": "A tree.",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
            },
            "required": ["label", "children"],
            "additionalProperties": false
        }}
    }));
    assert_eq!(
        out,
        json!({
            "type": "OBJECT",
            "properties": {"tree": {
                "type": "OBJECT",
                "description": "The tree.",
                "properties": {
                    "label": {"type": "STRING"},
                    "children": {"type": "ARRAY", "items": {
                        "type": "OBJECT",
                        "description": "A tree. A nested `Tree`, with the same structure as the enclosing one."
                    }}
                },
                "required": ["label", "children"],
                "propertyOrdering": ["label", "children"]
            }},
            "required": ["tree"]
        })
    );
    assert_eq!(
        keys(&r),
        [
            ("/properties/tree/$ref", "$ref", Severity::Rewritten),
            (
                "/$defs/Tree/properties/children/items/$ref",
                "$ref",
                Severity::Unsupported
            ),
            (
                "/$defs/Tree/additionalProperties",
                "additionalProperties",
                Severity::Lossy
            ),
            (
                "/additionalProperties",
                "additionalProperties",
                Severity::Lossy
            ),
        ]
    );
}

#[test]
fn enums_and_types_outside_the_subset() {
    let (out, r) = run(&json!({
        "type": "object",
        "properties": {
            "i": {"type": "integer", "enum": [1, 2]},
            "s": {"type": ["string", "null"], "enum": ["a", null]},
            "u": {"type": ["string", "integer"]},
            "k": {"const": 3},
            "z": {"type": "null"}
        }
    }));
    let p = &out["properties"];
    assert_eq!(p["i"], json!({"type": "INTEGER", "enum": [1, 2]}));
    assert_eq!(
        p["s"],
        json!({"type": "STRING", "nullable": true, "enum": ["a"]})
    );
    assert_eq!(p["u"], json!({"type": ["string", "integer"]}));
    assert_eq!(p["k"], json!({"const": 3}));
    assert_eq!(
        keys(&r),
        [
            ("/properties/i/enum", "enum", Severity::Unsupported),
            ("/properties/s/type", "type", Severity::Rewritten),
            ("/properties/s/enum", "enum", Severity::Rewritten),
            ("/properties/u/type", "type", Severity::Unsupported),
            ("/properties/k/const", "const", Severity::Unsupported),
            ("/properties/z/type", "type", Severity::Unsupported),
        ]
    );
}

#[test]
fn parameters_without_properties_are_rejected_by_gemini() {
    let (out, r) = run(&json!({"type": "object", "properties": {}, "required": []}));
    assert_eq!(
        out,
        json!({"type": "OBJECT", "properties": {}, "required": []})
    );
    assert_eq!(
        keys(&r),
        [("/properties", "properties", Severity::Unsupported)]
    );
}
