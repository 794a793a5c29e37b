use kesoku::{ToolContext, tool};

/// Says which session this is.
#[tool]
fn session(#[arg(schema = kesoku::Schema::formatted("uuid"))] ctx: ToolContext) -> String {
    ctx.session_id().to_owned()
}

fn main() {}
