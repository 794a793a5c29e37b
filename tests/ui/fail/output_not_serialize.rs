use kesoku::tool;

struct Report;

/// Counts lines.
///
/// # Arguments
/// * `text` - The text.
#[tool]
fn count(text: String) -> Report {
    let _ = text;
    Report
}

fn main() {}
