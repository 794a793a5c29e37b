use kesoku::tool;

#[derive(Debug)]
struct Oops;

/// Parses a number.
///
/// # Arguments
/// * `text` - The text.
#[tool]
fn parse(text: String) -> Result<i64, Oops> {
    text.parse().map_err(|_| Oops)
}

fn main() {}
