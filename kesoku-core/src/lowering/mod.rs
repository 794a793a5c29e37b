//! Per-provider lowering of tool schemas.
//!
//! kesoku renders every tool's arguments as JSON Schema draft 2020-12.
//! Providers accept different subsets of it: OpenAI's strict mode needs
//! every property required and every object closed, Gemini's legacy
//! `parameters` takes an OpenAPI 3.0 subset without references or type
//! lists. [`lower`] rewrites a schema for one [`Dialect`] and says, in a
//! [`LoweringReport`], what it changed and what that cost;
//! [`ToolRegistry::lint`] does it for every registered tool, and
//! [`ToolNames`] maps tool names a provider would reject.
//!
//! Nothing here weakens what kesoku accepts: arguments are still validated
//! against the original schema when a call arrives, so a constraint the
//! provider cannot enforce (moved into the description) is still enforced.
//!
//! ```
//! use kesoku_core::lowering::{Dialect, Severity, lower};
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"note": {"type": ["string", "null"], "description": "A note."}},
//!     "required": [],
//!     "additionalProperties": false
//! });
//! let lowered = lower(Dialect::GeminiOpenApi, "annotate", &schema);
//! assert_eq!(
//!     lowered.schema["properties"]["note"],
//!     json!({"type": "STRING", "nullable": true, "description": "A note."})
//! );
//! assert!(lowered.report.iter().any(|e| e.severity == Severity::Rewritten));
//! ```

use std::fmt;

use serde_json::Value;

use crate::schema::targets::Target;
use crate::tool::registry::ToolRegistry;

mod anthropic;
mod common;
mod gemini;
mod gemini_openapi;
mod mcp;
mod names;
mod openai;
mod report;
mod strict;

pub use names::ToolNames;
pub use report::{LoweringReport, ReportEntry, Severity, Subject};

/// A provider's flavour of tool schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// Anthropic Messages `input_schema`: any JSON Schema with an object root.
    Anthropic,
    /// OpenAI Chat Completions `parameters` without `strict`.
    OpenAi,
    /// OpenAI `parameters` with `"strict": true`: a closed subset.
    OpenAiStrict,
    /// Gemini `parametersJsonSchema`: ordinary JSON Schema.
    GeminiJsonSchema,
    /// Gemini `parameters`: the legacy OpenAPI 3.0 subset.
    GeminiOpenApi,
    /// MCP `tools/list` `inputSchema`.
    Mcp,
    /// Claude's structured outputs (`output_config.format`, strict tools):
    /// closed objects, no numeric or length bounds, no recursion.
    AnthropicStructured,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 7] = [
        Dialect::Anthropic,
        Dialect::OpenAi,
        Dialect::OpenAiStrict,
        Dialect::GeminiJsonSchema,
        Dialect::GeminiOpenApi,
        Dialect::Mcp,
        Dialect::AnthropicStructured,
    ];
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Anthropic => "Anthropic",
            Dialect::OpenAi => "OpenAI",
            Dialect::OpenAiStrict => "OpenAI (strict)",
            Dialect::GeminiJsonSchema => "Gemini (parametersJsonSchema)",
            Dialect::GeminiOpenApi => "Gemini (parameters)",
            Dialect::Mcp => "MCP",
            Dialect::AnthropicStructured => "Anthropic (structured outputs)",
        })
    }
}

/// The dialect a [`Target`] names: lint a registry for the targets its
/// tools declare.
///
/// ```
/// use kesoku_core::Target;
/// use kesoku_core::lowering::Dialect;
///
/// assert_eq!(Dialect::from(Target::Gemini), Dialect::GeminiOpenApi);
/// ```
impl From<Target> for Dialect {
    fn from(target: Target) -> Dialect {
        match target {
            Target::Anthropic => Dialect::Anthropic,
            Target::AnthropicStructured => Dialect::AnthropicStructured,
            Target::OpenAi => Dialect::OpenAi,
            Target::OpenAiStrict => Dialect::OpenAiStrict,
            Target::Gemini => Dialect::GeminiOpenApi,
            Target::GeminiJsonSchema => Dialect::GeminiJsonSchema,
            Target::Mcp => Dialect::Mcp,
        }
    }
}

/// A schema lowered for one provider, and what that changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Lowered {
    /// The schema to send.
    pub schema: Value,
    /// What was rewritten, dropped or could not be expressed.
    pub report: LoweringReport,
}

/// Rewrites the arguments schema of tool `tool` for `dialect`.
///
/// Pure: the same input gives the same output. Report paths point into
/// `schema`, the original.
pub fn lower(dialect: Dialect, tool: &str, schema: &Value) -> Lowered {
    let mut report = LoweringReport::default();
    let schema = match dialect {
        Dialect::Anthropic => anthropic::lower(tool, schema, &mut report),
        Dialect::OpenAi => openai::lower(tool, schema, &mut report),
        Dialect::OpenAiStrict => strict::lower(tool, schema, &mut report),
        Dialect::GeminiJsonSchema => gemini::lower(tool, schema, &mut report),
        Dialect::GeminiOpenApi => gemini_openapi::lower(tool, schema, &mut report),
        Dialect::Mcp => mcp::lower(tool, schema, &mut report),
        Dialect::AnthropicStructured => strict::lower_anthropic(tool, schema, &mut report),
    };
    report.dedup();
    Lowered { schema, report }
}

impl ToolRegistry {
    /// Lowers every tool's arguments schema for `dialect` and gathers the
    /// reports, tool by tool in name order.
    ///
    /// ```
    /// use kesoku_core::lowering::Dialect;
    ///
    /// let report = kesoku_core::default_registry().lint(Dialect::Anthropic);
    /// assert!(!report.has_unsupported(), "{report}");
    /// ```
    pub fn lint(&self, dialect: Dialect) -> LoweringReport {
        let mut all = LoweringReport::default();
        for tool in self {
            all.merge(lower(dialect, tool.name(), tool.parameters_ref()).report);
        }
        all
    }
}

#[cfg(test)]
mod targets_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DynamicTool, ToolOutput};
    use serde_json::json;

    #[test]
    fn display_names() {
        let names: Vec<String> = Dialect::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "Anthropic",
                "OpenAI",
                "OpenAI (strict)",
                "Gemini (parametersJsonSchema)",
                "Gemini (parameters)",
                "MCP",
                "Anthropic (structured outputs)"
            ]
        );
    }

    #[test]
    fn lint_merges_every_tool_in_name_order() {
        let mut registry = ToolRegistry::new();
        for (name, schema) in [
            (
                "b_tool",
                json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}}),
            ),
            (
                "a_tool",
                json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}),
            ),
        ] {
            let tool = DynamicTool::new(name, "", schema, |_, _| async {
                Ok(ToolOutput::new(Value::Null))
            })
            .unwrap();
            registry.register(tool).unwrap();
        }
        assert!(registry.lint(Dialect::Anthropic).is_empty());
        let strict = registry.lint(Dialect::OpenAiStrict);
        assert_eq!(strict.for_tool("a_tool").count(), 0);
        let tools: Vec<&str> = strict.iter().map(|e| e.tool.as_str()).collect();
        assert!(tools.iter().all(|t| *t == "b_tool"), "{strict}");
        assert!(strict.has_unsupported());
        let gemini = registry.lint(Dialect::GeminiOpenApi);
        assert_eq!(gemini.entries[0].tool, "a_tool");
        assert_eq!(gemini.entries[0].keyword, "additionalProperties");
    }

    #[test]
    fn lowering_is_pure() {
        let s = json!({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "null"}], "default": "x"}}});
        for d in Dialect::ALL {
            assert_eq!(lower(d, "t", &s), lower(d, "t", &s));
        }
    }
}
