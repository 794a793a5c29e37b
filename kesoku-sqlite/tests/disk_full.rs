//! A write the disk cannot take fails, and takes nothing with it: every
//! message whose `insert` returned is in the file, every one whose
//! `insert` failed is not, and the file is sound. Both with one insert at
//! a time and with eight at once, whose writes queue for the writer and
//! are committed in groups: a group's failed commit fails each of its
//! inserts, and a group's success acknowledges each.
//!
//! The test binary re-runs itself as the writer, under a shell that caps
//! the size of a file it may write (`ulimit -f`, with `SIGXFSZ` ignored,
//! so a write past the cap fails with `EFBIG`). The writer inserts large
//! messages, some larger than `SQLite`'s page cache (so a transaction
//! writes pages to the log before its commit), until writes fail.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{TimeZone, Utc};
use kesoku_core::store::MessageLog;
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::{SqliteOptions, SqliteStore};

/// The database the writer writes to; unset in the parent.
const WRITER_DB: &str = "KESOKU_DISK_FULL_DB";
/// How many tasks insert at once in the writer.
const WRITER_TASKS: &str = "KESOKU_DISK_FULL_TASKS";
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
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writer() {
    let Ok(path) = std::env::var(WRITER_DB) else {
        return;
    };
    let tasks: usize = std::env::var(WRITER_TASKS).unwrap().parse().unwrap();
    let store = SqliteStore::open_with(path, &SqliteOptions::new()).unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let mut running = Vec::new();
    for _ in 0..tasks {
        let (store, next, failures) = (store.clone(), Arc::clone(&next), Arc::clone(&failures));
        running.push(tokio::spawn(async move {
            while failures.load(Ordering::Acquire) < FAILURES {
                let i = next.fetch_add(1, Ordering::Relaxed);
                match store.insert(&message(i)).await {
                    Ok(_) => println!("@ack m{i}"),
                    Err(e) => {
                        println!("@err m{i} {e}");
                        failures.fetch_add(1, Ordering::AcqRel);
                    }
                }
            }
        }));
    }
    for task in running {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn a_full_disk_fails_the_write_and_loses_nothing() {
    full_disk(1).await;
}

#[tokio::test]
async fn a_full_disk_fails_grouped_writes_and_loses_nothing() {
    full_disk(8).await;
}

async fn full_disk(tasks: usize) {
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
        .env(WRITER_TASKS, tasks.to_string())
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
        // The first may follow libtest's "test writer ... " on its line;
        // an error's text, after its id, may hold anything.
        if let Some((_, rest)) = line.split_once("@err ") {
            let (id, why) = rest.split_once(' ').unwrap();
            assert!(why.contains("save message"), "{why}");
            failed.push(id.to_owned());
        } else if let Some((_, id)) = line.split_once("@ack ") {
            acked.push(id.to_owned());
        }
    }
    // Tasks already inserting when the last failure came go on once.
    assert!(
        (FAILURES..FAILURES + tasks).contains(&failed.len()),
        "{} failures: {}",
        failed.len(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        acked.len() >= 3,
        "only {} writes before the cap",
        acked.len()
    );

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.check_integrity().await.unwrap(), "ok");
    for id in &acked {
        let i: usize = id[1..].parse().unwrap_or_else(|e| panic!("{id:?}: {e}"));
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
