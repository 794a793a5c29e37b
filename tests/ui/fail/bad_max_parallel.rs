use kesoku::tool;

/// Never runs.
///
/// # Arguments
/// * `a` - A number.
#[tool(max_parallel = 0)]
fn never(a: i64) -> i64 {
    a
}

/// Alone, and also two at a time.
///
/// # Arguments
/// * `a` - A number.
#[tool(sequential, max_parallel = 2)]
fn torn(a: i64) -> i64 {
    a
}

fn main() {}
