//! Scale-out: turns per second with 1, 2 and 4 agent worker processes on
//! one store, against a model that answers after 20 ms.
//!
//! Each worker is this binary run again as `--worker serve ...` (see
//! `tests/support/worker.rs`): `agent.serve()` with a per-prompt scripted
//! model, two model calls per turn (a tool call, then the answer) and at
//! most `TURNS` turns at once, as a worker with a provider's concurrency
//! limit would run. The driver posts `PROMPTS` prompts (one per session)
//! at once and times until every answer is stored. A first round warms
//! the workers up (not timed).
//!
//! PostgreSQL: set `KESOKU_BENCH_PG_URL` (or `KESOKU_TEST_PG_URL`) to a
//! server; each case gets a new database. `SQLite`: one file shared by the
//! workers, always run.
//!
//! Run with `cargo bench -p kesoku-bench --features postgres --bench scale`
//! (`KESOKU_BENCH_ONLY=postgres` or `sqlite` for one store's cases).

#![allow(missing_docs)]

#[path = "../../../tests/support/worker.rs"]
#[allow(dead_code)]
mod worker;

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kesoku::gateway::{Filter, Gateway};
use kesoku::{Message, MessageType, Role, Status};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Worker processes per case.
const WORKERS: [usize; 3] = [1, 2, 4];
/// Prompts per timed round (each in its own session).
const PROMPTS: usize = 600;
/// Turns one worker runs at once.
const TURNS: usize = 8;
/// Timed rounds per case; the best is reported, with the others.
const ROUNDS: usize = 3;

async fn spawn_worker(url: &str) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--worker",
            "serve",
            url,
            "--latency-ms",
            "20",
            "--lease-ms",
            "10000",
        ])
        .args(["--turns", &TURNS.to_string()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line == "ready" {
            break;
        }
    }
    // The model-call log is not needed here; keep the pipe drained.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

/// Posts `PROMPTS` prompts at once and waits for every answer; the time.
async fn round(gateway: &Gateway, tag: &str) -> Duration {
    let mut answers = gateway
        .listen(Filter::new().roles([Role::Assistant]))
        .await
        .unwrap();
    let start = Instant::now();
    let mut posts = Vec::new();
    for i in 0..PROMPTS {
        let gateway = gateway.clone();
        let m = Message::new(format!("{tag}-{i}"), Role::User, MessageType::Text, "add")
            .with_status(Status::PendingAgent);
        posts.push(tokio::spawn(async move { gateway.post(m).await.unwrap() }));
    }
    for p in posts {
        p.await.unwrap();
    }
    let mut answered = 0;
    while answered < PROMPTS {
        let d = tokio::time::timeout(Duration::from_mins(5), answers.next())
            .await
            .expect("answers stopped coming")
            .unwrap()
            .unwrap();
        if d.message.kind == MessageType::Text && d.message.status == Status::Pending {
            answered += 1;
        }
    }
    start.elapsed()
}

async fn case(label: &str, url: &str, workers: usize) {
    let store = worker::open(url).await.unwrap();
    let gateway =
        Gateway::from_arc(Arc::clone(&store)).with_poll_interval(Duration::from_millis(20));
    let mut children = Vec::new();
    for _ in 0..workers {
        children.push(spawn_worker(url).await);
    }
    round(&gateway, "warm").await;
    let mut rates = Vec::new();
    for r in 0..ROUNDS {
        let took = round(&gateway, &format!("r{r}")).await;
        #[allow(clippy::cast_precision_loss)]
        rates.push(PROMPTS as f64 / took.as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    let best = rates[rates.len() - 1];
    let all: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    println!(
        "scale/{label}/{workers} workers: {best:.0} turns/s (rounds: {})",
        all.join(", ")
    );
    drop(children);
}

/// A new database on the server at `url`; its URL.
#[cfg(feature = "postgres")]
async fn fresh_database(url: &str, name: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .await
        .unwrap();
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, query) = url
        .split_once('?')
        .map_or((url, String::new()), |(b, q)| (b, format!("?{q}")));
    let host_end = base
        .rfind('/')
        .filter(|&i| i > base.find("://").map_or(0, |j| j + 2))
        .unwrap_or(base.len());
    format!("{}/{name}{query}", &base[..host_end])
}

async fn bench() {
    // `KESOKU_BENCH_ONLY=postgres` (or `sqlite`) runs one store's cases.
    let only = std::env::var("KESOKU_BENCH_ONLY").unwrap_or_default();
    let run = |store: &str| only.is_empty() || only == store;
    #[cfg(feature = "postgres")]
    if run("postgres") {
        postgres().await;
    }
    #[cfg(not(feature = "postgres"))]
    println!("scale/postgres: skipped (built without the `postgres` feature)");
    if run("sqlite") {
        for workers in WORKERS {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite:{}", dir.path().join("kesoku.sqlite").display());
            case("sqlite", &url, workers).await;
        }
    }
}

#[cfg(feature = "postgres")]
async fn postgres() {
    match std::env::var("KESOKU_BENCH_PG_URL").or_else(|_| std::env::var("KESOKU_TEST_PG_URL")) {
        Ok(url) => {
            for workers in WORKERS {
                let db = fresh_database(&url, &format!("kesoku_bench_{workers}")).await;
                case("postgres", &db, workers).await;
            }
        }
        Err(_) => {
            println!("scale/postgres: skipped (set KESOKU_BENCH_PG_URL to a PostgreSQL server)");
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(rest) = args.strip_prefix(&["--worker".to_owned()]) {
        if let Err(e) = runtime.block_on(worker::main_with(rest)) {
            eprintln!("worker: {e}");
            std::process::exit(1);
        }
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // of the kind and only wants it to build and start.
    if !args.iter().any(|a| a == "--bench") {
        println!("scale: run with `cargo bench` to measure");
        return;
    }
    runtime.block_on(bench());
}
