//! MCP `tools/list` (`inputSchema`): plain JSON Schema with a
//! `type: object` root.

use serde_json::Value;

use super::common::{Sink, check_object_root};
use super::report::LoweringReport;

/// The schema as it is, checking only the root.
pub(crate) fn lower(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    check_object_root(schema, &mut Sink { tool, report }, "inputSchema");
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
            "properties": {"t": {"$ref": "#/$defs/T"}},
            "$defs": {"T": {"type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}}
        });
        let mut r = LoweringReport::default();
        assert_eq!(lower("t", &s, &mut r), s);
        assert!(r.is_empty());
    }

    #[test]
    fn a_non_object_root_is_unsupported() {
        let mut r = LoweringReport::default();
        lower("t", &json!("not a schema"), &mut r);
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].severity, Severity::Unsupported);
        assert_eq!(
            r.entries[0].detail,
            "`inputSchema` must be an object schema, not \"not a schema\""
        );
    }
}
