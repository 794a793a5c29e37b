use kesoku::tool;

#[derive(serde::Deserialize)]
struct Point {
    x: i32,
    y: i32,
}

/// Sums a point's coordinates.
///
/// # Arguments
/// * `p` - The point.
#[tool(targets(gemini, openai_strict))]
fn sum(p: Point) -> i32 {
    p.x + p.y
}

fn main() {}
