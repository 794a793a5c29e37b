use kesoku::tool;

/// Greets someone.
///
/// # Arguments
/// * `name` - Who to greet.
#[tool]
fn greet(name: impl Into<String>) -> String {
    format!("hello {}", name.into())
}

fn main() {}
