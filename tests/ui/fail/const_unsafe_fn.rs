use kesoku::tool;

/// Does nothing, unsafely.
#[tool]
const unsafe fn nothing() {}

fn main() {}
