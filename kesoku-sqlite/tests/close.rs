//! `SqliteStore::close`: what was acknowledged is in the file, and the
//! file is whole without its log; what comes after fails, saying why, on
//! every clone.

use std::path::Path;
use std::sync::Arc;

use kesoku_core::store::{MessageLog, StoreError};
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::{SqliteOptions, SqliteStore};
use tokio::sync::Barrier;

fn message(session: &str, i: usize) -> Message {
    let mut m = Message::new(session, Role::User, MessageType::Text, format!("{i}"));
    m.id = format!("{session}-{i}");
    m
}

fn log_of(path: &Path) -> std::path::PathBuf {
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    log.into()
}

fn is_closed(e: &StoreError) -> bool {
    matches!(e, StoreError::Backend { message, .. } if message == "the store is closed")
}

/// Writers and readers on clones race the close: each insert either
/// returned (and its message is in the file afterwards) or failed because
/// the store was closed (and its message is not).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_racing_a_close_are_stored_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let options = SqliteOptions::new().with_readers(2);
    let store = SqliteStore::open_with(&path, &options).unwrap();
    let start = Arc::new(Barrier::new(9));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (store, start) = (store.clone(), Arc::clone(&start));
        writers.push(tokio::spawn(async move {
            let session = format!("s{w}");
            start.wait().await;
            let mut acked = Vec::new();
            for i in 0..10_000 {
                match store.insert(&message(&session, i)).await {
                    Ok(_) => acked.push(format!("{session}-{i}")),
                    Err(e) => {
                        assert!(is_closed(&e), "{e}");
                        assert!(
                            e.to_string()
                                .contains(&format!("save message `{session}-{i}`")),
                            "{e}"
                        );
                        // Every call after the first refused one is
                        // refused too.
                        let e = store.history(&session).await.unwrap_err();
                        assert!(is_closed(&e), "{e}");
                        return (session, acked);
                    }
                }
                if i % 7 == 0 {
                    match store.history(&session).await {
                        Ok(history) => assert_eq!(history.len(), acked.len()),
                        // Closed after the insert.
                        Err(e) => {
                            assert!(is_closed(&e), "{e}");
                            return (session, acked);
                        }
                    }
                }
            }
            panic!("the store was never closed")
        }));
    }
    start.wait().await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    store.close().await.unwrap();
    // No log is left beside the file: it was copied in and removed.
    assert!(!log_of(&path).exists(), "the log is still there");

    let mut total = 0;
    let reopened = SqliteStore::open(&path).unwrap();
    for writer in writers {
        let (session, acked) = writer.await.unwrap();
        let stored: Vec<String> = reopened
            .history(&session)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(stored, acked);
        total += acked.len();
    }
    assert!(total > 0, "nothing was written before the close");
    assert_eq!(reopened.check_integrity().await.unwrap(), "ok");
}

/// The calls made before the close all finish: 8 threads make 50
/// inserts each at once (some run on the thread that made them, some find
/// the writer busy and queue), and long reads queue on the readers; then
/// the store is closed, and only then is any awaited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_made_before_a_close_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let store = SqliteStore::open_with(&path, &SqliteOptions::new().with_readers(2)).unwrap();
    let sessions: Vec<String> = (0..8).map(|t| format!("s{t}")).collect();
    let messages: Vec<Vec<Message>> = sessions
        .iter()
        .map(|s| (0..50).map(|i| message(s, i)).collect())
        .collect();
    let inserts: Vec<_> = std::thread::scope(|scope| {
        let threads: Vec<_> = messages
            .iter()
            .map(|batch| {
                let store = &store;
                scope.spawn(move || batch.iter().map(|m| store.insert(m)).collect::<Vec<_>>())
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    let reads: Vec<_> = sessions.iter().map(|s| store.history(s)).collect();
    store.close().await.unwrap();
    for insert in inserts {
        insert.await.unwrap();
    }
    for read in reads {
        read.await.unwrap();
    }
    let reopened = SqliteStore::open(&path).unwrap();
    for (session, batch) in sessions.iter().zip(&messages) {
        let stored = reopened.history(session).await.unwrap();
        assert_eq!(stored.len(), batch.len());
    }
}

#[tokio::test]
async fn a_second_close_and_a_store_in_memory_close_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("kesoku.sqlite")).unwrap();
    store.insert(&message("s", 0)).await.unwrap();
    store.close().await.unwrap();
    store.clone().close().await.unwrap();
    let e = store.get("s-0").await.unwrap_err();
    assert!(is_closed(&e), "{e}");
    assert!(e.to_string().contains("read message `s-0`"), "{e}");

    let memory = SqliteStore::in_memory().unwrap();
    memory.insert(&message("s", 0)).await.unwrap();
    memory.close().await.unwrap();
    let e = memory.insert(&message("s", 1)).await.unwrap_err();
    assert!(is_closed(&e), "{e}");
}

/// A second store on the same file keeps its log: the closing store's
/// connections were not the last.
#[tokio::test]
async fn a_close_leaves_the_log_to_another_store_on_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let first = SqliteStore::open(&path).unwrap();
    let second = SqliteStore::open(&path).unwrap();
    first.insert(&message("s", 0)).await.unwrap();
    first.close().await.unwrap();
    assert!(log_of(&path).exists());
    second.insert(&message("s", 1)).await.unwrap();
    assert_eq!(second.history("s").await.unwrap().len(), 2);
    second.close().await.unwrap();
    assert!(!log_of(&path).exists());
}
