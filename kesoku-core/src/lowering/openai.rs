//! OpenAI Chat Completions without `strict`: the schema is a hint the
//! model follows loosely, so nothing needs rewriting. The root must still
//! be `type: object`, and `$schema` is stripped: it names the dialect and
//! carries no constraint.

use serde_json::Value;

use super::common::{Sink, check_object_root, strip_root_dialect};
use super::report::LoweringReport;

/// The schema without its root `$schema`.
pub(crate) fn lower(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    check_object_root(schema, &mut Sink { tool, report }, "parameters");
    strip_root_dialect(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_only_the_root_dialect_and_reports_nothing() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"n": {"type": ["integer", "null"], "default": 5}},
            "required": [],
            "additionalProperties": false
        });
        let mut r = LoweringReport::default();
        let out = lower("t", &s, &mut r);
        assert!(r.is_empty());
        let mut expected = s.clone();
        expected.as_object_mut().unwrap().remove("$schema");
        assert_eq!(out, expected);
        // Key order is kept.
        assert_eq!(out.as_object().unwrap().keys().next().unwrap(), "type");
    }
}
