//! A crate that denies warnings: the expansion must not trigger any.
#![deny(warnings, missing_docs, clippy::pedantic)]

/// Public tools.
pub mod tools {
    use kesoku::{ToolContext, tool};

    /// Adds two integers.
    ///
    /// # Arguments
    /// * `a` - The first integer.
    /// * `b` - The second integer, defaulting to one.
    #[tool]
    pub async fn add(a: i64, #[arg(default = 1)] b: i64) -> i64 {
        a + b
    }

    /// Says which session this is.
    ///
    /// # Arguments
    /// * `prefix` - Put before the session id.
    #[tool]
    pub fn session(ctx: &ToolContext, prefix: Option<String>) -> Result<String, std::fmt::Error> {
        Ok(prefix.unwrap_or_default() + ctx.session_id())
    }

    /// Does nothing.
    #[tool]
    pub(crate) fn nothing() {}

    /// A raw identifier as a name and a parameter.
    ///
    /// # Arguments
    /// * `type` - A kind.
    #[tool]
    pub fn r#match(r#type: String) -> String {
        r#type
    }
}

fn main() {
    assert_eq!(tools::add::SCHEMA.name, "add");
    assert_eq!(tools::session::SCHEMA.name, "session");
    assert_eq!(tools::nothing::SCHEMA.name, "nothing");
    assert_eq!(tools::r#match::SCHEMA.name, "match");
    let registry = kesoku::default_registry();
    for name in ["add", "session", "nothing", "match"] {
        assert!(registry.get(name).is_some(), "{name}");
    }
    tools::nothing();
    assert_eq!(tools::r#match("x".to_owned()), "x");
    let ctx = kesoku::ToolContext::new("s");
    assert_eq!(tools::session(&ctx, None), Ok("s".to_owned()));
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(rt.block_on(tools::add(1, 2)), 3);
}
