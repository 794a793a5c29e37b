use kesoku::tool;

#[tool]
fn lookup() -> i32 {
    1
}

fn main() {}
