use kesoku::tool;

/// These docs are overridden.
#[tool(description = "  ")]
fn hello() {}

fn main() {}
