//! A write the disk cannot take fails, and takes nothing with it: every
//! message whose `insert` returned is in the file, every one whose
//! `insert` failed is not, and the file is sound. Both with a commit's
//! log frames written in one call (the default) and as `SQLite` writes
//! them.
//!
//! The test binary re-runs itself as the writer, under a shell that caps
//! the size of a file it may write (`ulimit -f`, with `SIGXFSZ` ignored,
//! so a write past the cap fails with `EFBIG`). The writer inserts large
//! messages, some larger than `SQLite`'s page cache (so a transaction
//! writes pages to the log before its commit), until writes fail.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use chrono::{TimeZone, Utc};
use kesoku_core::store::MessageLog;
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::{SqliteOptions, SqliteStore};

/// The database the writer writes to; unset in the parent.
const WRITER_DB: &str = "KESOKU_DISK_FULL_DB";
/// "1" when the writer gathers a commit's log frames in one write call.
const WRITER_BATCH: &str = "KESOKU_DISK_FULL_BATCH";
/// The cap on a file's size, in `ulimit -f` blocks (512 or 1,024 bytes
/// by shell): a few MiB either way.
const CAP_BLOCKS: u32 = 12_000;
/// The writer stops after this many failed inserts.
const FAILURES: usize = 4;

/// Message `i`: 200 kB, and every fifth 3 MB (more than the 2 MB cache).
fn message(i: usize) -> Message {
    let size = if i % 5 == 4 { 3_000_000 } else { 200_000 };
    let mut m = Message::new(
        "s",
        Role::Tool,
        MessageType::ToolResult,
        format!("{i}:{}", "y".repeat(size)),
    );
    m.id = format!("m{i}");
    m.timestamp = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
    m
}

/// The child's side: does nothing unless re-run by the tests below.
#[tokio::test]
async fn writer() {
    let Ok(path) = std::env::var(WRITER_DB) else {
        return;
    };
    let batch = std::env::var(WRITER_BATCH).unwrap() == "1";
    let options = SqliteOptions::new().with_batch_log_writes(batch);
    let store = SqliteStore::open_with(path, &options).unwrap();
    let mut failures = 0;
    for i in 0.. {
        match store.insert(&message(i)).await {
            Ok(_) => println!("ack m{i}"),
            Err(e) => {
                println!("err m{i} {e}");
                failures += 1;
                if failures == FAILURES {
                    break;
                }
            }
        }
    }
}

#[tokio::test]
async fn a_full_disk_fails_the_write_and_loses_nothing() {
    full_disk(true).await;
}

#[tokio::test]
async fn a_full_disk_fails_the_write_of_single_frames_and_loses_nothing() {
    full_disk(false).await;
}

async fn full_disk(batch: bool) {
    if std::env::var_os(WRITER_DB).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let script = format!("trap '' XFSZ; ulimit -f {CAP_BLOCKS}; exec \"$0\" \"$@\"");
    let out = Command::new("/bin/sh")
        .args(["-c", &script])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "writer", "--nocapture", "--test-threads=1"])
        .env(WRITER_DB, &path)
        .env(WRITER_BATCH, if batch { "1" } else { "0" })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut acked, mut failed) = (Vec::new(), Vec::new());
    for line in BufReader::new(&out.stdout[..]).lines() {
        let line = line.unwrap();
        // The first may follow libtest's "test writer ... " on its line.
        if let Some((_, id)) = line.split_once("ack ") {
            acked.push(id.to_owned());
        } else if let Some((_, rest)) = line.split_once("err ") {
            let (id, why) = rest.split_once(' ').unwrap();
            assert!(why.contains("save message"), "{why}");
            failed.push(id.to_owned());
        }
    }
    assert_eq!(failed.len(), FAILURES, "the cap was never reached");
    assert!(
        acked.len() >= 3,
        "only {} writes before the cap",
        acked.len()
    );

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.check_integrity().await.unwrap(), "ok");
    for id in &acked {
        let i: usize = id[1..].parse().unwrap();
        // Not assert_eq!: a difference would print megabytes.
        let got = store.get(id).await.unwrap();
        assert!(got == Some(message(i)), "acknowledged {id} differs");
    }
    for id in &failed {
        assert_eq!(store.get(id).await.unwrap(), None, "failed {id}");
    }
    assert_eq!(
        usize::try_from(store.last_seq().await.unwrap()).unwrap(),
        acked.len()
    );
    let after = Message::new("s", Role::User, MessageType::Text, "after the cap");
    store.insert(&after).await.unwrap();
}
