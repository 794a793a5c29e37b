//! Anthropic Messages API (`input_schema`): any JSON Schema is accepted,
//! as long as the root is `type: object`.

use serde_json::Value;

use super::common::{Sink, check_object_root};
use super::report::LoweringReport;

/// The schema as it is, checking only the root.
pub(crate) fn lower(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    check_object_root(schema, &mut Sink { tool, report }, "input_schema");
    schema.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lowering::Severity;
    use serde_json::json;

    #[test]
    fn object_schemas_pass_unchanged() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}},
            "required": [],
            "additionalProperties": false
        });
        let mut r = LoweringReport::default();
        assert_eq!(lower("t", &s, &mut r), s);
        assert!(r.is_empty());
    }

    #[test]
    fn root_must_be_an_object() {
        let mut r = LoweringReport::default();
        let s = json!({"properties": {}});
        assert_eq!(lower("t", &s, &mut r), s);
        assert_eq!(r.entries.len(), 1);
        let e = &r.entries[0];
        assert_eq!((e.path.as_str(), e.keyword.as_str()), ("", "type"));
        assert_eq!(e.severity, Severity::Unsupported);

        let mut r = LoweringReport::default();
        lower("t", &json!({"type": "array"}), &mut r);
        assert_eq!(r.entries[0].path, "/type");
        assert_eq!(
            r.entries[0].detail,
            "`input_schema` must have `\"type\": \"object\"`, not \"array\""
        );
    }
}
