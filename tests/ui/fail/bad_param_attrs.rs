use kesoku::{ToolContext, tool};

/// Repeats a word.
///
/// # Arguments
/// * `times` - How often.
#[tool]
fn repeat(#[inject(ctx)] ctx: ToolContext, #[arg(default, default = 2)] times: usize) -> String {
    ctx.session_id().repeat(times)
}

fn main() {}
