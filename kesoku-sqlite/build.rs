//! Compiles the log-batching VFS shim (`csrc/batch_vfs.c`) against the
//! `SQLite` that rusqlite links. Without that `SQLite`'s header (a build on
//! a system `SQLite` that does not say where it is), the shim is left out
//! and every connection uses the default VFS.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kesoku_batch_vfs)");
    println!("cargo::rerun-if-changed=csrc/batch_vfs.c");
    let Ok(include) = std::env::var("DEP_SQLITE3_INCLUDE") else {
        return;
    };
    cc::Build::new()
        .file("csrc/batch_vfs.c")
        .include(include)
        .warnings(true)
        .compile("kesoku_batch_vfs");
    println!("cargo::rustc-cfg=kesoku_batch_vfs");
}
