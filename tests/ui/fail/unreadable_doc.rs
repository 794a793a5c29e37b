use kesoku::tool;

#[doc = concat!("Says ", "hello.")]
#[tool]
fn hello() -> String {
    "hello".to_owned()
}

fn main() {}
