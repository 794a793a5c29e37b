//! The kesoku demo: defines a few tools, prints the schemas the registry
//! would send to a model, and runs calls through the typed invoker, good
//! and bad, the way a model's tool calls would arrive. Offline: no model
//! is called.
//!
//! Run it with `cargo run --example demo`.

// Some tools are async only to exercise the async path.
#![allow(clippy::unused_async)]

use kesoku::{State, ToolArg, ToolContext, tool};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
async fn calculate_sum(a: i64, b: i64) -> i64 {
    a + b
}

/// A temperature unit.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToolArg)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// A reading to convert.
#[derive(Debug, Deserialize, ToolArg)]
struct Reading {
    /// The value.
    value: f64,
    /// Its unit.
    unit: Unit,
}

/// Converts temperature readings to another unit.
///
/// # Arguments
/// * `readings` - The readings to convert.
/// * `to` - The unit to convert to.
/// * `precision` - Decimal places to round to.
///
/// # Returns
/// The converted values, in order.
#[tool]
fn convert_temperatures(
    readings: Vec<Reading>,
    to: Unit,
    #[arg(default = 1)] precision: u8,
) -> Result<Vec<f64>, String> {
    let scale = 10f64.powi(i32::from(precision));
    readings
        .iter()
        .map(|r| {
            let v = match (r.unit, to) {
                (Unit::Celsius, Unit::Fahrenheit) => r.value * 9.0 / 5.0 + 32.0,
                (Unit::Fahrenheit, Unit::Celsius) => (r.value - 32.0) * 5.0 / 9.0,
                _ => r.value,
            };
            if v.is_finite() {
                Ok((v * scale).round() / scale)
            } else {
                Err(format!("{} is not a finite temperature", r.value))
            }
        })
        .collect()
}

/// Where notes are kept for this demo.
struct Notebook(std::sync::Mutex<Vec<String>>);

/// Saves a note for the current session.
///
/// # Arguments
/// * `text` - The note.
#[tool]
async fn save_note(text: String, context: &ToolContext, notebook: State<Notebook>) -> String {
    let Notebook(notes) = &*notebook;
    let mut notes = notes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    notes.push(text);
    format!(
        "saved note {} for session {}",
        notes.len(),
        context.session_id()
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = kesoku::default_registry();
    println!("== {} tools in the default registry ==\n", registry.len());
    for tool in registry {
        println!(
            "{} ({})",
            tool.name(),
            tool.location()
                .map_or_else(String::new, ToString::to_string)
        );
        println!(
            "  description: {}",
            tool.description().replace('\n', "\n               ")
        );
        if let Some(r) = tool.returns() {
            println!("  returns: {r}");
        }
        let schema = serde_json::to_string_pretty(tool.parameters_ref()).unwrap_or_default();
        println!("  parameters: {}\n", schema.replace('\n', "\n  "));
    }

    let ctx = ToolContext::new("demo-session")
        .with_original_msg_id("msg-1")
        .with_state(Notebook(std::sync::Mutex::new(Vec::new())));
    let calls = [
        ("calculate_sum", json!({"a": 2, "b": 40})),
        ("calculate_sum", json!({"a": "2", "b": "40"})),
        ("calculate_sum", json!({"a": 2})),
        ("calculate_sum", json!({"a": 2, "b": 3, "c": 4})),
        (
            "convert_temperatures",
            json!({"readings": [{"value": 100, "unit": "celsius"}, {"value": 0, "unit": "fahrenheit"}], "to": "fahrenheit"}),
        ),
        (
            "convert_temperatures",
            json!({"readings": [{"value": 100, "unit": "kelvin"}], "to": "celsius", "precision": 300}),
        ),
        ("save_note", json!({"text": "buy milk"})),
    ];
    println!("== calls, as a model would send them ==\n");
    for (name, args) in calls {
        let Some(tool) = registry.get(name) else {
            println!("{name}: no such tool");
            continue;
        };
        println!("{name}({args})");
        match tool.call(args, &ctx).await {
            Ok(out) => println!("  -> {}\n", out.text()),
            Err(e) => println!("  -> error: {}\n", e.to_string().replace('\n', "\n     ")),
        }
    }
}
