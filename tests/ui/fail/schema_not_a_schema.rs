use kesoku::tool;

/// Finds a user.
///
/// # Arguments
/// * `id` - The user's id.
#[tool]
fn find_user(#[arg(schema = "uuid")] id: String) -> String {
    id
}

fn main() {}
