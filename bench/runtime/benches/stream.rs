//! Streaming through an agent to the gateway: a Claude backend reading a
//! stream from a local server, over loopback, published as deltas that a
//! gateway listener receives.
//!
//! - `stream/first_delta`: from the moment the server writes the first
//!   byte of its answer to the moment a listener has the first text delta
//!   (the HTTP body read, the SSE parsed, the event decoded, the delta
//!   published and received).
//! - `stream/per_delta`: a reply of 1,000 text deltas, written at once;
//!   the time from the first byte to the last delta at the listener,
//!   divided by 1,000.
//!
//! Run with `cargo bench -p kesoku-bench --bench stream -- --warm-up-time 1 --measurement-time 3`.

#![allow(missing_docs)]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use futures_util::StreamExt as _;
use kesoku::DeltaKind;
use kesoku::llm::{Agent, ClaudeLlm, HttpOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A Claude stream of a text reply in `n` pieces.
fn reply(n: usize) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: serde_json::Value| {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
            "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    for i in 0..n {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("w{i} ")}}),
        );
    }
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// A server answering every request with `body`, noting when it wrote
/// the first byte of the answer.
async fn server(body: String, first_byte: Arc<Mutex<Option<Instant>>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let body = Arc::new(body);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            socket.set_nodelay(true).unwrap();
            let body = Arc::clone(&body);
            let first_byte = Arc::clone(&first_byte);
            tokio::spawn(async move {
                let mut pending: Vec<u8> = Vec::new();
                let mut buf = vec![0; 1 << 16];
                loop {
                    // A whole request: its headers, then content-length bytes.
                    let body_start = loop {
                        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                            break end + 4;
                        }
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&pending[..body_start]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while pending.len() < body_start + length {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                        }
                    }
                    pending.drain(..body_start + length);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    *first_byte.lock().unwrap() = Some(Instant::now());
                    if socket.write_all(head.as_bytes()).await.is_err()
                        || socket.write_all(body.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    base
}

/// From the first byte to the `n`th text delta at a listener, per turn.
async fn measure(
    agent: &Agent,
    first_byte: &Mutex<Option<Instant>>,
    n: usize,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let mut deltas = agent.gateway().deltas(Some("s"));
        let turn = {
            let agent = agent.clone();
            tokio::spawn(async move { agent.send("s", "Go.").await })
        };
        let mut seen = 0;
        let mut last = Instant::now();
        while seen < n {
            if let Some(delta) = deltas.next().await
                && matches!(delta.kind, DeltaKind::Text(_))
            {
                seen += 1;
                last = Instant::now();
            }
        }
        let start = first_byte
            .lock()
            .unwrap()
            .take()
            .expect("the server answered");
        total += last - start;
        turn.await.unwrap().unwrap();
    }
    total
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("stream");
    for (name, pieces, counted) in [("first_delta", 10, 1), ("per_delta", 1_000, 1_000)] {
        let first_byte = Arc::new(Mutex::new(None));
        let base = runtime.block_on(server(reply(pieces), Arc::clone(&first_byte)));
        let llm = ClaudeLlm::new("k")
            .with_base_url(base)
            .with_http_options(HttpOptions {
                max_retries: 0,
                ..HttpOptions::default()
            });
        let agent = Agent::builder(llm).build().unwrap();
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let total = runtime.block_on(measure(&agent, &first_byte, counted, iters));
                // Per delta for the second.
                total / u32::try_from(counted).unwrap()
            });
        });
    }
    group.finish();
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
