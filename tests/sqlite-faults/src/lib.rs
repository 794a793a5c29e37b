//! A VFS for tests that fails one chosen write to a `SQLite` log
//! (`csrc/fault_vfs.c`), to test what [`kesoku_sqlite::SqliteStore`] does
//! when a write fails part way: it is installed as the default VFS, so it
//! sits beneath kesoku-sqlite's log-batching shim (which wraps the default
//! VFS when first used) and beneath every connection that does not use the
//! shim.
//!
//! The writes are counted and failed process-wide: a test that arms a
//! fault holds the [`Faults`] guard while it does.

use std::sync::{Mutex, MutexGuard};

/// How the armed write fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Half the bytes are written, then `SQLITE_FULL`: the disk filled
    /// during the write.
    Half,
    /// Nothing is written, and `SQLITE_IOERR_WRITE`.
    Nothing,
}

/// The fault VFS, held by one test at a time.
#[derive(Debug)]
pub struct Faults {
    _held: MutexGuard<'static, ()>,
}

impl Faults {
    /// Installs the fault VFS as the default (once per process; before any
    /// `SqliteStore` is opened, so that the shim wraps it) and takes it for
    /// this test, unarmed.
    ///
    /// # Panics
    /// If `SQLite` refuses the VFS.
    pub fn take() -> Self {
        static HELD: Mutex<()> = Mutex::new(());
        let held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert_eq!(
            ffi::kesoku_fault_vfs_install(),
            0,
            "the fault VFS could not be installed"
        );
        ffi::kesoku_fault_vfs_arm(0, 0);
        Self { _held: held }
    }

    /// Counts log writes from now, and fails the `nth` (1 is the next
    /// one; 0 fails none).
    pub fn arm(&self, nth: u32, failure: Failure) {
        let nth = std::ffi::c_int::try_from(nth).expect("a write count fits a C int");
        ffi::kesoku_fault_vfs_arm(nth, std::ffi::c_int::from(failure == Failure::Half));
    }

    /// The log writes since the last [`arm`](Self::arm).
    pub fn writes(&self) -> u32 {
        u32::try_from(ffi::kesoku_fault_vfs_writes()).unwrap_or(0)
    }

    /// Whether the armed write has failed.
    pub fn fired(&self) -> bool {
        ffi::kesoku_fault_vfs_fired() != 0
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        ffi::kesoku_fault_vfs_arm(0, 0);
    }
}

// The one exception to the workspace's `unsafe_code` lint in this crate:
// declaring the fault VFS's C functions.
#[allow(unsafe_code)]
mod ffi {
    use std::ffi::c_int;

    // SAFETY: each takes plain integers and may be called from any thread
    // at any time after `kesoku_fault_vfs_install`, which itself may be
    // called any number of times (it installs once, under an `SQLite`
    // mutex); the others read and write integers under that mutex.
    unsafe extern "C" {
        pub(super) safe fn kesoku_fault_vfs_install() -> c_int;
        pub(super) safe fn kesoku_fault_vfs_arm(nth: c_int, half: c_int);
        pub(super) safe fn kesoku_fault_vfs_writes() -> c_int;
        pub(super) safe fn kesoku_fault_vfs_fired() -> c_int;
    }
}
