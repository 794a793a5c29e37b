use kesoku::tool;

struct Db;

/// Counts rows.
#[tool]
fn count_rows(#[inject] db: Db) -> u64 {
    let _ = db;
    0
}

fn main() {}
