use kesoku::tool;

/// Says hello.
#[tool(coerce = "yes", name = 5)]
fn hello() {}

fn main() {}
