//! Opening a connection: the file, the pragmas, and the migrations.

use std::path::Path;

use std::cell::Cell;
use std::ffi::c_int;

use rusqlite::hooks::Wal;
use rusqlite::{Connection, OpenFlags};

use crate::options::SqliteOptions;
use crate::schema;

/// The connection that writes: creates the file if missing, turns on WAL,
/// and brings the schema to the latest version.
pub(crate) fn writer(path: &Path, options: &SqliteOptions) -> Result<Connection, String> {
    let mut conn = Connection::open(path).map_err(|e| e.to_string())?;
    configure(&conn, options).map_err(|e| e.to_string())?;
    // WAL lets readers run beside the writer, and makes a commit one
    // append to the log: with `synchronous=NORMAL` a crash of the process
    // loses nothing committed (a power cut may lose the last commits,
    // never the file's integrity).
    // Switching to WAL takes the file for a moment; another opener holding
    // it makes SQLite answer "locked" at once, without waiting.
    let mut attempt = 0;
    let mode: String = loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Ok(mode) => break mode,
            Err(e) if is_busy(&e) && attempt < RETRIES => {
                attempt += 1;
                back_off(attempt);
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!(
            "cannot use write-ahead logging here (journal mode `{mode}`)"
        ));
    }
    // In place of SQLite's own checkpoints, which a commit that filled
    // the log would run, with two fsyncs, on the caller's thread: the
    // writer's thread runs them (see `worker.rs`).
    conn.wal_hook(Some(note_log));
    migrate(&mut conn)?;
    // Not a count for the first write on this thread to act on.
    let _ = take_log_frames();
    Ok(conn)
}

thread_local! {
    /// How many frames the log held after the last commit on this thread.
    static LOG_FRAMES: Cell<i32> = const { Cell::new(0) };
}

/// The writer's WAL hook, run on the committing thread after each commit.
#[allow(clippy::unnecessary_wraps)] // The hook's type.
fn note_log(_: &Wal, frames: c_int) -> rusqlite::Result<()> {
    LOG_FRAMES.set(frames);
    Ok(())
}

/// How many frames the log held after the last commit on this thread,
/// if any since this was last asked.
pub(crate) fn take_log_frames() -> i32 {
    LOG_FRAMES.replace(0)
}

/// A connection that only runs checkpoints, for a file [`writer`] has
/// prepared: beside the writer, so no write waits for one.
pub(crate) fn checkpointer(path: &Path, options: &SqliteOptions) -> Result<Connection, String> {
    let conn = Connection::open(path).map_err(|e| e.to_string())?;
    configure(&conn, options).map_err(|e| e.to_string())?;
    Ok(conn)
}

/// A connection that only reads, for a file [`writer`] has prepared.
pub(crate) fn reader(path: &Path, options: &SqliteOptions) -> Result<Connection, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| e.to_string())?;
    configure(&conn, options).map_err(|e| e.to_string())?;
    Ok(conn)
}

/// A private database in memory, migrated.
pub(crate) fn memory() -> Result<Connection, String> {
    let mut conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
    configure(&conn, &SqliteOptions::default()).map_err(|e| e.to_string())?;
    migrate(&mut conn)?;
    Ok(conn)
}

fn configure(conn: &Connection, options: &SqliteOptions) -> rusqlite::Result<()> {
    // First, so that even the pragmas below wait for a busy database.
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")
}

fn migrate(conn: &mut Connection) -> Result<(), String> {
    // Processes (or threads) opening a new file at once race: the loser
    // read the version before the winner committed, so its migration
    // fails (a table exists, or its snapshot is stale). Reading the
    // version again finds the work done.
    let mut attempt = 0;
    loop {
        match schema::migrations().to_latest(conn) {
            Ok(()) => return Ok(()),
            Err(_) if attempt < RETRIES => {
                attempt += 1;
                back_off(attempt);
            }
            // Its own text would quote the whole migration's SQL.
            Err(rusqlite_migration::Error::RusqliteError { err, .. }) => {
                return Err(format!("cannot migrate the schema: {err}"));
            }
            Err(e) => return Err(format!("cannot migrate the schema: {e}")),
        }
    }
}

/// How many times a step of opening that met another opener is tried
/// again, waiting a little longer each time (about 2 s in all).
const RETRIES: u32 = 12;

fn back_off(attempt: u32) {
    std::thread::sleep(std::time::Duration::from_millis(30 * u64::from(attempt)));
}

/// Whether `e` is another connection holding the file.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}
