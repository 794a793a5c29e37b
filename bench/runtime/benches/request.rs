//! Building one request body per backend from a history of 10, 1,000 and
//! 10,000 messages: user questions, tool calls, their results (one in
//! eight with an image) and assistant answers. Nothing is sent.
//!
//! `request/*` encodes the whole history, as the first request of a
//! session does; `request_next/*` encodes the next request of a session
//! the backend served, four messages longer, reusing the encoded prefix
//! it kept.
//!
//! Run with `cargo bench -p kesoku-bench --bench request`.

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion};
use kesoku::llm::{ClaudeLlm, ContentBlock, GeminiLlm, LlmOptions, OpenAiLlm, ToolDeclaration};
use kesoku::{Message, MessageType, Role, ToolRequest, keys};
use serde_json::json;

/// A history of `n` messages, four per round: question, call, result, answer.
fn history(n: usize) -> Vec<Message> {
    let s = "bench";
    let mut out = Vec::with_capacity(n);
    let mut round = 0;
    while out.len() < n {
        out.push(Message::new(
            s,
            Role::User,
            MessageType::Text,
            format!("Weather in city {round}?"),
        ));
        let request = ToolRequest::new(
            format!("call_{round}"),
            "get_weather",
            json!({"city": format!("city {round}"), "days": 2}),
        );
        let call = Message::tool_call(s, &request);
        let mut result = Message::new(
            s,
            Role::Tool,
            MessageType::ToolResult,
            format!("sunny in city {round}"),
        )
        .with_parent(call.id.clone());
        result.metadata.insert(
            keys::TOOL_RESULT.into(),
            json!({"sky": "sunny", "round": round}),
        );
        if round % 8 == 0 {
            let image = ContentBlock::image("image/png", vec![7; 256]);
            result.metadata.insert(
                keys::CONTENT_BLOCKS.into(),
                serde_json::to_value([image]).unwrap(),
            );
        }
        let answer = Message::new(
            s,
            Role::Assistant,
            MessageType::Text,
            format!("It is sunny in city {round}."),
        );
        out.extend([call, result, answer]);
        round += 1;
    }
    out.truncate(n);
    out
}

fn tools() -> Vec<ToolDeclaration> {
    let params = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "How many days."}
        },
        "required": ["city"],
        "additionalProperties": false
    });
    vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Reports the weather.".into(),
        parameters: params,
    }]
}

/// The request body a backend builds (through the test hook, since
/// building a request is not public API).
macro_rules! body {
    ($llm:expr, $history:expr, $tools:expr, $options:expr) => {
        $llm.__request_body($history, $tools, $options)
            .unwrap()
            .bytes
    };
}

fn bench(c: &mut Criterion) {
    let tools = tools();
    let options = LlmOptions::new("model-x");
    let claude = ClaudeLlm::new("k");
    let openai = OpenAiLlm::new("k");
    let gemini = GeminiLlm::new("k");
    let mut group = c.benchmark_group("request");
    for n in [10, 1_000, 10_000] {
        let h = history(n);
        group.bench_with_input(BenchmarkId::new("claude", n), &h, |b, h| {
            b.iter(|| -> Vec<u8> { body!(claude, black_box(h), &tools, &options) });
        });
        group.bench_with_input(BenchmarkId::new("openai", n), &h, |b, h| {
            b.iter(|| -> Vec<u8> { body!(openai, black_box(h), &tools, &options) });
        });
        group.bench_with_input(BenchmarkId::new("gemini", n), &h, |b, h| {
            b.iter(|| -> Vec<u8> { body!(gemini, black_box(h), &tools, &options) });
        });
    }
    group.finish();

    // The next request of a session whose last one the backend encoded:
    // four more messages (a round) on top of the kept prefix.
    let mut group = c.benchmark_group("request_next");
    let next = std::sync::atomic::AtomicU64::new(0);
    for n in [10, 1_000, 10_000] {
        let h = history(n);
        let before = &h[..n - 4];
        macro_rules! next {
            ($name:literal, $llm:expr) => {
                group.bench_with_input(BenchmarkId::new($name, n), &h, |b, h| {
                    b.iter_batched(
                        || {
                            let session = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let session = format!("s{session}");
                            $llm.__session_request_body(&session, before, &tools, &options)
                                .unwrap();
                            session
                        },
                        |session| {
                            $llm.__session_request_body(&session, black_box(h), &tools, &options)
                                .unwrap()
                                .bytes
                        },
                        BatchSize::PerIteration,
                    );
                });
            };
        }
        next!("claude", claude);
        next!("openai", openai);
        next!("gemini", gemini);
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
