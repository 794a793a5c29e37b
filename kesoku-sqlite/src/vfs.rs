//! The VFS shim that writes each commit's log frames in one write call
//! (`csrc/batch_vfs.c`, compiled by the build script).
//!
//! `SQLite` writes a frame of its log as two writes, its header then its
//! page, so a commit of N pages costs 2N write calls; on a virtual
//! machine each costs about 2 µs, more than `SQLite`'s own work for a
//! small commit. The shim wraps the default VFS and gathers the frames
//! `SQLite` appends to a log, writing them in one call when the commit
//! frame is whole, inside `SQLite`'s write of its last page: so before
//! `SQLite` publishes the frames to other connections, and a failure is
//! that write's. Every other write passes through, after what is held,
//! as does every other file; the bytes in the file are the same. A
//! failed gathered write fails the whole transaction. Only the writer
//! opens through the shim. `csrc/batch_vfs.c` says exactly when it
//! writes; `tests/sqlite-faults` (at the workspace's root) fails each of
//! the log writes of a run of inserts in turn beneath it.

/// The shim's name once it is registered, to open a connection through
/// ([`rusqlite::Connection::open_with_flags_and_vfs`]); `None` where it
/// could not be, and the connection uses the default VFS.
#[cfg(kesoku_batch_vfs)]
pub(crate) fn batch() -> Option<&'static str> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| ffi::kesoku_batch_vfs_register() == 0)
        .then_some("kesoku-batch")
}

/// Built without the shim (no `sqlite3.h` to compile it against).
#[cfg(not(kesoku_batch_vfs))]
pub(crate) fn batch() -> Option<&'static str> {
    None
}

#[cfg(kesoku_batch_vfs)]
#[allow(unsafe_code)]
mod ffi {
    // SAFETY: the function takes nothing and may be called from any
    // thread, any number of times: it registers the shim once, under an
    // `SQLite` mutex, and returns that first outcome after.
    unsafe extern "C" {
        pub(super) safe fn kesoku_batch_vfs_register() -> std::ffi::c_int;
    }
}
