use kesoku::tool;

/// Reads a file.
///
/// # Arguments
/// * `path` - The file to read.
/// * `limt` - How many bytes to read at most.
#[tool]
fn read_file(path: String, limit: u32) -> String {
    let _ = limit;
    path
}

fn main() {}
