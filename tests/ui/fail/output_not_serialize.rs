use kesoku::tool;

struct Report {
    lines: u32,
}

/// Counts lines.
///
/// # Arguments
/// * `text` - The text.
#[tool]
fn count(text: String) -> Report {
    Report { lines: text.lines().count() as u32 }
}

fn main() {}
