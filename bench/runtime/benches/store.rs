//! The session stores: `insert` throughput (one writer, and 8 concurrent
//! writers) and loading a session's history of 10, 1,000 and 10,000
//! messages, for `MemoryStore` and `SqliteStore` (a file in a temp dir).
//!
//! Run with `cargo bench -p kesoku-bench --bench store -- --warm-up-time 1 --measurement-time 3`.

#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, Throughput};
use kesoku::store::{MemoryStore, SqliteStore, Store};
use kesoku::{Message, MessageType, Role};

/// A typical message: a tool result with a little metadata.
fn message(session: &str, n: u64) -> Message {
    let mut m = Message::new(
        session,
        Role::Tool,
        MessageType::ToolResult,
        format!("result {n}: the sum is 5"),
    );
    m.metadata
        .insert("call_id".into(), format!("call_{n}").into());
    m.metadata
        .insert("tool_result".into(), serde_json::json!({"sum": 5, "n": n}));
    m
}

/// The stores under test; the temp dir lives as long as the store.
fn stores() -> Vec<(&'static str, Arc<dyn Store>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let sqlite = SqliteStore::open(dir.path().join("bench.sqlite")).expect("a database");
    vec![
        ("memory", Arc::new(MemoryStore::new()), None),
        ("sqlite", Arc::new(sqlite), Some(dir)),
    ]
}

fn insert(c: &mut Criterion) {
    let rt = kesoku_bench::runtime();
    let counter = Arc::new(AtomicU64::new(0));
    let mut group = c.benchmark_group("store_insert");
    for (name, store, _dir) in stores() {
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("one_writer", name), |b| {
            b.to_async(&rt).iter(|| async {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                store.insert(&message("s", n)).await.expect("insert")
            });
        });
        group.throughput(Throughput::Elements(8));
        group.bench_function(BenchmarkId::new("8_writers", name), |b| {
            b.to_async(&rt).iter(|| async {
                let writers: Vec<_> = (0..8)
                    .map(|w| {
                        let store = Arc::clone(&store);
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        tokio::spawn(async move {
                            store
                                .insert(&message(&format!("s{w}"), n))
                                .await
                                .expect("insert")
                        })
                    })
                    .collect();
                for w in writers {
                    w.await.expect("a writer");
                }
            });
        });
    }
    group.finish();
}

fn history(c: &mut Criterion) {
    let rt = kesoku_bench::runtime();
    let mut group = c.benchmark_group("store_history");
    for (name, store, _dir) in stores() {
        for len in [10u64, 1_000, 10_000] {
            let session = format!("h{len}");
            rt.block_on(async {
                for n in 0..len {
                    store.insert(&message(&session, n)).await.expect("insert");
                }
            });
            group.throughput(Throughput::Elements(len));
            group.bench_function(BenchmarkId::new(name, len), |b| {
                b.to_async(&rt).iter(|| async {
                    let h = store.history(&session).await.expect("history");
                    assert_eq!(h.len() as u64, len);
                    h
                });
            });
        }
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    insert(&mut c);
    history(&mut c);
    c.final_summary();
}
