//! Gemini `parametersJsonSchema`: ordinary JSON Schema. Third-party
//! reports say `anyOf`, `$ref`/`$defs` and `additionalProperties` work; no
//! official keyword list exists, so only the root `$schema` is stripped.

use serde_json::Value;

use super::common::strip_root_dialect;
use super::report::LoweringReport;

/// The schema without its root `$schema`.
pub(crate) fn lower(_tool: &str, schema: &Value, _report: &mut LoweringReport) -> Value {
    strip_root_dialect(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_the_root_dialect_only() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                "t": {"$ref": "#/$defs/T"}
            },
            "$defs": {"T": {"type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}}
        });
        let mut r = LoweringReport::default();
        let out = lower("t", &s, &mut r);
        assert!(r.is_empty());
        assert!(out.get("$schema").is_none());
        assert_eq!(out["properties"], s["properties"]);
        assert_eq!(out["$defs"], s["$defs"]);
    }
}
