//! The path of an example that `cargo test` built beside the test binary
//! (test fixtures such as `mcp_test_server` and `agent_worker` are
//! examples).

use std::path::{Path, PathBuf};

/// The example `name`, built beside this test; a clear failure when it
/// is missing (`cargo test --test NAME` alone does not build examples).
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let debug = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = debug
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: `cargo test --workspace --all-features` builds the examples, `cargo test --test NAME` alone does not (run `cargo build --all-features --examples` first)",
        path.display()
    );
    path
}
