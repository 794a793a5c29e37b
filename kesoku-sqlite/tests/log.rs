//! The write-ahead log stays short under a writer that never pauses: the
//! store checkpoints it on a thread of its own, beside the writer, and a
//! write waits for a checkpoint only once the log is long (its writer
//! connection does not checkpoint by itself, so that no call pays for
//! one on its caller's thread).

use kesoku_core::store::MessageLog;
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::SqliteStore;

/// Enough writes to fill the log about ten times over were it never
/// checkpointed (each changes about 4 pages of 4 KiB).
const WRITES: i64 = 10_000;
/// What the store allows: past 8,000 pages (twice the log at which a
/// checkpoint is due) a write waits for one. With room.
const LOG_BOUND: u64 = 36 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_stays_short_under_continuous_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    let log = dir.path().join("log.sqlite-wal");
    let mut longest = 0;
    for i in 0..WRITES {
        let m = Message::new(
            format!("s{}", i % 10),
            Role::Tool,
            MessageType::ToolResult,
            format!("result {i}"),
        );
        store.insert(&m).await.unwrap();
        longest = longest.max(std::fs::metadata(&log).unwrap().len());
    }
    assert!(
        longest < LOG_BOUND,
        "the log reached {longest} bytes in {WRITES} writes"
    );
    assert_eq!(store.check_integrity().await.unwrap(), "ok");
    assert_eq!(store.last_seq().await.unwrap(), WRITES);
}
