use kesoku::{ToolArg, tool};

#[derive(ToolArg)]
struct Point {
    x: i32,
    y: i32,
}

/// Sums a point's coordinates.
///
/// # Arguments
/// * `p` - The point.
#[tool]
fn sum(p: Point) -> i32 {
    p.x + p.y
}

fn main() {}
