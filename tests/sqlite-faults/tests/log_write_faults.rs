//! A write to the log that fails part way loses nothing and keeps
//! nothing it should not: for every write to the log a run of inserts
//! makes, a run where that one write fails. The insert whose commit it
//! was fails; every other insert succeeds, the store going on after the
//! failure; and both the store and the files as a crash would leave them
//! hold exactly the inserts that returned, intact. Through kesoku-sqlite's
//! log-batching shim (the default) and without it, with a failed write
//! that wrote half its bytes (a full disk) and one that wrote none.
#![cfg(unix)]

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

/// What one run left.
struct Run {
    acked: Vec<usize>,
    failed: Vec<(usize, String)>,
}

async fn inserts(store: &SqliteStore) -> Run {
    let mut run = Run {
        acked: Vec::new(),
        failed: Vec::new(),
    };
    for i in 0..INSERTS {
        match store.insert(&message(i)).await {
            Ok(_) => run.acked.push(i),
            Err(e) => run.failed.push((i, e.to_string())),
        }
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
        // Not assert_eq!: a difference would print 300 kB.
        assert!(*got == message(i), "{what}: m{i} differs");
    }
}

async fn sweep(batch: bool, failure: Failure) {
    let faults = Faults::take();
    let options = SqliteOptions::new().with_batch_log_writes(batch);

    // How many log writes a run makes when none fails.
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path().join("kesoku.sqlite"), &options).unwrap();
    faults.arm(0, failure);
    let clean = inserts(&store).await;
    assert!(clean.failed.is_empty(), "{:?}", clean.failed);
    let writes = faults.writes();
    assert!(writes as usize >= INSERTS, "{writes} log writes");
    drop(store);
    eprintln!("{writes} log writes (batch {batch})");

    // Each write through the shim; without it, SQLite writes each page in
    // two calls, and every 13th of those is enough to fail headers, pages
    // and commit frames alike.
    let step = if batch { 1 } else { 13 };
    for nth in (1..=writes).step_by(step) {
        let what = format!("write {nth} of {writes} failing ({failure:?}, batch {batch})");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kesoku.sqlite");
        let store = SqliteStore::open_with(&path, &options).unwrap();
        faults.arm(nth, failure);
        let run = inserts(&store).await;
        assert!(faults.fired(), "{what}: the write was never made");
        assert_eq!(run.failed.len(), 1, "{what}: {:?}", run.failed);
        let (failed, why) = &run.failed[0];
        assert!(why.contains("save message"), "{what}: {why}");
        holds_exactly(&store, &run.acked, &what).await;
        assert_eq!(
            store.get(&format!("m{failed}")).await.unwrap(),
            None,
            "{what}"
        );

        // The files as a crash now would leave them: the database and its
        // log, without the shared memory, so the log is read from disk.
        let copy = dir.path().join("crash.sqlite");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::copy(
            dir.path().join("kesoku.sqlite-wal"),
            dir.path().join("crash.sqlite-wal"),
        )
        .unwrap();
        let crashed = SqliteStore::open(&copy).unwrap();
        holds_exactly(&crashed, &run.acked, &format!("{what}, after a crash")).await;

        // And the store goes on.
        let after = Message::new("s", Role::User, MessageType::Text, "after the fault");
        store.insert(&after).await.unwrap();
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
