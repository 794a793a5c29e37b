use kesoku::tool;

/// A query, with optional paging flattened in.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Query {
    /// What to find.
    text: String,
    /// Paging, when given.
    #[serde(flatten)]
    paging: Option<Paging>,
}

/// Which page.
#[derive(serde::Deserialize, kesoku::ToolArg)]
struct Paging {
    /// The page.
    page: u32,
}

/// Finds things.
///
/// # Arguments
/// * `query` - The query.
#[tool(targets(openai_strict))]
fn find(query: Query) -> String {
    query.text
}

fn main() {}
