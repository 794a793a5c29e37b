use kesoku::ToolArg;

#[derive(serde::Deserialize, ToolArg)]
struct Wrapper<T> {
    inner: T,
}

fn main() {}
