use kesoku::tool;

#[derive(serde::Deserialize)]
struct Point {
    x: i32,
    y: i32,
}

/// Sums a point's coordinates.
///
/// # Arguments
/// * `label` - A label.
/// * `p` - The point.
#[tool]
fn sum(label: String, p: Point) -> i32 {
    let _ = label;
    p.x + p.y
}

fn main() {}
