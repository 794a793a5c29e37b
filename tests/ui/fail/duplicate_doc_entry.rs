use kesoku::tool;

/// Reads a file.
///
/// # Arguments
/// * `path` - The file to read.
/// * `limit` - How many bytes to read at most.
/// * `path` - The file, again.
#[tool]
fn read_file(path: String, limit: u32) -> String {
    let _ = limit;
    path
}

fn main() {}
