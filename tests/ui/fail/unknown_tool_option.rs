use kesoku::tool;

/// Says hello.
#[tool(descripton = "Says hello.")]
fn hello() -> String {
    "hello".to_owned()
}

fn main() {}
