use kesoku::tool;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool(targets(gemni, openai::strict))]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {
    let _ = add::SCHEMA;
}
