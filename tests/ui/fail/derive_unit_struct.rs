use kesoku::ToolArg;

#[derive(serde::Deserialize, ToolArg)]
struct Nothing;

fn main() {}
