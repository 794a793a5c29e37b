//! Two `#[tool]`s with one name: the default registry reports both.

mod a {
    /// First.
    #[kesoku::tool(name = "clash")]
    pub(crate) fn first() {}
}

mod b {
    /// Second.
    #[kesoku::tool(name = "clash")]
    pub(crate) fn second() {}
}

#[test]
fn try_default_registry_names_both_definitions() {
    let err = kesoku::try_default_registry().unwrap_err().to_string();
    assert!(
        err.starts_with("two tools are named `clash`: one defined at tests/duplicate.rs:"),
        "{err}"
    );
    assert!(err.contains("tests/duplicate.rs:6 (duplicate::a)"), "{err}");
    assert!(
        err.contains("tests/duplicate.rs:12 (duplicate::b)"),
        "{err}"
    );
    assert!(
        err.contains("rename one with #[tool(name = \"...\")]"),
        "{err}"
    );
}

#[test]
fn default_registry_panics_with_the_same_message() {
    let panic = std::panic::catch_unwind(kesoku::default_registry).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(
        msg.starts_with("kesoku: two tools are named `clash`"),
        "{msg}"
    );
}
