//! After a `#[tool]` or `#[derive(ToolArg)]` error, the uses of what they
//! would have generated are not errors too: the macros' errors are the
//! only ones.
use kesoku::{ToolArg, ToolRegistry, tool};

#[derive(serde::Deserialize, ToolArg)]
struct Unit;

// No description: the one error of this tool.
#[tool(allow_undocumented_args)]
fn broken(x: u8) -> u8 {
    x
}

/// Takes a type whose derive failed.
///
/// # Arguments
/// * `u` - A unit.
#[tool]
fn takes_unit(u: Unit) {
    let _ = u;
}

fn main() {
    let mut registry = ToolRegistry::new();
    registry.register(broken::TOOL).unwrap();
    let _: &'static kesoku::ToolSchema = broken::SCHEMA;
    let _ = broken::SCHEMA.parameters_json();
    let _ = <Unit as ToolArg>::SCHEMA;
    let _ = takes_unit::SCHEMA.name;
}
