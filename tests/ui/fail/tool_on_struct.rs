use kesoku::tool;

/// A point.
#[tool]
struct Point {
    x: i32,
}

fn main() {}
