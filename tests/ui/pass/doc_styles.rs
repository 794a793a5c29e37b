//! Every supported list style of the arguments section, in two tools.

use kesoku::tool;
use serde_json::json;

/// Formats five values.
///
/// Longer explanation that
/// wraps onto a second line.
///
/// # Args
/// * `a` - Backticks and a hyphen.
/// - `b`: Backticks and a colon.
/// * c - A bare name and a hyphen,
///   continued on the next line.
/// * `d` — An em dash.
/// * e: A bare name and a colon.
/// * `f` Backticks and no separator.
///
/// # Returns
/// The values joined.
#[tool]
fn five(a: i32, b: String, c: bool, d: f64, e: Vec<u8>, f: char) -> String {
    format!("{a} {b} {c} {d} {e:?} {f}")
}

/// Adds two numbers.
///
/// ## Parameters
/// * `x` - The first number.
/// * `y` - The second number,
/// lazily continued without indentation.
#[tool]
fn add(x: i64, y: i64) -> i64 {
    x + y
}

fn main() {
    assert_eq!(
        five::SCHEMA.description,
        "Formats five values.\n\nLonger explanation that wraps onto a second line."
    );
    assert_eq!(five::SCHEMA.returns, Some("The values joined."));
    let props = five::SCHEMA.parameters_json()["properties"].clone();
    let desc = |k: &str| props[k]["description"].clone();
    assert_eq!(desc("a"), json!("Backticks and a hyphen."));
    assert_eq!(desc("b"), json!("Backticks and a colon."));
    assert_eq!(desc("c"), json!("A bare name and a hyphen, continued on the next line."));
    assert_eq!(desc("d"), json!("An em dash."));
    assert_eq!(desc("e"), json!("A bare name and a colon."));
    assert_eq!(desc("f"), json!("Backticks and no separator."));

    let props = add::SCHEMA.parameters_json()["properties"].clone();
    assert_eq!(props["x"]["description"], json!("The first number."));
    assert_eq!(
        props["y"]["description"],
        json!("The second number, lazily continued without indentation.")
    );
    assert_eq!(add(2, 3), 5);
    assert_eq!(five(1, "b".into(), true, 0.5, vec![1], 'f'), "1 b true 0.5 [1] f");
}
