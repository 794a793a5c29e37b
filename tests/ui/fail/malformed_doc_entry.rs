use kesoku::tool;

/// Reads a file.
///
/// # Arguments
/// * `path` - The file to read.
/// * 123 - A number.
#[tool]
fn read_file(path: String) -> String {
    path
}

fn main() {}
