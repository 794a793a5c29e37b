//! Each provider's stream decoder against recorded replies
//! (`tests/fixtures/<provider>/stream/`): split into two chunks at every
//! byte, and one byte at a time, so lines, events and UTF-8 characters are
//! cut everywhere, a streamed reply must give the same events and the same
//! [`AssistantTurn`] as the one-shot response of the same reply.

use kesoku_core::lowering::ToolNames;
use serde_json::Value;

use crate::claude::Messages;
use crate::gemini::GenerateContent;
use crate::openai::ChatCompletions;
use crate::responses::Responses;
use crate::stream::{Reader, StreamError, StreamEvent};
use crate::turn::AssistantTurn;
use crate::wire::WireFormat;

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The events a decoder gives for `chunks`, and the one-shot body it
/// rebuilds; an error if the reply is not complete at the end. Read as the
/// backend reads a response body.
fn replay<F: WireFormat>(chunks: &[Vec<u8>]) -> Result<(Vec<StreamEvent>, Value), StreamError> {
    let mut reader = Reader::<F::Decoder>::new(1 << 20);
    let mut out = Vec::new();
    for chunk in chunks {
        reader.feed(chunk, &mut out)?;
        if reader.ended() {
            break;
        }
    }
    if !reader.complete() {
        return Err(StreamError::Malformed("incomplete".into()));
    }
    Ok((out, reader.into_body()))
}

/// A turn as JSON, its random message ids replaced by their positions.
fn normalized(turn: &AssistantTurn) -> Value {
    let all: Vec<_> = turn.messages().collect();
    let mut text = serde_json::to_string(&all).unwrap();
    for (i, m) in all.iter().enumerate() {
        text = text.replace(&m.id, &format!("message-{i}"));
    }
    let mut messages: Value = serde_json::from_str(&text).unwrap();
    for m in messages.as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("timestamp");
    }
    serde_json::json!({
        "text": turn.text,
        "tool_calls": turn.tool_calls().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect::<Vec<_>>(),
        "stop_reason": format!("{:?}", turn.stop_reason),
        "usage": [turn.usage.input_tokens, turn.usage.output_tokens],
        "messages": messages,
    })
}

fn every_split<F: WireFormat>(format: &F, provider: &str) {
    let sse = fixture(&format!("{provider}/stream/two_calls.sse"));
    let one_shot: Value =
        serde_json::from_slice(&fixture(&format!("{provider}/stream/two_calls.json"))).unwrap();
    let names = ToolNames::new(F::NAMES, ["get_weather"]);
    let expected = normalized(&format.decode("s", &one_shot, &names).unwrap());
    let (events, _) = replay::<F>(std::slice::from_ref(&sse)).unwrap();
    let mut splits: Vec<Vec<Vec<u8>>> = (1..sse.len())
        .map(|p| vec![sse[..p].to_vec(), sse[p..].to_vec()])
        .collect();
    splits.push(sse.iter().map(|&b| vec![b]).collect());
    for chunks in splits {
        let cut = chunks[0].len();
        let (got_events, body) =
            replay::<F>(&chunks).unwrap_or_else(|e| panic!("{provider}, cut at {cut}: {e:?}"));
        assert_eq!(got_events, events, "{provider}, cut at {cut}");
        let turn = format.decode("s", &body, &names).unwrap();
        assert_eq!(normalized(&turn), expected, "{provider}, cut at {cut}");
    }
    // What the events say agrees with the turn.
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, expected["text"].as_str().unwrap(), "{provider}");
    let calls = expected["tool_calls"].as_array().unwrap();
    for (i, call) in calls.iter().enumerate() {
        let arguments: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallArguments { index, delta } if *index == i => {
                    Some(delta.as_str())
                }
                _ => None,
            })
            .collect();
        let sent: Value = serde_json::from_str(&arguments).unwrap();
        let expected_args = match &call[2] {
            Value::String(raw) => serde_json::from_str(raw).unwrap(),
            v => v.clone(),
        };
        assert_eq!(sent, expected_args, "{provider}, call {i}");
        assert!(events.contains(&StreamEvent::ToolCallEnd { index: i }));
        assert!(events.iter().any(|e| matches!(e,
            StreamEvent::ToolCallStart { index, id, .. } if *index == i && id == call[0].as_str().unwrap())));
    }
}

#[test]
fn claude_streams_the_same_turn_at_every_split() {
    every_split(&Messages, "anthropic");
    let (events, _) = replay::<Messages>(&[fixture("anthropic/stream/two_calls.sse")]).unwrap();
    let thought: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Thought(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought, "Two cities, two calls.");
}

#[test]
fn openai_streams_the_same_turn_at_every_split_with_interleaved_calls() {
    every_split(&ChatCompletions::default(), "openai");
}

#[test]
fn gemini_streams_the_same_turn_at_every_split_with_a_signature_per_part() {
    every_split(&GenerateContent::default(), "gemini");
    let (_, body) = replay::<GenerateContent>(&[fixture("gemini/stream/two_calls.sse")]).unwrap();
    let parts = &body["candidates"][0]["content"]["parts"];
    assert_eq!(parts[3]["thoughtSignature"], "c2lnLUE=");
    assert_eq!(parts[4]["thoughtSignature"], "c2lnLUI=");
}

#[test]
fn openai_responses_streams_the_same_turn_at_every_split_keeping_reasoning_with_its_item() {
    every_split(&Responses::default(), "openai_responses");
    let (events, body) =
        replay::<Responses>(&[fixture("openai_responses/stream/two_calls.sse")]).unwrap();
    let thought: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Thought(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought, "Two cities, two calls.");
    // The reasoning is the whole item `output_item.done` gave.
    assert_eq!(body["output"][0]["encrypted_content"], "gAAAAABoEnc-01");
    let names = ToolNames::new(Responses::NAMES, ["get_weather"]);
    let turn = Responses::default().decode("s", &body, &names).unwrap();
    let items = |m: &kesoku_core::Message| -> Vec<String> {
        m.metadata["provider"]["output_items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all: Vec<_> = turn.messages().collect();
    assert_eq!(items(all[0]), ["rs_01", "msg_01"]);
    assert_eq!(items(all[1]), ["fc_01"]);
    assert_eq!(items(all[2]), ["rs_02", "fc_02"]);
    assert_eq!(
        (turn.usage.cache_read_tokens, turn.usage.reasoning_tokens),
        (Some(1024), Some(64))
    );
}

#[test]
fn an_error_event_mid_stream_is_an_error() {
    for (provider, result) in [
        (
            "anthropic",
            replay::<Messages>(&[fixture("anthropic/stream/error.sse")]).err(),
        ),
        (
            "openai",
            replay::<ChatCompletions>(&[fixture("openai/stream/error.sse")]).err(),
        ),
        (
            "gemini",
            replay::<GenerateContent>(&[fixture("gemini/stream/error.sse")]).err(),
        ),
        (
            "openai_responses",
            replay::<Responses>(&[fixture("openai_responses/stream/error.sse")]).err(),
        ),
    ] {
        let Some(StreamError::Provider(message)) = result else {
            panic!("{provider}: {result:?}")
        };
        assert!(
            message.to_lowercase().contains("overloaded") || message.contains("server"),
            "{provider}: {message}"
        );
    }
}

#[test]
fn a_stream_cut_short_is_never_complete() {
    for provider in ["anthropic", "openai", "gemini", "openai_responses"] {
        let sse = fixture(&format!("{provider}/stream/two_calls.sse"));
        // Every cut at an event boundary before the last event.
        let text = String::from_utf8(sse.clone()).unwrap();
        let blank = if text.contains("\r\n") {
            "\r\n\r\n"
        } else {
            "\n\n"
        };
        let ends: Vec<usize> = text
            .match_indices(blank)
            .map(|(i, _)| i + blank.len())
            .collect();
        assert!(ends.len() > 3, "{provider}: events found");
        // Cuts before the event that makes the reply whole: for OpenAI the
        // finish reason (`[DONE]` may rightly be missing), else the last.
        let whole = if provider == "openai" {
            text.find("\"finish_reason\": \"tool_calls\"").unwrap()
        } else {
            text.len() - 1
        };
        for &end in ends.iter().filter(|&&e| e <= whole) {
            let chunks = vec![sse[..end].to_vec()];
            let result = match provider {
                "anthropic" => replay::<Messages>(&chunks).err(),
                "openai" => replay::<ChatCompletions>(&chunks).err(),
                "openai_responses" => replay::<Responses>(&chunks).err(),
                _ => replay::<GenerateContent>(&chunks).err(),
            };
            assert!(
                result.is_some(),
                "{provider} cut at {end} was taken as complete"
            );
        }
    }
}

#[test]
fn openai_calls_that_share_an_index_are_told_apart_by_their_ids() {
    // Some compatible servers send `index: 0` for every call, or none.
    let chunk = |delta: Value| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        )
    };
    let mut sse = String::new();
    sse += &chunk(
        serde_json::json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}),
    );
    sse += &chunk(
        serde_json::json!({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "get_weather", "arguments": ""}}]}),
    );
    sse += &chunk(
        serde_json::json!({"tool_calls": [{"function": {"arguments": "{\"city\": \"Lima\"}"}}]}),
    );
    sse += "data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"tool_calls\"}]}\n\n";
    let (_, body) = replay::<ChatCompletions>(&[sse.into_bytes()]).unwrap();
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 2, "{body}");
    assert_eq!(calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
    assert_eq!(calls[1]["id"], "b");
    assert_eq!(calls[1]["function"]["arguments"], "{\"city\": \"Lima\"}");
}

#[test]
fn an_openai_refusal_is_the_replys_text_streamed_or_not() {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let sse = chunk(
        serde_json::json!({"role": "assistant", "refusal": "I can't "}),
        Value::Null,
    ) + &chunk(
        serde_json::json!({"refusal": "help with that."}),
        Value::Null,
    ) + &chunk(serde_json::json!({}), "stop".into());
    let (events, body) = replay::<ChatCompletions>(&[sse.into_bytes()]).unwrap();
    assert_eq!(events.len(), 2, "the refusal streams as text: {events:?}");
    assert_eq!(
        body["choices"][0]["message"]["refusal"],
        "I can't help with that."
    );
    let format = ChatCompletions::default();
    let turn = format
        .decode(
            "s",
            &body,
            &kesoku_core::lowering::ToolNames::new(kesoku_core::lowering::Dialect::OpenAi, []),
        )
        .unwrap();
    assert_eq!(turn.text, "I can't help with that.");
    assert_eq!(turn.stop_reason, crate::StopReason::Refusal);
}

/// The fuzz harness of the stream boundary: server-sent events and each
/// provider's stream decoding under random splits and mutations of the
/// recorded replies. Nothing may panic, and how a body is cut into chunks
/// never changes what it gives. 256 cases per property (seconds);
/// `PROPTEST_CASES` raises it.
mod fuzz {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::{fixture, normalized, replay};
    use crate::claude::Messages;
    use crate::gemini::GenerateContent;
    use crate::openai::ChatCompletions;
    use crate::responses::Responses;
    use crate::stream::sse::{Event, Parser, TooLarge};
    use crate::wire::WireFormat;
    use kesoku_core::lowering::ToolNames;

    const BOM: &[u8] = b"\xEF\xBB\xBF";
    const PROVIDERS: [&str; 4] = ["anthropic", "openai", "gemini", "openai_responses"];

    /// `bytes` cut at `cuts` (taken modulo its length).
    fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for to in at.into_iter().chain([bytes.len()]) {
            chunks.push(bytes[from..to].to_vec());
            from = to;
        }
        chunks
    }

    fn parse(limit: usize, chunks: &[Vec<u8>]) -> (Vec<Event>, Option<TooLarge>) {
        let mut parser = Parser::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            if let Err(e) = parser.feed(chunk, &mut out) {
                return (out, Some(e));
            }
        }
        (out, None)
    }

    /// The standard's algorithm over a whole body, written the simple
    /// way, to check the incremental parser against.
    fn reference(bytes: &[u8]) -> Vec<Event> {
        let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        let mut lines = Vec::new();
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => {
                    lines.push(&bytes[start..i]);
                    start = i + 1;
                }
                b'\r' => {
                    lines.push(&bytes[start..i]);
                    if bytes.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    start = i + 1;
                }
                _ => {}
            }
            i += 1;
        }
        // What follows the last line end is never dispatched.
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (mut events, mut event, mut data, mut id) =
            (Vec::new(), String::new(), String::new(), String::new());
        for line in lines {
            if line.is_empty() {
                if !data.is_empty() {
                    data.pop();
                    events.push(Event {
                        name: std::mem::take(&mut event),
                        data: std::mem::take(&mut data),
                        id: id.as_str().into(),
                    });
                }
                event.clear();
                continue;
            }
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(0) => continue,
                Some(c) => (
                    &line[..c],
                    line[c + 1..].strip_prefix(b" ").unwrap_or(&line[c + 1..]),
                ),
                None => (line, &b""[..]),
            };
            match name {
                b"event" => event = text(value),
                b"data" => {
                    data += &text(value);
                    data.push('\n');
                }
                b"id" if !value.contains(&0) => id = text(value),
                _ => {}
            }
        }
        events
    }

    /// Pieces event streams are made of, and some that break them.
    fn fragment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n\n".to_vec()),
            Just(BOM.to_vec()),
            Just(b"data: ".to_vec()),
            Just(b"data:".to_vec()),
            Just(b"event: ".to_vec()),
            Just(b"id: ".to_vec()),
            Just(b"retry: 10".to_vec()),
            Just(b": ping".to_vec()),
            Just(b":".to_vec()),
            Just(b" ".to_vec()),
            Just(b"{\"type\": \"x\"}".to_vec()),
            Just("é€😀".as_bytes().to_vec()),
            Just(b"\xFF\xE2\x82".to_vec()),
            Just(b"\0".to_vec()),
            vec(any::<u8>(), 1..8),
        ]
    }

    /// What a recorded reply comes to, as text: its events and its turn
    /// (or the one-shot decoder's error), or the stream's error.
    fn outcome<F: WireFormat>(format: &F, chunks: &[Vec<u8>]) -> String {
        match replay::<F>(chunks) {
            Err(e) => format!("stream error: {e:?}"),
            Ok((events, body)) => {
                let names = ToolNames::new(F::NAMES, ["get_weather"]);
                let turn = format.decode("s", &body, &names).map(|t| normalized(&t));
                without_made_up_ids(&format!("{events:?}\n{turn:?}"))
            }
        }
    }

    /// `text` without the random part of the ids made up for Gemini calls
    /// that came without one (`gemini-call-3-1a2b3c4d`).
    fn without_made_up_ids(text: &str) -> String {
        const MADE_UP: &str = "gemini-call-";
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(MADE_UP) {
            let after = at + MADE_UP.len();
            out.push_str(&rest[..after]);
            rest = &rest[after..];
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            out.push_str(&rest[..digits]);
            rest = &rest[digits..];
            if let Some(random) = rest.strip_prefix('-') {
                let n = random
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(random.len());
                rest = &random[n..];
            }
        }
        out.push_str(rest);
        out
    }

    fn outcome_of(provider: &str, chunks: &[Vec<u8>]) -> String {
        match provider {
            "anthropic" => outcome(&Messages, chunks),
            "openai" => outcome(&ChatCompletions::default(), chunks),
            "openai_responses" => outcome(&Responses::default(), chunks),
            _ => outcome(&GenerateContent::default(), chunks),
        }
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Set(usize, u8),
        Insert(usize, Vec<u8>),
        Delete(usize, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Set(at, b)),
            (any::<usize>(), fragment()).prop_map(|(at, f)| Mutation::Insert(at, f)),
            (any::<usize>(), 1..48usize).prop_map(|(at, n)| Mutation::Delete(at, n)),
        ]
    }

    fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
        for m in mutations {
            match m {
                Mutation::Set(at, b) if !bytes.is_empty() => {
                    let at = at % bytes.len();
                    bytes[at] = *b;
                }
                Mutation::Insert(at, f) => {
                    let at = at % (bytes.len() + 1);
                    bytes.splice(at..at, f.iter().copied());
                }
                Mutation::Delete(at, n) if !bytes.is_empty() => {
                    let at = at % bytes.len();
                    let end = (at + n).min(bytes.len());
                    bytes.drain(at..end);
                }
                _ => {}
            }
        }
        bytes
    }

    proptest! {
        #[test]
        fn sse_is_read_as_the_standard_says_however_it_is_cut(
            pieces in vec(fragment(), 0..48),
            cuts in vec(any::<usize>(), 0..12),
            small in any::<bool>(),
        ) {
            let bytes = pieces.concat();
            let whole = parse(usize::MAX, std::slice::from_ref(&bytes));
            prop_assert_eq!(&whole.0, &reference(&bytes));
            prop_assert_eq!(&parse(usize::MAX, &split(&bytes, &cuts)), &whole);
            // With a limit some events exceed: the same failure, after the
            // same events, at every split.
            let limit = if small { 12 } else { 64 };
            prop_assert_eq!(
                parse(limit, &split(&bytes, &cuts)),
                parse(limit, &[bytes])
            );
        }

        #[test]
        fn each_provider_reads_a_mutated_reply_the_same_however_it_is_cut(
            provider in 0..4usize,
            error_fixture in any::<bool>(),
            mutations in vec(mutation(), 0..6),
            cuts in vec(any::<usize>(), 0..16),
        ) {
            let provider = PROVIDERS[provider];
            let name = if error_fixture { "error" } else { "two_calls" };
            let bytes = mutate(fixture(&format!("{provider}/stream/{name}.sse")), &mutations);
            let whole = outcome_of(provider, std::slice::from_ref(&bytes));
            prop_assert_eq!(outcome_of(provider, &split(&bytes, &cuts)), whole);
        }

        #[test]
        fn a_mark_line_ends_comments_and_unknown_events_change_no_reply(
            provider in 0..4usize,
            ending in prop_oneof![Just("\n"), Just("\r"), Just("\r\n")],
            bom in any::<bool>(),
            extra in vec(0..3u8, 0..40),
            cuts in vec(any::<usize>(), 0..16),
        ) {
            let provider = PROVIDERS[provider];
            let recorded = fixture(&format!("{provider}/stream/two_calls.sse"));
            let expected = outcome_of(provider, std::slice::from_ref(&recorded));
            let text = String::from_utf8(recorded).unwrap().replace("\r\n", "\n");
            let mut rewritten = String::new();
            for (i, event) in text.split("\n\n").filter(|e| !e.is_empty()).enumerate() {
                // Before an event: nothing, a keep-alive comment, or (for
                // Claude, whose events are named) an event it does not know
                // or one without a name, which its SDK ignores.
                match extra.get(i) {
                    Some(1) => rewritten += ": keep-alive\n\n",
                    Some(2) if provider == "anthropic" => {
                        rewritten += "data: \n\nevent: future_event\ndata: {not json\n\ndata: {\"type\": \"x\"}\n\n";
                    }
                    _ => {}
                }
                rewritten += event;
                rewritten += "\n\n";
            }
            let mut bytes = if bom { BOM.to_vec() } else { Vec::new() };
            bytes.extend_from_slice(rewritten.replace('\n', ending).as_bytes());
            prop_assert_eq!(outcome_of(provider, &split(&bytes, &cuts)), expected);
        }
    }
}

#[test]
fn many_calls_or_blocks_cost_linear_work() {
    // Each delta joins its call or block, and each finish reason ends the
    // calls still open: looking these up through every call or block
    // before was quadratic, so a 10 MB stream of 50,000 tiny calls and as
    // many deltas cost 50 s of CPU, with bytes arriving all the while.
    use crate::stream::StreamDecoder as _;
    let n = 2000;
    let mut out = Vec::new();
    let mut openai = crate::stream::openai::Decoder::default();
    for i in 0..n {
        let start = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"id":"c{i}","function":{{"name":"f"}}}}]}}}}]}}"#
        );
        openai.event("", &start, &mut out).unwrap();
    }
    for _ in 0..n {
        let delta = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"x"}}]},"finish_reason":"tool_calls"}]}"#;
        openai.event("", delta, &mut out).unwrap();
    }
    assert!(openai.looked <= 4 * n, "{} calls looked at", openai.looked);
    let Value::Object(body) = openai.into_body() else {
        panic!("a body")
    };
    let calls = &body["choices"][0]["message"]["tool_calls"];
    assert_eq!(calls.as_array().map(Vec::len), Some(n));
    assert_eq!(calls[0]["function"]["arguments"], "x".repeat(n));

    let mut claude = crate::stream::claude::Decoder::default();
    for i in 0..n {
        let start = format!(
            r#"{{"index":{i},"content_block":{{"type":"tool_use","id":"c{i}","name":"f","input":{{}}}}}}"#
        );
        claude
            .event("content_block_start", &start, &mut out)
            .unwrap();
    }
    for i in (0..n).rev() {
        let delta = format!(
            r#"{{"index":{i},"delta":{{"type":"input_json_delta","partial_json":"{{}}"}}}}"#
        );
        claude
            .event("content_block_delta", &delta, &mut out)
            .unwrap();
        let stop = format!(r#"{{"index":{i}}}"#);
        claude.event("content_block_stop", &stop, &mut out).unwrap();
    }
    assert!(claude.looked <= 4 * n, "{} blocks looked at", claude.looked);
}

#[test]
fn a_responses_stream_ends_at_incomplete_or_failed_and_deltas_need_their_item() {
    let event = |v: Value| format!("data: {v}\n\n");
    let start = event(
        serde_json::json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
    ) + &event(
        serde_json::json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "m", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}),
    ) + &event(
        serde_json::json!({"type": "response.output_text.delta", "item_id": "m", "content_index": 0, "delta": "Half"}),
    );
    // Cut off by the token limit: a turn, stopped for it, with its text.
    let incomplete = start.clone()
        + &event(
            serde_json::json!({"type": "response.incomplete", "response": {"id": "r", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}}),
        );
    let (events, body) = replay::<Responses>(&[incomplete.into_bytes()]).unwrap();
    assert_eq!(events, [StreamEvent::Text("Half".into())]);
    let names = ToolNames::new(Responses::NAMES, []);
    let turn = Responses::default().decode("s", &body, &names).unwrap();
    assert_eq!(
        (turn.text.as_str(), turn.stop_reason),
        ("Half", crate::StopReason::MaxTokens)
    );
    // Failed: the provider's error, named.
    let failed = start.clone()
        + &event(
            serde_json::json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}}),
        );
    let Err(StreamError::Provider(message)) = replay::<Responses>(&[failed.into_bytes()]) else {
        panic!("a failed response is an error")
    };
    assert_eq!(message, "server_error: boom");
    // A delta for an item never added does not read.
    let stray = start
        + &event(
            serde_json::json!({"type": "response.function_call_arguments.delta", "item_id": "fc_x", "delta": "{}"}),
        );
    assert!(matches!(
        replay::<Responses>(&[stray.into_bytes()]),
        Err(StreamError::Malformed(m)) if m.contains("fc_x")
    ));
}
