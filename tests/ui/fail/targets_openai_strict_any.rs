use kesoku::tool;

/// Stores any JSON value.
///
/// # Arguments
/// * `value` - The value.
#[tool(targets(mcp, openai_strict))]
fn store(value: serde_json::Value) -> String {
    value.to_string()
}

fn main() {}
