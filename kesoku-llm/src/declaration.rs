//! [`ToolDeclaration`]: a tool as a model sees it.

use kesoku_core::{Tool, ToolRegistry};
use serde_json::Value;

/// A tool as a model sees it: name, description and JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDeclaration {
    /// The tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The arguments' JSON Schema (draft 2020-12, as kesoku renders it).
    pub parameters: Value,
}

impl ToolDeclaration {
    /// The declaration of a registered tool.
    pub fn from_tool(tool: &Tool) -> Self {
        let mut description = tool.description().to_owned();
        if let Some(returns) = tool.returns() {
            description.push_str("\n\nReturns: ");
            description.push_str(returns);
        }
        ToolDeclaration {
            name: tool.name().to_owned(),
            description,
            parameters: tool.parameters(),
        }
    }

    /// Every tool of a registry, by name.
    pub fn all(registry: &ToolRegistry) -> Vec<Self> {
        registry.iter().map(Self::from_tool).collect()
    }
}
