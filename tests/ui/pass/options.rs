//! The `#[tool(...)]` options.

use kesoku::tool;
use serde_json::json;

/// These docs are not the description.
///
/// # Arguments
/// * `x` - Some number.
#[tool(description = "The explicit description.")]
fn described(x: i32) -> i32 {
    x
}

/// Renamed.
#[tool(name = "renamed-tool_1")]
fn original_name() {}

/// Takes an undocumented argument.
#[tool(allow_undocumented_args)]
fn undocumented(x: i32, y: i32) -> i32 {
    x + y
}

/// Strict about types.
///
/// # Arguments
/// * `n` - A number.
#[tool(coerce = false)]
fn strict(n: u8) -> u8 {
    n
}

/// Names the crate explicitly.
///
/// # Arguments
/// * `n` - A number.
#[tool(crate = ::kesoku, name = "with_crate", coerce = true)]
fn explicit_crate(n: u8) -> u8 {
    n
}

/// Has a default.
///
/// # Arguments
/// * `times` - How often.
#[tool]
fn with_default(#[arg(default = 3)] times: u32) -> u32 {
    times
}

/// Looks something up.
#[tool(title = "Look up", read_only, idempotent, open_world = false)]
fn look_up() -> Result<Found, std::io::Error> {
    Ok(Found { hits: 1 })
}

/// What `look_up` finds.
#[derive(serde::Serialize, serde::Deserialize, kesoku::ToolArg)]
struct Found {
    /// How many.
    hits: u32,
}

/// Deletes everything.
#[tool(destructive)]
fn wipe() -> kesoku::ToolResult {
    Ok(kesoku::ToolOutput::new(json!(null)))
}

fn main() {
    let schema = look_up::SCHEMA;
    assert_eq!(schema.title, Some("Look up"));
    let hints = kesoku::ToolHints::new()
        .with_read_only(true)
        .with_idempotent(true)
        .with_open_world(false);
    assert_eq!(schema.hints, hints);
    let output = (schema.output)().expect("`Found` has a schema").to_json();
    assert_eq!(output["type"], json!("object"));
    assert_eq!(output["properties"]["hits"]["type"], json!("integer"));
    assert_eq!(wipe::SCHEMA.hints, kesoku::ToolHints::new().with_destructive(true));
    assert!((wipe::SCHEMA.output)().is_none());
    assert!(wipe::SCHEMA.title.is_none());
    // Scalars have nothing an output schema is for.
    assert!((described::SCHEMA.output)().is_none());
    assert!((original_name::SCHEMA.output)().is_none());
    assert!(look_up().is_ok());
    assert!(wipe().is_ok());

    assert_eq!(described::SCHEMA.description, "The explicit description.");
    assert_eq!(
        described::SCHEMA.parameters_json()["properties"]["x"]["description"],
        json!("Some number.")
    );

    assert_eq!(original_name::SCHEMA.name, "renamed-tool_1");
    let registry = kesoku::default_registry();
    assert!(registry.get("renamed-tool_1").is_some());
    assert!(registry.get("original_name").is_none());

    let params = undocumented::SCHEMA.parameters_json();
    assert_eq!(params["required"], json!(["x", "y"]));
    assert!(params["properties"]["x"].get("description").is_none());

    assert!(!strict::SCHEMA.coerce);
    assert!(described::SCHEMA.coerce);

    assert_eq!(explicit_crate::SCHEMA.name, "with_crate");
    assert!(explicit_crate::SCHEMA.coerce);
    assert!(registry.get("with_crate").is_some());

    let params = with_default::SCHEMA.parameters_json();
    assert_eq!(params["properties"]["times"]["default"], json!(3));
    assert_eq!(params["required"], json!([]));

    assert_eq!(described(1) + undocumented(1, 2) + u32::from(strict(4) + explicit_crate(5)) as i32, 13);
    assert_eq!(with_default(2), 2);
    original_name();
}
