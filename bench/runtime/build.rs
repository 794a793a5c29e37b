//! Generates the 1,000 tools of the registry benchmark into `OUT_DIR`, so
//! the repository does not carry 1,000 hand-written functions.
use std::fmt::Write as _;

fn main() {
    let mut src = String::new();
    for i in 0..1000 {
        let _ = write!(
            src,
            r#"
/// Tool number {i}: combines its inputs.
///
/// # Arguments
/// * `a` - The first operand.
/// * `b` - The second operand.
/// * `label` - A label.
/// * `tags` - Optional tags.
#[kesoku::tool]
pub fn generated_{i}(a: i64, b: u32, label: String, tags: Option<Vec<String>>) -> String {{
    format!("{{label}} {{}} {{}}", a + i64::from(b), tags.map_or(0, |t| t.len()))
}}
"#
        );
    }
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(format!("{out}/tools.rs"), src).expect("OUT_DIR is writable");
    println!("cargo::rerun-if-changed=build.rs");
}
