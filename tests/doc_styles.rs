//! Every rustdoc style `#[tool]` reads, seen through the registry.

use kesoku::tool;
use serde_json::Value;

fn arg_docs(schema: &kesoku::ToolSchema) -> Vec<(String, String)> {
    let p = schema.parameters_json();
    p["properties"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Star, backticks, dash.
///
/// # Arguments
/// * `a` - First.
/// * `b` - Second, which goes on
///   over two lines.
#[tool]
fn star_backtick_dash(a: u8, b: u8) {
    let _ = (a, b);
}

/// Dash, backticks, colon.
///
/// # Args
/// - `a`: First.
/// - `b`: Second.
#[tool]
fn dash_backtick_colon(a: u8, b: u8) {
    let _ = (a, b);
}

/// Bare names.
///
/// ## Parameters
/// * a - First.
/// * b: Second.
#[tool]
fn bare_names(a: u8, b: u8) {
    let _ = (a, b);
}

/// Em dash and a type note.
///
/// # Arguments:
/// * `a` — First.
/// * `b` (u8) - Second.
#[tool]
fn em_dash(a: u8, b: u8) {
    let _ = (a, b);
}

/// Backticks and no separator.
///
/// # Arguments
/// * `a` First.
/// * `b` (u8) Second.
#[tool]
fn backtick_no_separator(a: u8, b: u8) {
    let _ = (a, b);
}

#[doc = "Written with doc attributes."]
#[doc = ""]
#[doc = "# Arguments"]
#[doc = "* `a` - First."]
#[tool]
fn doc_attributes(a: u8) {
    let _ = a;
}

/**
 Block comment.

 # Arguments
 * `a` - First.
*/
#[tool]
fn block_comment(a: u8) {
    let _ = a;
}

/**
 * Starred block comment.
 *
 * # Arguments
 * * `a` - First.
 */
#[tool]
fn starred_block(a: u8) {
    let _ = a;
}

/// Finds [`Value`]s in a haystack, see [the guide](crate::guide).
///
/// It scans the haystack
/// line by line.
///
/// - fast
/// - exact
///
/// # Arguments
/// * `needle` - What to find, such as `"x"`.
///
/// # Returns
/// The number of matches.
///
/// # Examples
/// ```
/// # use something;
/// assert_eq!(find("a"), 1);
/// ```
///
/// # Errors
/// Never.
///
/// # Panics
/// Never.
#[tool]
#[allow(clippy::unnecessary_wraps)] // a `Result` tool, for the `# Errors` section
fn find(needle: String) -> Result<usize, String> {
    Ok(needle.len())
}

#[test]
fn list_styles() {
    let want = |b: &str| {
        vec![
            ("a".to_owned(), "First.".to_owned()),
            ("b".to_owned(), b.to_owned()),
        ]
    };
    assert_eq!(
        arg_docs(star_backtick_dash::SCHEMA),
        want("Second, which goes on over two lines.")
    );
    assert_eq!(arg_docs(dash_backtick_colon::SCHEMA), want("Second."));
    assert_eq!(arg_docs(bare_names::SCHEMA), want("Second."));
    assert_eq!(arg_docs(em_dash::SCHEMA), want("Second."));
    assert_eq!(em_dash::SCHEMA.description, "Em dash and a type note.");
    assert_eq!(arg_docs(backtick_no_separator::SCHEMA), want("Second."));
}

#[test]
fn doc_attributes_and_block_comments() {
    assert_eq!(
        doc_attributes::SCHEMA.description,
        "Written with doc attributes."
    );
    assert_eq!(
        arg_docs(doc_attributes::SCHEMA),
        [("a".to_owned(), "First.".to_owned())]
    );
    assert_eq!(block_comment::SCHEMA.description, "Block comment.");
    assert_eq!(
        arg_docs(block_comment::SCHEMA),
        [("a".to_owned(), "First.".to_owned())]
    );
    assert_eq!(starred_block::SCHEMA.description, "Starred block comment.");
    assert_eq!(
        arg_docs(starred_block::SCHEMA),
        [("a".to_owned(), "First.".to_owned())]
    );
}

#[test]
fn description_keeps_paragraphs_and_drops_rustdoc_sections() {
    assert_eq!(
        find::SCHEMA.description,
        "Finds `Value`s in a haystack, see the guide.\n\nIt scans the haystack line by line.\n\n- fast\n- exact"
    );
    assert_eq!(find::SCHEMA.returns, Some("The number of matches."));
    assert_eq!(
        arg_docs(find::SCHEMA),
        [(
            "needle".to_owned(),
            "What to find, such as `\"x\"`.".to_owned()
        )]
    );
    let tool = kesoku::default_registry().get("find").unwrap();
    assert_eq!(tool.description(), find::SCHEMA.description);
    assert!(!tool.description().contains("Never"));
    assert!(!tool.description().contains("assert_eq"));
    let _ = Value::Null;
}
