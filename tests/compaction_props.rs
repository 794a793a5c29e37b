//! For random histories (parallel calls, results stored out of order and
//! late, progress notes, images, Gemini's reply ids), each compaction
//! strategy's view, as each backend encodes it, keeps that provider's
//! pairing rules: the request opens on the user, every call is answered
//! where the provider wants it, no result comes without its call, and
//! the prompt being answered is last. Through the public API only: a
//! real agent over a real backend whose transport captures the request.

use std::sync::Arc;

use kesoku::agent::Compaction;
use kesoku::llm::testing::CaptureTransport;
use kesoku::llm::{Agent, ClaudeLlm, GeminiLlm, Llm, OpenAiLlm, PROVIDER_KEY, TurnStatus};
use kesoku::store::{MemoryStore, MessageLog as _, Store};
use kesoku::{Message, MessageType, Role, Status, ToolRequest, keys};
use proptest::prelude::*;
use serde_json::{Value, json};

#[path = "support/wire_pairs.rs"]
mod wire_pairs;

/// One model reply: text or not, its parallel calls, how its results
/// were stored.
#[derive(Debug, Clone)]
struct Reply {
    text: Option<usize>,
    calls: usize,
    reversed: bool,
    note: bool,
    marked: bool,
}

#[derive(Debug, Clone)]
struct Turn {
    prompt: usize,
    image: bool,
    replies: Vec<Reply>,
    answer: usize,
}

fn reply() -> impl Strategy<Value = Reply> {
    (
        proptest::option::of(1..300_usize),
        0..4_usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(text, calls, reversed, note, marked)| Reply {
            text,
            calls,
            reversed,
            note,
            marked,
        })
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        1..400_usize,
        any::<bool>(),
        proptest::collection::vec(reply(), 0..3),
        1..600_usize,
    )
        .prop_map(|(prompt, image, replies, answer)| Turn {
            prompt,
            image,
            replies,
            answer,
        })
}

/// The messages of `turns`, as a store holds them.
fn history(turns: &[Turn], system: bool) -> Vec<Message> {
    let mut out = Vec::new();
    if system {
        out.push(
            Message::new("s", Role::System, MessageType::Text, "Be brief.")
                .with_status(Status::Processed),
        );
    }
    for (t, turn) in turns.iter().enumerate() {
        let mut prompt = Message::new("s", Role::User, MessageType::Text, "q".repeat(turn.prompt))
            .with_status(Status::Processed);
        if turn.image {
            prompt.metadata.insert(
                keys::CONTENT_BLOCKS.into(),
                json!([{"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="}]),
            );
        }
        out.push(prompt);
        for (r, reply) in turn.replies.iter().enumerate() {
            let mut messages = Vec::new();
            if let Some(n) = reply.text {
                messages.push(Message::new(
                    "s",
                    Role::Assistant,
                    MessageType::Text,
                    "a".repeat(n),
                ));
            }
            let calls: Vec<Message> = (0..reply.calls)
                .map(|c| {
                    Message::tool_call(
                        "s",
                        &ToolRequest::new(
                            format!("c{t}_{r}_{c}"),
                            "get_weather",
                            json!({"city": c}),
                        ),
                    )
                })
                .collect();
            messages.extend(calls.iter().cloned());
            if reply.marked {
                let id = messages.first().map(|m| m.id.clone()).unwrap_or_default();
                for m in &mut messages {
                    m.metadata.insert(PROVIDER_KEY.into(), json!({"turn": id}));
                }
            }
            out.extend(messages);
            if reply.note && !calls.is_empty() {
                let mut note = Message::new("s", Role::Assistant, MessageType::Text, "halfway");
                note.metadata.insert("progress".into(), true.into());
                out.push(note);
            }
            let mut results: Vec<Message> = calls
                .iter()
                .map(|c| {
                    let mut m = Message::new("s", Role::Tool, MessageType::ToolResult, "sunny")
                        .with_parent(&c.id)
                        .with_status(Status::Responded);
                    m.metadata
                        .insert(keys::CALL_ID.into(), c.metadata[keys::CALL_ID].clone());
                    m.metadata
                        .insert(keys::TOOL_NAME.into(), "get_weather".into());
                    m
                })
                .collect();
            if reply.reversed {
                results.reverse();
            }
            out.extend(results);
        }
        out.push(Message::new(
            "s",
            Role::Assistant,
            MessageType::Text,
            "z".repeat(turn.answer),
        ));
    }
    out
}

/// Each provider's plain text answer.
fn answer(provider: &str) -> Value {
    match provider {
        "anthropic" => json!({"id": "m", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Fine."}], "stop_reason": "end_turn",
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 2}}),
        "openai" => json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Fine.", "refusal": null},
                "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}),
        _ => json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Fine."}]},
            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}}),
    }
}

/// The request an agent with `compaction` and a small window sends for
/// a new prompt on `stored`.
fn request(provider: &'static str, stored: &[Message], compaction: Compaction) -> Value {
    let capture = Arc::new(CaptureTransport::json(&answer(provider)));
    let llm: Box<dyn Llm> = match provider {
        "anthropic" => Box::new(ClaudeLlm::new("k").with_transport(Arc::clone(&capture))),
        "openai" => Box::new(OpenAiLlm::new("k").with_transport(Arc::clone(&capture))),
        _ => Box::new(GeminiLlm::new("k").with_transport(Arc::clone(&capture))),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Arc::new(MemoryStore::new());
        for m in stored {
            store.insert(m).await.unwrap();
        }
        let agent = Agent::builder(llm)
            .model("m")
            .store(store as Arc<dyn Store>)
            .streaming(false)
            .context_window(2_000 + 4_096)
            .compaction(compaction)
            .build()
            .unwrap();
        let outcome = agent.send("s", "The newest prompt").await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:?}");
    });
    capture.last_json().expect("a request")
}

/// The text of the last message of a request.
fn last_text(provider: &str, body: &Value) -> String {
    match provider {
        "gemini" => body["contents"].as_array().unwrap().last().unwrap()["parts"].to_string(),
        _ => body["messages"].as_array().unwrap().last().unwrap()["content"].to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_provider_s_pairing_rules_hold_in_every_compacted_request(
        turns in proptest::collection::vec(turn(), 1..14),
        system in any::<bool>(),
        summarize in any::<bool>(),
    ) {
        let stored = history(&turns, system);
        for provider in ["anthropic", "openai", "gemini"] {
            let compaction = if summarize { Compaction::Summarize } else { Compaction::DropOldestTurns };
            let body = request(provider, &stored, compaction);
            if let Err(e) = wire_pairs::check(provider, &body) {
                prop_assert!(false, "{}", e);
            }
            prop_assert!(last_text(provider, &body).contains("The newest prompt"), "{}", provider);
        }
    }
}

/// A history well past the window is compacted in every provider's
/// request, by either strategy, and keeps its pairs.
#[test]
fn a_long_history_is_sent_compacted_by_each_strategy() {
    let long = Turn {
        prompt: 300,
        image: true,
        replies: vec![Reply {
            text: Some(100),
            calls: 2,
            reversed: true,
            note: true,
            marked: true,
        }],
        answer: 400,
    };
    let stored = history(&vec![long; 40], true);
    for provider in ["anthropic", "openai", "gemini"] {
        for compaction in [Compaction::DropOldestTurns, Compaction::Summarize] {
            let summarize = matches!(compaction, Compaction::Summarize);
            let body = request(provider, &stored, compaction);
            wire_pairs::check(provider, &body).unwrap_or_else(|e| panic!("{e}"));
            let sent = match provider {
                "gemini" => body["contents"].as_array().unwrap().len(),
                _ => body["messages"].as_array().unwrap().len(),
            };
            // 40 turns of 7 messages (notes are not sent), and the prompt.
            assert!(sent < 40 * 6 / 2, "{provider}: {sent} messages sent");
            let text = body.to_string();
            assert_eq!(
                text.contains("A summary of the earlier conversation"),
                summarize,
                "{provider}"
            );
        }
    }
}
