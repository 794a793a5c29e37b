#[derive(serde::Deserialize, kesoku::ToolArg)]
#[serde(tag = "kind")]
enum Event {
    Click { x: i32 },
    #[serde(other)]
    Unknown,
}

fn main() {}
