//! A Responses API reply read into an [`AssistantTurn`]: its output items
//! (messages, function calls, reasoning, built-in tools' calls), its
//! status, its usage.
//!
//! Each message of the turn keeps, in its provider fields
//! ([`OUTPUT_ITEMS`]), the output items it came from, and those before it
//! that belong with it: a reasoning item goes with the message or call
//! that follows it (the API refuses one sent without it), and a built-in
//! tool's call with the next message or call too. So each message is sent
//! back with exactly its own items, in their order, whatever other
//! messages of the turn a view leaves out: both or neither.

use kesoku_core::ToolRequest;
use kesoku_core::lowering::ToolNames;
use serde_json::{Map, Value, json};

use crate::error::LlmError;
use crate::stream::responses::error_fields;
use crate::turn::{AssistantTurn, PROVIDER_KEY, StopReason, TurnBuilder, Usage};

/// Provider field: the output items a message is sent back as.
pub(crate) const OUTPUT_ITEMS: &str = "output_items";
/// Provider field: the id of the response a message came from.
pub(crate) const RESPONSE_ID: &str = "response_id";

/// Reads a whole `Response` body (one-shot, or rebuilt from a stream).
pub(crate) fn read_response(
    provider: &'static str,
    session_id: &str,
    body: &Value,
    names: &ToolNames,
) -> Result<AssistantTurn, LlmError> {
    let malformed = |message: String| LlmError::malformed(provider, message);
    if body.get("status").and_then(Value::as_str) == Some("failed") {
        return Err(failed(provider, &body["error"]));
    }
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("the response has no `output` array".into()))?;
    let mut turn = TurnBuilder::default();
    // Items waiting for the message or call they go with.
    let mut pending: Vec<Value> = Vec::new();
    let mut text_items: Vec<Value> = Vec::new();
    let mut calls: Vec<(ToolRequest, Vec<Value>)> = Vec::new();
    let mut refused = false;
    for (i, item) in output.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match part["type"].as_str() {
                        Some("output_text") => turn.push_text(part["text"].as_str().unwrap_or("")),
                        Some("refusal") => {
                            refused = true;
                            turn.push_text(part["refusal"].as_str().unwrap_or(""));
                        }
                        _ => {}
                    }
                }
                text_items.append(&mut pending);
                text_items.push(message_input(item));
            }
            Some("function_call") => {
                let (Some(id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(malformed(format!(
                        "output[{i}] is a function_call without `call_id` or `name`"
                    )));
                };
                // The arguments stay the JSON string the model wrote: the
                // runner parses it, so a broken one becomes an error result.
                let arguments = match item.get("arguments") {
                    Some(v @ Value::String(_)) => v.clone(),
                    _ => Value::String("{}".into()),
                };
                let mut items = std::mem::take(&mut pending);
                items.push(call_input(item));
                calls.push((
                    ToolRequest::new(id, names.from_wire(name), arguments),
                    items,
                ));
            }
            Some("reasoning") => pending.push(reasoning_input(item)),
            // A built-in tool's call and its result, run by the provider:
            // kept as they came.
            Some(_) => pending.push(item.clone()),
            None => return Err(malformed(format!("output[{i}] has no `type`"))),
        }
    }
    // What no message or call followed: a built-in tool's call goes with
    // the last; a reasoning item alone would be refused, so it is dropped.
    pending.retain(|v| v["type"] != "reasoning");
    match calls.last_mut() {
        Some((_, items)) => items.append(&mut pending),
        None => text_items.append(&mut pending),
    }
    let has_calls = !calls.is_empty();
    for (request, items) in calls {
        let mut fields = Map::new();
        fields.insert(OUTPUT_ITEMS.into(), Value::Array(items));
        turn.push_call(request, Some(fields));
    }
    if !text_items.is_empty() {
        turn.set_text_field(OUTPUT_ITEMS, Value::Array(text_items));
    }
    let stop_reason = match body.get("status").and_then(Value::as_str) {
        Some("incomplete") => match body["incomplete_details"]["reason"].as_str() {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None => StopReason::Other("incomplete".into()),
        },
        _ if refused => StopReason::Refusal,
        _ if has_calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    };
    turn.set_usage(usage(&body["usage"]));
    let mut turn = turn.finish(session_id, provider, stop_reason);
    turn.response_id = body.get("id").and_then(Value::as_str).map(str::to_owned);
    turn.response_model = body.get("model").and_then(Value::as_str).map(str::to_owned);
    if let Some(id) = turn.response_id.clone() {
        // Each message knows its response: a chained request goes on from
        // the newest.
        for m in turn.messages_mut() {
            let entry = m
                .metadata
                .entry(PROVIDER_KEY)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = entry {
                fields.insert(RESPONSE_ID.into(), id.clone().into());
            }
        }
    }
    Ok(turn)
}

/// A failed response's error: a refusal of the request's length, or the
/// provider's error.
pub(crate) fn failed(provider: &'static str, error: &Value) -> LlmError {
    let (code, message) = error_fields(error);
    if code.as_deref() == Some("context_length_exceeded") {
        return LlmError::ContextOverflow {
            provider,
            tokens: None,
            limit: None,
            message,
        };
    }
    LlmError::Api {
        provider,
        status: 200,
        error_type: code,
        message: format!("the response failed: {message}"),
        attempts: 1,
    }
}

/// The Responses usage: `input_tokens` counts the cached part (and what
/// was written to the cache), and `output_tokens` the reasoning.
fn usage(usage: &Value) -> Usage {
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let input = &usage["input_tokens_details"];
    Usage::new(count("input_tokens"), count("output_tokens"))
        .with_cache(
            input["cached_tokens"].as_u64(),
            input["cache_write_tokens"].as_u64().filter(|&n| n > 0),
        )
        .with_reasoning(usage["output_tokens_details"]["reasoning_tokens"].as_u64())
}

/// Only these keys of `item`, where present.
fn only(item: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|&k| item.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

/// An output message as an input item (`ResponseOutputMessageParam`).
fn message_input(item: &Value) -> Value {
    let mut m = only(item, &["type", "id", "role", "status"]);
    let content: Vec<Value> = item["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| match part["type"].as_str() {
            Some("output_text") => json!({
                "type": "output_text",
                "text": part["text"].as_str().unwrap_or(""),
                "annotations": part.get("annotations").cloned().unwrap_or_else(|| json!([])),
            }),
            _ => Value::Object(only(part, &["type", "text", "refusal"])),
        })
        .collect();
    m.insert("content".into(), Value::Array(content));
    m.entry("role").or_insert_with(|| "assistant".into());
    Value::Object(m)
}

/// A function call as an input item.
fn call_input(item: &Value) -> Value {
    Value::Object(only(
        item,
        &["type", "id", "call_id", "name", "arguments", "status"],
    ))
}

/// A reasoning item as an input item: its id, summary and encrypted
/// content (what a stateless request needs to replay it).
fn reasoning_input(item: &Value) -> Value {
    let mut r = only(
        item,
        &["type", "id", "summary", "encrypted_content", "content"],
    );
    r.entry("summary").or_insert_with(|| json!([]));
    if r.get("content").is_some_and(Value::is_null) {
        r.remove("content");
    }
    if r.get("encrypted_content").is_some_and(Value::is_null) {
        r.remove("encrypted_content");
    }
    Value::Object(r)
}
