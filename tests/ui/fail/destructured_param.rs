use kesoku::tool;

/// Adds the two halves of a pair.
///
/// # Arguments
/// * `pair` - The pair to add.
#[tool]
fn add_pair((a, b): (i32, i32)) -> i32 {
    a + b
}

fn main() {}
