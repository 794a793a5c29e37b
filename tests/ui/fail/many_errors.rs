use kesoku::tool;

/// # Arguments
/// * `path` - The file to read.
/// * `offest` - Where to start.
#[tool]
fn read_file(path: String, offset: u64, limit: u32) -> String {
    let _ = (offset, limit);
    path
}

fn main() {}
