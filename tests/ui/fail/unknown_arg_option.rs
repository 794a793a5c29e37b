use kesoku::tool;

/// Repeats a word.
///
/// # Arguments
/// * `word` - The word.
/// * `times` - How often.
#[tool]
fn repeat(word: String, #[arg(defualt = 2)] times: usize) -> String {
    word.repeat(times)
}

fn main() {}
