//! Compiles the fault VFS (`csrc/fault_vfs.c`) against the `SQLite` that
//! rusqlite links, as kesoku-sqlite compiles its shim.

fn main() {
    println!("cargo::rerun-if-changed=csrc/fault_vfs.c");
    let include = std::env::var("DEP_SQLITE3_INCLUDE")
        .expect("libsqlite3-sys says where its sqlite3.h is (the bundled SQLite)");
    cc::Build::new()
        .file("csrc/fault_vfs.c")
        .include(include)
        .warnings(true)
        .compile("kesoku_fault_vfs");
}
