//! Compile-time checks of `#[tool]` and `#[derive(ToolArg)]`: every error has a snapshot.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
