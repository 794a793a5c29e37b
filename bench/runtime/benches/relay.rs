//! Deltas across processes (`PostgresOptions::with_relay_deltas`): two
//! stores on one database, each with its own connections, as a worker and
//! a front end in two processes would have them.
//!
//! - latency: one delta published on the worker's gateway until the front
//!   end's listener has it, one at a time (median, 90th and 99th
//!   percentile of 300);
//! - throughput: 20,000 token-sized deltas of 8 replies (interleaved in
//!   runs of 25), in bursts of 2,000 each awaited at the front end before
//!   the next; how many deltas it got (adjacent text of one reply travels
//!   joined).
//!
//! Needs `KESOKU_BENCH_PG_URL` (or `KESOKU_TEST_PG_URL`). Run with
//! `cargo bench -p kesoku-bench --features postgres --bench relay`.

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kesoku::gateway::{Deltas, Gateway};
use kesoku::store::{PostgresOptions, PostgresStore};
use kesoku::{Delta, DeltaKind};

const LATENCY_ROUNDS: usize = 300;
const TOKENS: usize = 20_000;
const REPLIES: usize = 8;
const BURST: usize = 2_000;

async fn next(deltas: &mut Deltas) -> Delta {
    tokio::time::timeout(Duration::from_secs(30), deltas.next())
        .await
        .expect("a relayed delta within 30 s")
        .expect("the delta stream ended")
}

fn text(delta: &Delta) -> &str {
    match &delta.kind {
        DeltaKind::Text(t) => t,
        _ => "",
    }
}

#[tokio::main]
async fn main() {
    let Ok(url) =
        std::env::var("KESOKU_BENCH_PG_URL").or_else(|_| std::env::var("KESOKU_TEST_PG_URL"))
    else {
        println!("relay: skipped (set KESOKU_BENCH_PG_URL to a PostgreSQL server)");
        return;
    };
    let options = PostgresOptions::new().with_relay_deltas(true);
    let worker = Gateway::new(
        PostgresStore::connect_with(&url, options.clone())
            .await
            .unwrap(),
    );
    let front = Gateway::new(PostgresStore::connect_with(&url, options).await.unwrap());
    let mut seen = front.deltas(None);

    // Warm up the connections and the statement.
    for _ in 0..20 {
        worker.publish(Delta::new("warm", DeltaKind::Text("x".into())));
        next(&mut seen).await;
    }

    let mut took = Vec::with_capacity(LATENCY_ROUNDS);
    for n in 0..LATENCY_ROUNDS {
        let start = Instant::now();
        worker.publish(Delta::new("s", DeltaKind::Text(n.to_string())));
        let delta = next(&mut seen).await;
        took.push(start.elapsed());
        assert_eq!(text(&delta), n.to_string());
    }
    took.sort();
    let at = |p: usize| took[(took.len() * p / 100).min(took.len() - 1)];
    println!(
        "relay/latency: median {:?}, p90 {:?}, p99 {:?} (publish to the other store's listener)",
        at(50),
        at(90),
        at(99)
    );

    // In bursts the sender's queue holds, each awaited before the next.
    let start = Instant::now();
    let (mut got, mut deltas) = (0, 0);
    for burst in 0..TOKENS / BURST {
        for n in burst * BURST..(burst + 1) * BURST {
            // Replies written at once interleave in runs, as a model's
            // network chunks arrive.
            let reply = (n / 25) % REPLIES;
            worker.publish(
                Delta::new(format!("s{reply}"), DeltaKind::Text("tok, ".into()))
                    .replying_to(format!("m{reply}")),
            );
        }
        let want = (burst + 1) * BURST * "tok, ".len();
        while got < want {
            let delta = next(&mut seen).await;
            got += text(&delta).len();
            deltas += 1;
        }
    }
    let all = start.elapsed();
    println!(
        "relay/throughput: {TOKENS} deltas of {REPLIES} replies, in bursts of {BURST}, all at the other store in {all:?} ({:.0} deltas/s), arriving as {deltas} deltas",
        f64::from(u32::try_from(TOKENS).unwrap()) / all.as_secs_f64()
    );
}
