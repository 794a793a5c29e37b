//! The global registry (tools from this crate, its modules and a library
//! dependency) and explicit registries.

// Naming the library keeps the linker from dropping it (docs/registries.md).
use kesoku_test_lib as _;

use kesoku::{DynamicTool, RegistryError, ToolContext, ToolOutput, ToolRegistry, tool};
use serde_json::json;

/// Echoes text.
///
/// # Arguments
/// * `text` - What to echo.
#[tool]
fn echo(text: String) -> String {
    text
}

mod inner {
    /// Lives in a module.
    #[kesoku::tool(name = "inner-tool")]
    pub(crate) fn inner_tool() -> u8 {
        7
    }
}

#[test]
fn default_registry_has_tools_from_everywhere_in_name_order() {
    let registry = kesoku::default_registry();
    let names: Vec<&str> = registry.names().collect();
    assert_eq!(
        names,
        [
            "convert_length",
            "echo",
            "inner-tool",
            "private_ping",
            "shout",
            "switched_on"
        ],
        "tools from this test crate, its module and kesoku-test-lib"
    );
    assert_eq!(registry.len(), kesoku_test_lib::TOOL_NAMES.len() + 3);
    // The same &'static registry every time.
    assert!(std::ptr::eq(registry, kesoku::default_registry()));
}

#[test]
fn tool_metadata() {
    let tool = kesoku::default_registry().get("convert_length").unwrap();
    assert_eq!(tool.description(), "Converts a length.");
    assert_eq!(tool.returns(), Some("The converted length."));
    assert!(tool.is_async());
    let loc = tool.location().unwrap();
    assert!(loc.file.ends_with("tool-lib/src/lib.rs"), "{loc}");
    assert_eq!(loc.module_path, "kesoku_test_lib::nested");
    assert!(loc.line > 30, "{loc}");
    assert_eq!(
        tool.parameters()["properties"]["to"],
        json!({"type": "string", "enum": ["meters", "feet"], "description": "The unit to convert to."})
    );
    let echo = kesoku::default_registry().get("echo").unwrap();
    assert_eq!(echo.location().unwrap().line, 15);
    assert_eq!(echo.location().unwrap().file, "tests/registry.rs");
}

#[test]
fn rendered_parameters_are_cached() {
    let tool = kesoku::default_registry().get("echo").unwrap();
    assert!(std::ptr::eq(tool.parameters_ref(), tool.parameters_ref()));
    // The cache is per tool definition, shared by every registry.
    let mut explicit = ToolRegistry::new();
    let again = explicit.register(echo::TOOL).unwrap();
    assert!(std::ptr::eq(tool.parameters_ref(), again.parameters_ref()));
}

#[tokio::test]
async fn tools_from_the_library_run() {
    let tool = kesoku::default_registry().get("convert_length").unwrap();
    let out = tool
        .call(json!({"value": 10, "to": "meters"}), &ToolContext::new("s"))
        .await;
    assert!((out.unwrap().value.as_f64().unwrap() - 3.048).abs() < 1e-9);
    let e = tool
        .call(json!({"value": 1, "to": "meter"}), &ToolContext::new("s"))
        .await;
    assert!(
        e.unwrap_err()
            .to_string()
            .contains("did you mean `meters`?")
    );
}

#[test]
fn explicit_registry_rejects_duplicates_naming_both() {
    let mut registry = ToolRegistry::new();
    registry.register(echo::TOOL).unwrap();
    registry.register(inner::inner_tool::TOOL).unwrap();
    let err = registry.register(echo::TOOL).unwrap_err();
    let RegistryError::Duplicate {
        name,
        first,
        second,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(name, "echo");
    assert_eq!(first.unwrap().line, 15);
    assert_eq!(second.unwrap().line, 15);
    assert!(
        err.to_string()
            .starts_with("two tools are named `echo`: one defined at tests/registry.rs:15"),
        "{err}"
    );

    let dynamic = DynamicTool::new(
        "echo",
        "Another echo.",
        json!({"type": "object"}),
        |_, _| async { Ok(ToolOutput::new(json!(null))) },
    )
    .unwrap();
    let err = registry.register(dynamic).unwrap_err().to_string();
    assert!(
        err.contains("the other at run time (a dynamic tool)"),
        "{err}"
    );
    assert_eq!(registry.names().collect::<Vec<_>>(), ["echo", "inner-tool"]);
}

#[tokio::test]
async fn dynamic_tools_register_and_run() {
    let mut registry = ToolRegistry::new();
    let tool = DynamicTool::new(
        "weather",
        "Reports the weather.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |args, ctx| async move {
            Ok(ToolOutput::new(json!(format!(
                "sunny in {} for {}",
                args["city"].as_str().unwrap_or("?"),
                ctx.session_id()
            ))))
        },
    )
    .unwrap()
    .with_returns("A forecast.");
    registry.register(tool).unwrap();
    registry.register(echo::TOOL).unwrap();
    assert_eq!(registry.names().collect::<Vec<_>>(), ["echo", "weather"]);

    let weather = registry.get("weather").unwrap();
    assert_eq!(weather.returns(), Some("A forecast."));
    assert!(weather.location().is_none());
    assert_eq!(
        weather.parameters()["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let out = weather
        .call(json!({"city": "Oslo"}), &ToolContext::new("s9"))
        .await
        .unwrap();
    assert_eq!(out.text(), "sunny in Oslo for s9");
    let e = weather
        .call(json!({}), &ToolContext::new("s9"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid arguments for tool `weather`: argument `city` is required"
    );
}

#[test]
fn dynamic_tools_are_checked() {
    let ok = |_: serde_json::Value, _: ToolContext| async { Ok(ToolOutput::new(json!(null))) };
    let err = DynamicTool::new("bad name", "d", json!({"type": "object"}), ok).unwrap_err();
    assert!(matches!(err, RegistryError::BadName { .. }), "{err}");
    let err = DynamicTool::new("t", "d", json!({"type": "string"}), ok).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid schema for tool `t`: the arguments schema must have `\"type\": \"object\"`"
    );
    let err = DynamicTool::new("t", "d", json!([1]), ok).unwrap_err();
    assert!(
        err.to_string()
            .contains("must be a JSON object, got an array"),
        "{err}"
    );
}

/// Never compiled: its generated items go with it.
#[cfg(any())]
#[tool]
fn switched_off(x: NoSuchType) -> u8 {
    x.0
}

/// Compiled in tests.
#[cfg(test)]
#[tool]
fn switched_on() -> u8 {
    1
}

#[test]
fn cfg_attributes_apply_to_the_whole_tool() {
    let registry = kesoku::default_registry();
    assert!(registry.get("switched_off").is_none());
    assert_eq!(switched_on::SCHEMA.name, "switched_on");
}
