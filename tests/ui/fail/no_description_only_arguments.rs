use kesoku::tool;

/// # Arguments
/// * `key` - The key to look up.
#[tool]
fn lookup(key: String) -> String {
    key
}

fn main() {}
