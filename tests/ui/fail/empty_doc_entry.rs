use kesoku::tool;

/// Adds two numbers.
///
/// # Arguments
/// * `a` -
/// * `b`
#[tool]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

fn main() {}
