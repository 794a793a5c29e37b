use std::collections::BTreeMap;

use kesoku::tool;

/// Settings, with free-form labels two levels down.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Settings {
    /// The name.
    name: String,
    /// What the labels say.
    inner: Inner,
}

/// The inner part.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Inner {
    /// Free-form labels.
    labels: Option<Vec<BTreeMap<String, String>>>,
}

/// Applies settings.
///
/// # Arguments
/// * `id` - Which thing.
/// * `settings` - The settings.
#[tool(targets(openai_strict))]
fn apply(id: u32, settings: Settings) -> String {
    format!("{id} {}", settings.name)
}

fn main() {}
