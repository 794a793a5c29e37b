use kesoku::tool;

/// Greets someone.
///
/// # Arguments
/// * `name` - Who to greet.
#[tool]
fn greet(name: &str) -> String {
    format!("hello {name}")
}

fn main() {}
