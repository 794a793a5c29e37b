//! A writer process killed with SIGKILL loses no message whose `insert`
//! returned, and leaves a sound file: with one insert at a time, and with
//! eight at once, whose writes queue for the writer and are committed in
//! groups.
//!
//! The test binary re-runs itself as the writer: with `WRITER_DB` set,
//! `writer` inserts messages in a loop and prints each acknowledged id;
//! the parent kills it after a few hundred acknowledgements and reopens
//! the file.

use kesoku_core::store::MessageLog;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use kesoku_core::{Message, MessageType, Role, Status};
use kesoku_sqlite::{SqliteOptions, SqliteStore};

/// The database the writer writes to; unset in the parent.
const WRITER_DB: &str = "KESOKU_DURABILITY_WRITER_DB";
/// How many tasks insert at once in the writer.
const WRITER_TASKS: &str = "KESOKU_DURABILITY_WRITER_TASKS";
/// How many acknowledgements the parent waits for before it kills.
const ACKS: usize = 300;
/// The writer stops by itself after this many, so a lost parent cannot
/// leave it running.
const WRITER_LIMIT: usize = 100_000;

/// Message `i`, the same in both processes.
fn message(i: usize) -> Message {
    let mut m = Message::new(
        format!("s{}", i % 7),
        [Role::User, Role::Assistant, Role::Tool][i % 3],
        [
            MessageType::Text,
            MessageType::ToolCall,
            MessageType::ToolResult,
        ][i % 3],
        // Some take more pages than the page cache holds for a
        // transaction at once, so a commit is written in several calls.
        format!(
            "message {i}: ünïcode ✓\n{}",
            "x".repeat(if i % 41 == 7 { 300_000 + i } else { i % 50 })
        ),
    )
    .with_status([Status::PendingAgent, Status::Processed, Status::Responded][i % 3])
    .with_sender("writer");
    m.id = format!("m{i}");
    m.timestamp = Utc
        .timestamp_opt(1_700_000_000 + i64::try_from(i).unwrap(), 987_654_321)
        .unwrap();
    m.metadata.insert("i".into(), i.into());
    m.metadata.insert(
        "args".into(),
        serde_json::json!({"z": [i, {"y": "ü"}], "a": null}),
    );
    if i > 0 {
        m.parent_id = Some(format!("m{}", i - 1));
    }
    m
}

/// The child's side: does nothing unless re-run by
/// `killed_writer_loses_nothing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writer() {
    let Ok(path) = std::env::var(WRITER_DB) else {
        return;
    };
    let tasks: usize = std::env::var(WRITER_TASKS).unwrap().parse().unwrap();
    let store = SqliteStore::open_with(path, &SqliteOptions::new()).unwrap();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut running = Vec::new();
    for _ in 0..tasks {
        let (store, next) = (store.clone(), std::sync::Arc::clone(&next));
        running.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= WRITER_LIMIT {
                    return;
                }
                store.insert(&message(i)).await.unwrap();
                // Flushed at once: an acknowledgement must not sit in a
                // buffer the kill throws away, nor be printed before
                // `insert` returned.
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack m{i}").unwrap();
                out.flush().unwrap();
            }
        }));
    }
    for task in running {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn killed_writer_loses_nothing() {
    killed_writer(1).await;
}

#[tokio::test]
async fn killed_writer_of_grouped_commits_loses_nothing() {
    killed_writer(8).await;
}

async fn killed_writer(tasks: usize) {
    if std::env::var_os(WRITER_DB).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer", "--nocapture", "--test-threads=1"])
        .env(WRITER_DB, &path)
        .env(WRITER_TASKS, tasks.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut acked = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while acked.len() < ACKS {
        let Some(line) = lines.next() else {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the writer ended after {} acks: {}",
                acked.len(),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        // The first may follow libtest's "test writer ... " on its line.
        if let Some((_, id)) = line.unwrap().split_once("ack ") {
            acked.push(id.to_owned());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the writer is too slow"
        );
    }
    // SIGKILL on Unix: no destructor, no checkpoint, likely mid-transaction
    // (the writer does not wait for the parent).
    child.kill().unwrap();
    child.wait().unwrap();

    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.check_integrity().await.unwrap(), "ok");
    for id in &acked {
        let i: usize = id[1..].parse().unwrap();
        let got = store.get(id).await.unwrap();
        assert_eq!(got, Some(message(i)), "acknowledged message {id}");
    }
    // Whatever the writer did after its last ack is whole or absent, and
    // the file takes new writes.
    let last = store.last_seq().await.unwrap();
    assert!(usize::try_from(last).unwrap() >= ACKS);
    let stored = store.after(0, usize::MAX).await.unwrap();
    for (seq, m) in &stored {
        let i: usize = m.id[1..].parse().unwrap();
        assert_eq!(m, &message(i), "message at seq {seq}");
        if tasks == 1 {
            // One at a time: stored in the order written.
            assert_eq!(*seq, i64::try_from(i).unwrap() + 1);
        }
    }
    let mut next = message(WRITER_LIMIT);
    next.id = "after-the-crash".into();
    assert!(store.insert(&next).await.unwrap() > last);
}
