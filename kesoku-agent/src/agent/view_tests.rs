//! A view compacted by each strategy, over random histories (parallel
//! calls, results stored out of order and late, progress notes, images,
//! Gemini's signatures), keeps every pairing rule of the three providers
//! and fits its budget; a stored summary read back gives the same view.

use std::collections::{HashMap, HashSet};

use kesoku_core::store::Seq;
use kesoku_core::{Message, MessageType, Role, ToolRequest, keys};
use kesoku_llm::PROVIDER_KEY;
use proptest::prelude::*;
use serde_json::json;

use super::View;
use crate::agent::compaction::{self, CompactionRequest, turn_starts};

/// One model reply: text or not, and how many calls (in parallel).
#[derive(Debug, Clone)]
struct Reply {
    text: Option<usize>,
    calls: usize,
    /// The results are stored in reverse order of the calls.
    reversed: bool,
    /// A progress note comes between the calls and their results.
    note: bool,
    /// Gemini's fields on each of the reply's messages.
    signed: bool,
}

/// One past turn: a prompt (with an image or not), replies, an answer.
#[derive(Debug, Clone)]
struct Turn {
    prompt: usize,
    image: bool,
    replies: Vec<Reply>,
    answer: usize,
}

fn reply() -> impl Strategy<Value = Reply> {
    (
        proptest::option::of(1..400_usize),
        0..4_usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(text, calls, reversed, note, signed)| Reply {
            text,
            calls,
            reversed,
            note,
            signed,
        })
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        1..600_usize,
        any::<bool>(),
        proptest::collection::vec(reply(), 0..4),
        1..800_usize,
    )
        .prop_map(|(prompt, image, replies, answer)| Turn {
            prompt,
            image,
            replies,
            answer,
        })
}

/// The messages of `turns`, in the order a store holds them.
fn history(turns: &[Turn], system: bool) -> Vec<(Seq, Message)> {
    let mut out = Vec::new();
    if system {
        out.push(Message::new(
            "s",
            Role::System,
            MessageType::Text,
            "Be brief.",
        ));
    }
    for (t, turn) in turns.iter().enumerate() {
        let mut prompt = Message::new("s", Role::User, MessageType::Text, "q".repeat(turn.prompt));
        if turn.image {
            prompt.metadata.insert(
                keys::CONTENT_BLOCKS.into(),
                json!([{"type": "image", "mime_type": "image/png", "data": "AAAA"}]),
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
                        &ToolRequest::new(format!("c{t}.{r}.{c}"), "t", json!({"n": c})),
                    )
                })
                .collect();
            messages.extend(calls.iter().cloned());
            if reply.signed {
                let turn_id = messages.first().map(|m| m.id.clone()).unwrap_or_default();
                for m in &mut messages {
                    m.metadata
                        .insert(PROVIDER_KEY.into(), json!({"turn": turn_id, "sig": "c2ln"}));
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
                    Message::new("s", Role::Tool, MessageType::ToolResult, "r").with_parent(&c.id)
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
    (1..).zip(out).collect()
}

/// Checks the rules every provider holds a request to, on `view`.
fn assert_pairs_hold(view: &[Message]) {
    let lead = compaction::lead(view);
    let mut first = lead;
    if view.get(first).is_some_and(compaction::is_summary) {
        first += 1;
    }
    // It opens on a user's prompt, never on a reply or a result.
    if let Some(m) = view.get(first) {
        assert_eq!(m.role, Role::User, "the view opens on {m:?}");
    }
    // Each run of calls is followed at once by their results, all of them
    // and only them (OpenAI's rule, and so Claude's and Gemini's).
    let mut i = 0;
    while i < view.len() {
        if view[i].kind != MessageType::ToolCall {
            assert!(
                view[i].kind != MessageType::ToolResult,
                "a result without its call right before: {:?}",
                view[i]
            );
            i += 1;
            continue;
        }
        let mut calls = HashSet::new();
        while i < view.len() && view[i].kind == MessageType::ToolCall {
            calls.insert(view[i].id.clone());
            i += 1;
        }
        let mut results = HashSet::new();
        while i < view.len() && view[i].kind == MessageType::ToolResult {
            results.insert(view[i].parent_id.clone().unwrap_or_default());
            i += 1;
        }
        assert_eq!(calls, results, "calls and their results");
    }
}

/// How many messages of each signed reply (Gemini's `turn` field) `view`
/// holds.
fn parts(view: &[Message]) -> HashMap<String, usize> {
    let mut parts = HashMap::new();
    for m in view {
        if let Some(turn) = m
            .metadata
            .get(PROVIDER_KEY)
            .and_then(|p| p["turn"].as_str())
        {
            *parts.entry(turn.to_owned()).or_default() += 1;
        }
    }
    parts
}

/// Compacts `view` as the agent does, to `target` tokens (the kept
/// messages), with `summary` if given; where it was cut.
fn compact(view: &mut View, current: usize, target: u64, summary: bool) -> usize {
    let tokens = view.estimates();
    let turns = turn_starts(&view.messages, current);
    let request = CompactionRequest {
        session: "s",
        messages: &view.messages,
        tokens: &tokens,
        turns: &turns,
        target,
        llm: &kesoku_llm::ScriptedLlm::from_json(json!([])).unwrap(),
        options: &kesoku_llm::LlmOptions::new("m"),
    };
    let keep_from = request.keep_fitting(target);
    let summary = summary.then(|| {
        let mut m = Message::new("s", Role::System, MessageType::Text, "earlier: things");
        m.metadata.insert(
            keys::SUMMARY.into(),
            json!({"from": view.messages[keep_from].id}),
        );
        m
    });
    view.compact(keep_from, summary);
    keep_from
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_compacted_view_keeps_its_pairs_and_fits(
        past in proptest::collection::vec(turn(), 0..12),
        current in turn(),
        system in any::<bool>(),
        budget in 50..6_000_u64,
        summary in any::<bool>(),
    ) {
        let mut turns = past;
        turns.push(current);
        let stored = history(&turns, system);
        let mut view = View::new(stored.clone());
        let whole = view.messages.clone();
        let prompt = whole.iter().rposition(|m| m.role == Role::User).unwrap();
        let running_turn: Vec<String> = whole[prompt..].iter().map(|m| m.id.clone()).collect();
        assert_pairs_hold(&whole);

        compact(&mut view, prompt, budget, summary);
        assert_pairs_hold(&view.messages);
        // The turn being run is whole, at the end.
        let kept: Vec<String> = view.messages[view.messages.len() - running_turn.len()..]
            .iter()
            .map(|m| m.id.clone())
            .collect();
        prop_assert_eq!(&kept, &running_turn);
        // A reply's parts, with their signatures, are kept or dropped
        // together.
        let before = parts(&whole);
        for (turn, n) in parts(&view.messages) {
            prop_assert_eq!(Some(&n), before.get(&turn), "a reply cut apart");
        }
        // It fits (the summary aside), unless the turn being run alone
        // does not: then nothing but it is kept.
        let lead = compaction::lead(&view.messages);
        let tokens = view.estimates();
        let summarized = usize::from(summary);
        let fitted: u64 = tokens.iter().sum::<u64>() - tokens[lead..lead + summarized].iter().sum::<u64>();
        let only_the_turn = view.messages.len() == lead + summarized + running_turn.len();
        prop_assert!(
            fitted <= budget || only_the_turn,
            "{} tokens kept for a budget of {}", fitted, budget
        );
        // Leading system messages are never dropped.
        prop_assert_eq!(lead, usize::from(system));

        // Read back from the store (a summary stored after the prompt, as
        // the agent stores it), the view is the same.
        if summary && compaction::is_summary(&view.messages[lead]) {
            let mut stored = stored;
            let seq = stored.last().map_or(0, |(s, _)| *s) + 1;
            let summary = view.messages[lead].clone();
            stored.push((seq, summary));
            let again = View::new(stored);
            let ids = |v: &[Message]| v.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
            prop_assert_eq!(ids(&again.messages), ids(&view.messages));
        }
    }
}

#[test]
fn a_grown_view_keeps_its_estimate_and_a_calibrated_one_scales() {
    let stored = history(
        &[Turn {
            prompt: 400,
            image: true,
            replies: vec![],
            answer: 40,
        }],
        false,
    );
    let view = View::new(stored.clone());
    let (estimate, raw) = view.estimate(100);
    // 400 bytes of prompt, an image, 40 of answer, and each message's own.
    assert_eq!(raw, 100 + 400 / 4 + 1_600 + 8 + 40 / 4 + 8);
    assert_eq!(estimate, raw);
    let mut answer = stored[1].1.clone();
    answer.metadata.insert(
        keys::USAGE.into(),
        json!({"input_tokens": 3_000, "output_tokens": 10}),
    );
    answer
        .metadata
        .insert(compaction::ESTIMATE.into(), 1_500.into());
    let view = View::new(vec![stored[0].clone(), (2, answer)]);
    let (estimate, raw) = view.estimate(0);
    assert_eq!(estimate, raw * 2, "the provider counted twice the estimate");
}
