//! What a typed answer (`Agent::send_as`) costs beside a text one.
//!
//! - `typed/shape_from_prompt`: reading the shape a typed prompt stores
//!   and lowering it for OpenAI's strict mode: paid once per turn, by the
//!   worker that runs it.
//! - `typed/read_answer`: checking an answer against the shape and
//!   decoding it: paid once per answer.
//! - `typed/turn/{send,send_as}`: a whole one-step turn on `MemoryStore`
//!   with a bare scripted model, text against typed.
//!
//! Run with `cargo bench -p kesoku-bench --bench typed -- --warm-up-time 1 --measurement-time 3`.

#![allow(missing_docs)]
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::Criterion;
use kesoku::llm::{Agent, ScriptedLlm};
use kesoku::lowering::Dialect;
use kesoku::{OutputSchema, ToolArg};
use serde::Deserialize;
use serde_json::json;

/// One line of an invoice.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // read through Debug only
struct Line {
    /// What was sold.
    item: String,
    /// How many.
    quantity: u32,
    /// The price of one, in cents.
    cents: u64,
}

/// The invoice's currency.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(rename_all = "lowercase")]
enum Currency {
    /// Euros.
    Eur,
    /// US dollars.
    Usd,
}

/// An invoice read from a text.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // read through Debug only
struct Invoice {
    /// Who pays.
    customer: String,
    /// What was sold.
    lines: Vec<Line>,
    /// The currency.
    currency: Currency,
    /// A note, if the text has one.
    note: Option<String>,
}

const ANSWER: &str = r#"{"customer": "ACME", "lines": [{"item": "anvil", "quantity": 2, "cents": 12000}, {"item": "rope", "quantity": 1, "cents": 900}], "currency": "usd", "note": null}"#;

static NEXT: AtomicU64 = AtomicU64::new(0);

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("typed");

    let stored = serde_json::to_value(OutputSchema::of::<Invoice>()).unwrap();
    group.bench_function("shape_from_prompt", |b| {
        b.iter(|| {
            let shape: OutputSchema = serde_json::from_value(black_box(&stored).clone()).unwrap();
            black_box(shape.lowered(Dialect::OpenAiStrict).schema.is_object());
        });
    });

    let shape = OutputSchema::of::<Invoice>();
    group.bench_function("read_answer", |b| {
        b.iter(|| black_box(shape.read_as::<Invoice>(black_box(ANSWER)).unwrap()));
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Enough answers for every iteration: one per turn, each in a new
    // session (the script plays per session).
    let model = || ScriptedLlm::from_json(json!([{"text": ANSWER}])).unwrap();
    let text_agent = Agent::builder(model()).build().unwrap();
    let typed_agent = Agent::builder(model()).build().unwrap();
    group.bench_function("turn/send", |b| {
        b.iter(|| {
            let session = format!("s{}", NEXT.fetch_add(1, Ordering::Relaxed));
            runtime
                .block_on(async { black_box(text_agent.send(&session, "Read it").await.unwrap()) })
        });
    });
    group.bench_function("turn/send_as", |b| {
        b.iter(|| {
            let session = format!("s{}", NEXT.fetch_add(1, Ordering::Relaxed));
            runtime.block_on(async {
                black_box(
                    typed_agent
                        .send_as::<Invoice>(&session, "Read it")
                        .await
                        .unwrap(),
                )
            })
        });
    });
    group.finish();
    c.final_summary();
}
