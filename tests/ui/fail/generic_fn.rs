use kesoku::tool;

/// Echoes its argument.
///
/// # Arguments
/// * `x` - The value to echo.
#[tool]
fn echo<T>(x: T) -> T {
    x
}

fn main() {}
