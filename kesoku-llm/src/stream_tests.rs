//! Each provider's stream decoder against recorded replies
//! (`tests/fixtures/<provider>/stream/`): split into two chunks at every
//! byte, and one byte at a time, so lines, events and UTF-8 characters are
//! cut everywhere, a streamed reply must give the same events and the same
//! [`AssistantTurn`] as the one-shot response of the same reply.

use eventsource_stream::Eventsource as _;
use futures_util::StreamExt as _;
use kesoku_core::lowering::ToolNames;
use serde_json::Value;

use crate::claude::Messages;
use crate::gemini::GenerateContent;
use crate::openai::ChatCompletions;
use crate::stream::{Progress, StreamDecoder as _, StreamError, StreamEvent};
use crate::turn::AssistantTurn;
use crate::wire::WireFormat;

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The events a decoder gives for `chunks`, and the one-shot body it
/// rebuilds; an error if the reply is not complete at the end.
fn replay<F: WireFormat>(chunks: Vec<Vec<u8>>) -> Result<(Vec<StreamEvent>, Value), StreamError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let bytes = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
        let mut events = bytes.eventsource();
        let mut decoder = F::Decoder::default();
        let mut out = Vec::new();
        let mut complete = false;
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| StreamError::Malformed(e.to_string()))?;
            complete |= decoder.event(&event.event, &event.data, &mut out)? != Progress::More;
        }
        if !complete {
            return Err(StreamError::Malformed("incomplete".into()));
        }
        Ok((out, decoder.into_body()))
    })
}

/// A turn as JSON, its random message ids replaced by their positions.
fn normalized(turn: &AssistantTurn) -> Value {
    let mut text = serde_json::to_string(&turn.messages).unwrap();
    for (i, m) in turn.messages.iter().enumerate() {
        text = text.replace(&m.id, &format!("message-{i}"));
    }
    let mut messages: Value = serde_json::from_str(&text).unwrap();
    for m in messages.as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("timestamp");
    }
    serde_json::json!({
        "text": turn.text,
        "tool_calls": turn.tool_calls.iter().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect::<Vec<_>>(),
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
    let (events, _) = replay::<F>(vec![sse.clone()]).unwrap();
    let mut splits: Vec<Vec<Vec<u8>>> = (1..sse.len())
        .map(|p| vec![sse[..p].to_vec(), sse[p..].to_vec()])
        .collect();
    splits.push(sse.iter().map(|&b| vec![b]).collect());
    for chunks in splits {
        let cut = chunks[0].len();
        let (got_events, body) =
            replay::<F>(chunks).unwrap_or_else(|e| panic!("{provider}, cut at {cut}: {e:?}"));
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
    let (events, _) = replay::<Messages>(vec![fixture("anthropic/stream/two_calls.sse")]).unwrap();
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
    let (_, body) =
        replay::<GenerateContent>(vec![fixture("gemini/stream/two_calls.sse")]).unwrap();
    let parts = &body["candidates"][0]["content"]["parts"];
    assert_eq!(parts[3]["thoughtSignature"], "c2lnLUE=");
    assert_eq!(parts[4]["thoughtSignature"], "c2lnLUI=");
}

#[test]
fn an_error_event_mid_stream_is_an_error() {
    for (provider, result) in [
        (
            "anthropic",
            replay::<Messages>(vec![fixture("anthropic/stream/error.sse")]).err(),
        ),
        (
            "openai",
            replay::<ChatCompletions>(vec![fixture("openai/stream/error.sse")]).err(),
        ),
        (
            "gemini",
            replay::<GenerateContent>(vec![fixture("gemini/stream/error.sse")]).err(),
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
    for provider in ["anthropic", "openai", "gemini"] {
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
                "anthropic" => replay::<Messages>(chunks).err(),
                "openai" => replay::<ChatCompletions>(chunks).err(),
                _ => replay::<GenerateContent>(chunks).err(),
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
    let (_, body) = replay::<ChatCompletions>(vec![sse.into_bytes()]).unwrap();
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 2, "{body}");
    assert_eq!(calls[0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
    assert_eq!(calls[1]["id"], "b");
    assert_eq!(calls[1]["function"]["arguments"], "{\"city\": \"Lima\"}");
}
