//! A write to the log that fails part way loses nothing and keeps
//! nothing it should not: for the writes to the log a run of inserts
//! makes, a run where that one write fails. The insert the write was
//! for fails; every other insert succeeds, the store going on after the
//! failure; and the store, the files as a crash right after the failure
//! would leave them, and the files at the end of the run, each hold
//! exactly the inserts that returned, intact. Through kesoku-sqlite's
//! log-batching shim (the default) and without it, with a failed write
//! that wrote half its bytes (a full disk) and one that wrote none.
#![cfg(unix)]

use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use kesoku_core::store::MessageLog;
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::{SqliteOptions, SqliteStore};
use kesoku_sqlite_faults::{Failure, Faults};

/// Inserts a run makes.
const INSERTS: usize = 8;

/// Message `i`: a few pages, one page, or more than the shim gathers in
/// one write (128 KiB), in turn; the fifth more than `SQLite`'s page cache
/// (2 MiB), so its transaction writes pages to the log before its commit.
fn message(i: usize) -> Message {
    let size = if i == 4 {
        3_000_000
    } else {
        [20_000, 100, 300_000][i % 3]
    };
    let mut m = Message::new(
        "s",
        Role::Tool,
        MessageType::ToolResult,
        format!("{i}:{}", "z".repeat(size)),
    );
    m.id = format!("m{i}");
    m.timestamp = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
    m
}

/// A database with the store's schema, all of it in the file: each run
/// starts from a copy of the file alone, so its first write to the log is
/// the log's own header.
async fn template(dir: &Path) -> PathBuf {
    let path = dir.join("template.sqlite");
    // Closing copies the log into the file and removes it.
    SqliteStore::open(&path).unwrap().close().await.unwrap();
    path
}

/// Copies the database and its log, without the shared memory, so that
/// opening the copy reads the log from disk: what a crash now would
/// leave. (Opening and closing the file here drops this process's POSIX
/// locks on it, which only other processes would see: there are none.)
fn crash_copy(path: &Path, name: &str) -> PathBuf {
    let copy = path.with_file_name(name);
    std::fs::copy(path, &copy).unwrap();
    let log = |p: &Path| {
        let mut s = p.as_os_str().to_owned();
        s.push("-wal");
        PathBuf::from(s)
    };
    std::fs::copy(log(path), log(&copy)).unwrap();
    copy
}

/// What one run left.
struct Run {
    acked: Vec<usize>,
    failed: Vec<(usize, String)>,
    /// A crash copy taken right after the first failed insert, and the
    /// inserts acknowledged by then.
    at_failure: Option<(PathBuf, Vec<usize>)>,
    /// The log writes made by the end of each insert.
    writes_after: Vec<u32>,
}

async fn inserts(store: &SqliteStore, path: &Path, faults: &Faults) -> Run {
    let mut run = Run {
        acked: Vec::new(),
        failed: Vec::new(),
        at_failure: None,
        writes_after: Vec::new(),
    };
    for i in 0..INSERTS {
        match store.insert(&message(i)).await {
            Ok(_) => run.acked.push(i),
            Err(e) => {
                run.failed.push((i, e.to_string()));
                if run.at_failure.is_none() {
                    let copy = crash_copy(path, "at-failure.sqlite");
                    run.at_failure = Some((copy, run.acked.clone()));
                }
            }
        }
        run.writes_after.push(faults.writes());
    }
    run
}

/// The messages `store` holds are exactly the acknowledged ones, in
/// order, and the file is sound.
async fn holds_exactly(store: &SqliteStore, acked: &[usize], what: &str) {
    assert_eq!(store.check_integrity().await.unwrap(), "ok", "{what}");
    let history = store.history("s").await.unwrap();
    let ids: Vec<&str> = history.iter().map(|m| m.id.as_str()).collect();
    let want: Vec<String> = acked.iter().map(|i| format!("m{i}")).collect();
    assert_eq!(ids, want, "{what}");
    for (got, &i) in history.iter().zip(acked) {
        // Not assert_eq!: a difference would print 3 MB.
        assert!(*got == message(i), "{what}: m{i} differs");
    }
}

/// The insert whose writes include write `nth`, by where each insert's
/// writes ended.
fn insert_of(nth: u32, writes_after: &[u32]) -> usize {
    writes_after.iter().position(|&w| nth <= w).unwrap()
}

async fn sweep(batch: bool, failure: Failure) {
    let faults = Faults::take();
    let options = SqliteOptions::new().with_batch_log_writes(batch);
    let scratch = tempfile::tempdir().unwrap();
    let template = template(scratch.path()).await;
    let fresh = |dir: &Path| {
        let path = dir.join("kesoku.sqlite");
        std::fs::copy(&template, &path).unwrap();
        path
    };

    // The log writes of a run in which none fails, and which insert
    // makes which.
    let dir = tempfile::tempdir().unwrap();
    let path = fresh(dir.path());
    faults.arm(0, failure);
    let store = SqliteStore::open_with(&path, &options).unwrap();
    assert_eq!(faults.writes(), 0, "opening a migrated database wrote");
    let clean = inserts(&store, &path, &faults).await;
    assert!(clean.failed.is_empty(), "{:?}", clean.failed);
    let writes = faults.writes();
    store.close().await.unwrap();
    if batch {
        // Without the shim, SQLite makes about 1,900: two a page.
        assert!(
            (INSERTS..100).contains(&(writes as usize)),
            "{writes} log writes"
        );
    }

    // Each write through the shim. Without it, SQLite writes each page in
    // two calls: there, every 13th write, and the last two of each insert
    // (its commit frame's header and page).
    let mut chosen: Vec<u32> = if batch {
        (1..=writes).collect()
    } else {
        (1..=writes).step_by(13).collect()
    };
    if !batch {
        chosen.extend(clean.writes_after.iter().flat_map(|&w| [w - 1, w]));
        chosen.sort_unstable();
        chosen.dedup();
    }
    for nth in chosen {
        let what = format!("write {nth} of {writes} failing ({failure:?}, batch {batch})");
        // Through the shim, a run could make a few log writes fewer than
        // the run without a fault. libsqlite3-sys builds SQLite with one
        // page cache for all of a process's connections
        // (SQLITE_ENABLE_MEMORY_MANAGEMENT), so which of the writer's
        // pages the large insert evicts, and then reads back from the log
        // (the shim writes what it gathered before each read), depends on
        // the pages other connections hold at that moment. Each run's
        // stores are closed before the next, so none are left; should a
        // run still not reach the armed write, it is made again.
        let mut attempts = 0;
        let (_dir, path, store, run) = loop {
            attempts += 1;
            let dir = tempfile::tempdir().unwrap();
            let path = fresh(dir.path());
            let store = SqliteStore::open_with(&path, &options).unwrap();
            faults.arm(nth, failure);
            let run = inserts(&store, &path, &faults).await;
            if faults.fired() || attempts == 5 {
                break (dir, path, store, run);
            }
            eprintln!("{what}: run {attempts} made {} log writes", faults.writes());
            store.close().await.unwrap();
        };
        assert!(
            faults.fired(),
            "{what}: the write was never made in {attempts} runs (log writes by the end of each insert: {:?}, without a fault: {:?})",
            run.writes_after,
            clean.writes_after
        );
        // The insert whose writes, in this run, include the failed one.
        let failing = insert_of(nth, &run.writes_after);
        let failed: Vec<usize> = run.failed.iter().map(|(i, _)| *i).collect();
        assert_eq!(failed, [failing], "{what}: {:?}", run.failed);
        let (failed, why) = &run.failed[0];
        assert!(why.contains("save message"), "{what}: {why}");
        holds_exactly(&store, &run.acked, &what).await;
        assert_eq!(
            store.get(&format!("m{failed}")).await.unwrap(),
            None,
            "{what}"
        );

        let (copy, acked) = run.at_failure.as_ref().unwrap();
        let crashed = SqliteStore::open(copy).unwrap();
        holds_exactly(
            &crashed,
            acked,
            &format!("{what}, crashed after the failure"),
        )
        .await;
        crashed.close().await.unwrap();
        let crashed = SqliteStore::open(crash_copy(&path, "at-end.sqlite")).unwrap();
        holds_exactly(&crashed, &run.acked, &format!("{what}, crashed at the end")).await;
        crashed.close().await.unwrap();

        // And the store goes on.
        let after = Message::new("s", Role::User, MessageType::Text, "after the fault");
        store.insert(&after).await.unwrap();
        store.close().await.unwrap();
    }
}

#[tokio::test]
async fn each_failed_log_write_of_a_gathered_commit_loses_nothing() {
    sweep(true, Failure::Half).await;
    sweep(true, Failure::Nothing).await;
}

#[tokio::test]
async fn each_failed_log_write_of_single_frames_loses_nothing() {
    sweep(false, Failure::Half).await;
    sweep(false, Failure::Nothing).await;
}
