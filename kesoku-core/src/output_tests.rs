//! `output.rs`'s unit tests.

use serde_json::json;

use super::*;

#[test]
fn a_fence_is_read_through() {
    assert_eq!(unfenced("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
    assert_eq!(unfenced("```\n[1]\n```"), "[1]");
    assert_eq!(unfenced("  {\"a\": 1} "), "{\"a\": 1}");
    assert_eq!(unfenced("```json {}"), "```json {}");
}

#[test]
fn names_providers_reject_are_refused_or_mapped() {
    assert!(OutputSchema::new("a b", json!({})).is_err());
    assert!(OutputSchema::new("x".repeat(65), json!({})).is_err());
    let e = OutputSchema::new("ok", json!({"type": 5})).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot use `ok` as an answer's schema: the schema does not compile"),
        "{e}"
    );
    assert_eq!(wire_name("Réponse"), "R_ponse");
}

#[test]
fn every_problem_is_named_by_its_path() {
    let output = OutputSchema::new(
        "Point",
        json!({
            "type": "object",
            "properties": {"x": {"type": "integer", "description": "Across."}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["x"],
            "additionalProperties": false
        }),
    )
    .unwrap();
    let e = output.read(r#"{"tags": ["a", 2], "y": 1}"#).unwrap_err();
    assert_eq!(e.raw, r#"{"tags": ["a", 2], "y": 1}"#);
    assert_eq!(
        e.to_string(),
        "the answer is not a valid `Point` (3 problems):\n- `x` is required (Across.)\n- `tags[1]`: expected a string, got number 2\n- `y` is not a field here; the fields are `x`, `tags`"
    );
}

#[test]
fn a_stored_schema_reads_back_the_same() {
    let output = OutputSchema::of::<Vec<u32>>();
    let stored = serde_json::to_value(&output).unwrap();
    assert_eq!(stored["name"], "output");
    let back: OutputSchema = serde_json::from_value(stored).unwrap();
    assert_eq!(back, output);
    assert!(serde_json::from_value::<OutputSchema>(json!({"name": "a b", "schema": {}})).is_err());
}

#[test]
fn a_long_list_of_problems_is_cut_short_in_the_message() {
    let output = OutputSchema::of::<Vec<u32>>();
    let answer = serde_json::to_string(&vec!["x"; 1000]).unwrap();
    let e = output.read(&answer).unwrap_err();
    assert_eq!(e.errors.len(), 1000, "every problem is kept");
    let text = e.to_string();
    assert!(text.contains("(1000 problems)"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("- `")).count(),
        LISTED
    );
    assert!(text.ends_with("\n- and 980 more"), "{text}");
}

#[test]
fn a_shape_read_back_is_the_one_in_use() {
    let output = OutputSchema::of::<Vec<i16>>();
    let lowered: *const Lowered = output.lowered(Dialect::OpenAiStrict);
    let back: OutputSchema =
        serde_json::from_value(serde_json::to_value(&output).unwrap()).unwrap();
    assert_eq!(
        lowered,
        std::ptr::from_ref(back.lowered(Dialect::OpenAiStrict))
    );
}

#[test]
fn a_null_for_an_optional_field_means_absent() {
    // What a strict mode sends for a field it made required and nullable.
    let output = OutputSchema::new(
        "Page",
        json!({"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "next": {"anyOf": [{"$ref": "#/$defs/Link"}, {"type": "null"}]},
                "links": {"type": "array", "items": {"$ref": "#/$defs/Link"}}},
            "$defs": {"Link": {"type": "object", "properties": {
                "href": {"type": "string"}, "rel": {"type": "string"}}, "required": ["href"]}},
            "required": ["links"]}),
    )
    .unwrap();
    let read = output
        .read(r#"{"tags": null, "next": null, "links": [{"href": "a", "rel": null}]}"#)
        .unwrap();
    // `next` takes null, so it stays; the others are dropped.
    assert_eq!(read, json!({"next": null, "links": [{"href": "a"}]}));
    // A required field's null is still an error.
    assert_eq!(
        output.read(r#"{"links": null}"#).unwrap_err().errors[0].path,
        "links"
    );
}

#[test]
fn a_reference_loop_ends() {
    let output = OutputSchema::new(
        "Loop",
        json!({"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "object"}]}},
               "$ref": "#/$defs/A"}),
    )
    .unwrap();
    assert!(output.read(r#"{"a": null}"#).is_ok());
}

#[test]
fn formats_are_checked_in_answers() {
    let output = OutputSchema::of::<std::collections::BTreeMap<String, Value>>();
    assert!(output.read("{}").is_ok());
    let when = OutputSchema::new(
        "When",
        json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}),
    )
    .unwrap();
    assert!(when.read(r#"{"at": "2026-12-05T14:30:00Z"}"#).is_ok());
    let e = when.read(r#"{"at": "tomorrow"}"#).unwrap_err();
    assert_eq!(e.errors[0].path, "at");
}

/// A decoder stricter than the schema: an even number.
#[derive(Debug)]
struct Even(u8);

impl<'de> serde::Deserialize<'de> for Even {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u8::deserialize(d)?;
        if n % 2 == 0 {
            Ok(Even(n))
        } else {
            Err(serde::de::Error::custom(format!("{n} is odd")))
        }
    }
}

impl ToolArg for Even {
    const SCHEMA: Schema = <u8 as ToolArg>::SCHEMA;
}

#[test]
fn a_shape_of_a_type_is_checked_by_decoding_too() {
    let output = OutputSchema::of::<Vec<Even>>();
    assert_eq!(output.read_as::<Vec<Even>>("[2, 4]").unwrap()[1].0, 4);
    let e = output.read("[2, 3]").unwrap_err();
    assert_eq!(e.errors[0].path, "[1]");
    assert!(e.to_string().contains("3 is odd"), "{e}");
}

#[test]
fn lowerings_are_kept() {
    let output = OutputSchema::of::<Option<u8>>();
    let a: *const Lowered = output.lowered(Dialect::GeminiOpenApi);
    let b: *const Lowered = OutputSchema::of::<Option<u8>>().lowered(Dialect::GeminiOpenApi);
    assert_eq!(a, b);
}
