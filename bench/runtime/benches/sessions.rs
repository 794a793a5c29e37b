//! Memory of a `serve()` process that sees sessions without end: 100,000
//! sessions of one prompt each on a `SqliteStore` (on disk, so the store
//! holds nothing of them in memory), answered by a scripted model, with
//! the process's resident memory printed as it goes. The agent keeps a
//! slot per session only while a turn holds it, reaps each finished turn's
//! task at once, and keeps the views of past turns within a budget of
//! messages (`AgentBuilder::view_budget`), so the figure levels off.
//!
//! Run with `cargo bench -p kesoku-bench --bench sessions`
//! (`KESOKU_BENCH_SESSIONS=N` for another count).

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt as _;
use kesoku::gateway::Filter;
use kesoku::llm::{Agent, ScriptedLlm};
use kesoku::store::{SqliteStore, Store};
use kesoku::{Message, MessageType, Role, Status, ToolRegistry};

/// Prompts posted at once, then waited for.
const BATCH: usize = 1_000;

/// This process's resident memory, in MiB: all of it and its anonymous
/// part (the heap, without mapped files), from `/proc/self/status` (Linux;
/// 0 elsewhere).
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no options.
    let sessions: usize = std::env::var("KESOKU_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(sessions));
}

async fn run(sessions: usize) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("sessions.sqlite")).expect("a database"));
    let model = ScriptedLlm::from_json(serde_json::json!([{"text": "ok"}]))
        .expect("a script")
        .per_prompt();
    let agent = Agent::builder(model)
        .registry(ToolRegistry::new())
        .store(Arc::clone(&store))
        .build()
        .expect("an agent");
    let server = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.serve().await })
    };
    let gateway = agent.gateway().clone();
    let mut answers = gateway
        .listen(Filter::new().roles([Role::Assistant]))
        .await
        .expect("a listener");
    println!("sessions: {sessions} sessions of one prompt each, SQLite on disk");
    println!(
        "{:>9} {:>10} {:>10} {:>18}",
        "sessions", "RSS MiB", "anon MiB", "turns/s (batch)"
    );
    let start = Instant::now();
    let mut last = Instant::now();
    let mut done = 0;
    while done < sessions {
        let batch = BATCH.min(sessions - done);
        for i in done..done + batch {
            let prompt = Message::new(format!("s-{i}"), Role::User, MessageType::Text, "hi")
                .with_status(Status::PendingAgent);
            gateway.post(prompt).await.expect("a post");
        }
        for _ in 0..batch {
            answers
                .next()
                .await
                .expect("an answer")
                .expect("a delivery");
        }
        done += batch;
        if done % (sessions / 10).max(BATCH) == 0 || done == sessions {
            let rate =
                f64::from(u32::try_from(batch).unwrap_or(u32::MAX)) / last.elapsed().as_secs_f64();
            let (rss, anon) = rss_mib();
            println!("{done:>9} {rss:>10.1} {anon:>10.1} {rate:>18.0}");
        }
        last = Instant::now();
    }
    println!(
        "sessions: {sessions} turns in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    server.abort();
}
