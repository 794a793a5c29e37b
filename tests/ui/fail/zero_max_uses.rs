use kesoku::tool;

/// Never callable.
///
/// # Arguments
/// * `a` - A number.
#[tool(max_uses = 0)]
fn never(a: i64) -> i64 {
    a
}

fn main() {}
