use kesoku::tool;

/// Returns pi.
#[tool]
fn f64() -> f64 {
    std::f64::consts::PI
}

fn main() {}
