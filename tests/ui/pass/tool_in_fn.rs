//! A tool defined inside a function body.

use kesoku::tool;

fn main() {
    /// Doubles a number.
    ///
    /// # Arguments
    /// * `n` - The number to double.
    #[tool]
    fn double(n: i32) -> i32 {
        n * 2
    }

    assert_eq!(double::SCHEMA.description, "Doubles a number.");
    assert_eq!(double(21), 42);
    let tool = kesoku::default_registry().get("double").unwrap();
    assert_eq!(tool.description(), "Doubles a number.");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let out = rt.block_on(tool.call(serde_json::json!({"n": "4"}), &kesoku::ToolContext::new("s")));
    assert_eq!(out.unwrap().text(), "8");
}
