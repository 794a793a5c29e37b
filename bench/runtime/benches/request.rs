//! Building one request body per backend from a history of 10, 1,000 and
//! 10,000 messages: user questions, tool calls, their results (one in
//! eight with an image) and assistant answers. Each is a whole model call
//! through the backend's public seam, with a transport ([`Sink`]) that
//! drops the body and answers at once with the provider's shortest reply:
//! building the request is nearly all of it.
//!
//! `request/*` encodes the whole history, as the first request of a
//! session does (and keeps the session's encoded prefix, as that request
//! does); `request_next/*` encodes the next request of a session the
//! backend served, four messages longer, reusing the encoded prefix it
//! kept.
//!
//! Run with `cargo bench -p kesoku-bench --bench request`.

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BatchSize, BenchmarkId, Criterion};
use kesoku::llm::{
    ClaudeLlm, ContentBlock, GeminiLlm, Llm, LlmOptions, OpenAiLlm, OpenAiResponsesLlm,
    ToolDeclaration,
};
use kesoku::{Message, MessageType, Role, ToolRequest, keys};
use kesoku_bench::Sink;
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

fn bench(c: &mut Criterion) {
    let tools = tools();
    let options = LlmOptions::new("model-x");
    let backends: [(&str, Box<dyn Llm>); 4] = [
        (
            "claude",
            Box::new(ClaudeLlm::new("k").with_transport(Sink::new("claude"))),
        ),
        (
            "openai",
            Box::new(OpenAiLlm::new("k").with_transport(Sink::new("openai"))),
        ),
        (
            "gemini",
            Box::new(GeminiLlm::new("k").with_transport(Sink::new("gemini"))),
        ),
        (
            "responses",
            Box::new(OpenAiResponsesLlm::new("k").with_transport(Sink::new("responses"))),
        ),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let next = AtomicU64::new(0);
    let fresh = || format!("s{}", next.fetch_add(1, Ordering::Relaxed));
    let call = |llm: &dyn Llm, session: &str, h: &[Message]| {
        runtime
            .block_on(llm.complete(session, h, &tools, &options))
            .expect("a turn")
    };

    let mut group = c.benchmark_group("request");
    for n in [10, 1_000, 10_000] {
        let h = history(n);
        for (name, llm) in &backends {
            group.bench_with_input(BenchmarkId::new(*name, n), &h, |b, h| {
                b.iter_batched(
                    &fresh,
                    |session| call(&**llm, &session, black_box(h)),
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();

    // The next request of a session whose last one the backend encoded:
    // four more messages (a round) on top of the kept prefix.
    let mut group = c.benchmark_group("request_next");
    for n in [10, 1_000, 10_000] {
        let h = history(n);
        let before = &h[..n - 4];
        for (name, llm) in &backends {
            group.bench_with_input(BenchmarkId::new(*name, n), &h, |b, h| {
                b.iter_batched(
                    || {
                        let session = fresh();
                        call(&**llm, &session, before);
                        session
                    },
                    |session| call(&**llm, &session, black_box(h)),
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
