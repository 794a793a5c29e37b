use kesoku::tool;

/// Waits.
#[tool(timeout = "soon")]
fn wait_a() {}

/// Waits less.
#[tool(timeout = "0s")]
fn wait_b() {}

fn main() {}
