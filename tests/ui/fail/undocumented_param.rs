use kesoku::tool;

/// Reads a file.
///
/// # Arguments
/// * `path` - The file to read.
#[tool]
fn read_file(path: String, limit: u32) -> String {
    let _ = limit;
    path
}

fn main() {}
