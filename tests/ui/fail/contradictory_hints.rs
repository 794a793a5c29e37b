use kesoku::tool;

/// Reads the log.
#[tool(read_only, destructive, title = " ")]
fn read_log() -> String {
    String::new()
}

fn main() {}
