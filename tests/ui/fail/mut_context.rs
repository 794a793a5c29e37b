use kesoku::{ToolContext, tool};

/// Says which session this is.
#[tool]
fn session(ctx: &mut ToolContext) -> String {
    ctx.session_id().to_owned()
}

fn main() {}
