//! Every target takes these: the demo's tools (which declare all seven),
//! and the shapes of types a tool commonly takes, through derived and
//! nested types.

use std::collections::{BTreeSet, HashSet};

use kesoku::tool;

#[allow(dead_code)]
#[path = "../../../examples/demo/tools.rs"]
mod demo_tools;

/// Where to send it.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Address {
    /// The street.
    street: String,
    /// The city, if known.
    city: Option<String>,
    /// The kind of place.
    kind: Kind,
    /// Extra lines.
    #[serde(flatten)]
    extra: Lines,
}

/// Extra address lines.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Lines {
    /// The second line.
    line2: Option<String>,
}

/// A kind of place.
#[derive(serde::Deserialize, kesoku::ToolArg)]
#[serde(rename_all = "snake_case")]
enum Kind {
    /// A home.
    Home,
    /// An office.
    Office,
}

/// How to pay.
#[derive(serde::Deserialize, kesoku::ToolArg)]
#[serde(tag = "method", rename_all = "snake_case")]
enum Payment {
    /// By card.
    Card {
        /// The last four digits.
        last4: String,
    },
    /// On delivery.
    Cash,
}

/// Places an order.
///
/// # Arguments
/// * `items` - What to order.
/// * `address` - Where to send it.
/// * `payment` - How to pay.
/// * `tags` - Distinct tags.
/// * `sorted` - Sorted labels.
/// * `window` - A delivery window: earliest and latest hour.
/// * `weights` - Three weights.
/// * `note` - A note.
/// * `when` - An RFC 3339 time.
#[tool(targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp))]
#[allow(clippy::too_many_arguments)]
fn place_order(
    items: Vec<String>,
    address: Address,
    payment: Payment,
    tags: HashSet<String>,
    sorted: BTreeSet<u8>,
    window: (u8, u8),
    weights: [f64; 3],
    note: Option<Box<str>>,
    #[arg(schema = kesoku::Schema::formatted("date-time"))] when: String,
) -> usize {
    let _ = (address, payment, tags, sorted, window, weights, note, when);
    items.len()
}

/// A tree of labels: recursion is taken by every target but `gemini`'s
/// `parameters` and Claude's structured outputs.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Tree {
    /// The label.
    label: String,
    /// The children.
    children: Vec<Tree>,
    /// A section of trees, which are not these.
    section: Option<Box<Section>>,
}

/// Trees under a heading.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Section {
    /// The heading.
    heading: String,
    /// The labels.
    labels: Vec<String>,
}

/// Counts a tree's labels.
///
/// # Arguments
/// * `tree` - The tree.
#[tool(targets(anthropic, openai, openai_strict, gemini_json_schema, mcp))]
fn count_labels(tree: Tree) -> usize {
    1 + tree.children.len() + tree.section.map_or(0, |s| s.labels.len())
}

fn main() {
    let _ = place_order::TOOL;
    let _ = count_labels::TOOL;
    let _ = demo_tools::registry();
}
