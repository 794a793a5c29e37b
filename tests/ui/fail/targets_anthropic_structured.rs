use std::collections::HashMap;

use kesoku::tool;

/// A node that may hold another.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Node {
    /// Its name.
    name: String,
    /// The next node.
    next: Option<Box<Node>>,
}

/// Walks nodes.
///
/// # Arguments
/// * `node` - The first node.
#[tool(targets(anthropic_structured))]
fn walk(node: Node) -> String {
    node.name
}

/// Sums counters.
///
/// # Arguments
/// * `counters` - The counters.
#[tool(targets(anthropic_structured))]
fn sum(counters: HashMap<String, i64>) -> i64 {
    counters.values().sum()
}

fn main() {}
