use kesoku::tool;

/// Says hello.
#[tool(name = "a_tool_name_that_is_far_too_long_for_any_provider_to_accept_it_at_all")]
fn hello() -> String {
    "hello".to_owned()
}

fn main() {}
