use kesoku::tool;

/// A tree of labels.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Tree {
    /// The label.
    label: String,
    /// The children.
    children: Vec<Tree>,
}

/// Counts a tree's nodes.
///
/// # Arguments
/// * `tree` - The tree.
#[tool(targets(anthropic, gemini))]
fn count_nodes(tree: Tree) -> usize {
    1 + tree.children.len()
}

fn main() {}
