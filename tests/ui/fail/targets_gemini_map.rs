use std::collections::HashMap;

use kesoku::tool;

/// Counts tagged items.
///
/// # Arguments
/// * `tags` - How many of each tag.
#[tool(targets(gemini))]
fn count_tags(tags: HashMap<String, u32>) -> u32 {
    tags.values().sum()
}

fn main() {}
