use kesoku::{ToolContext, tool};

/// Says which session this is.
#[tool]
fn session(#[arg(default = ToolContext::new("s"))] ctx: ToolContext) -> String {
    ctx.session_id().to_owned()
}

fn main() {}
