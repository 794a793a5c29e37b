//! OpenAI's streamed Responses reply: typed events, `response.created`,
//! then per output item `response.output_item.added`, its deltas
//! (`response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.reasoning_summary_text.delta`...) and
//! `response.output_item.done`, then one of `response.completed`,
//! `response.incomplete` and `response.failed`; an `error` event may come
//! at any point.
//!
//! A delta names its item by `item_id` (never by `call_id`): items are
//! known by the id `output_item.added` gave them. The item
//! `output_item.done` gives is the whole one (a reasoning item's
//! encrypted content comes only there), and is what the reply keeps.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{Progress, StreamDecoder, StreamError, StreamEvent, parse};

/// The reply so far, as the one-shot `Response` it will be.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// The response's own fields (id, model, status, usage...), from the
    /// first event and then the last.
    response: Map<String, Value>,
    items: Vec<Item>,
    /// The position in `items` of each item id.
    ids: HashMap<String, usize>,
    calls: usize,
}

#[derive(Debug)]
enum Item {
    /// A message: its item, and each content part's text so far.
    Message { item: Value, parts: Vec<Value> },
    /// A function call: its position among the reply's calls, its item,
    /// its arguments so far, and whether its end was told.
    Call {
        call: usize,
        item: Value,
        arguments: String,
        ended: bool,
    },
    /// Reasoning and built-in tools' items, kept as the last event gave them.
    Other(Value),
}

impl Decoder {
    /// The item a delta names by `item_id`.
    fn item(&mut self, v: &Value) -> Result<&mut Item, StreamError> {
        let id = v["item_id"].as_str().unwrap_or_default();
        match self.ids.get(id) {
            Some(&p) => Ok(&mut self.items[p]),
            None => Err(StreamError::Malformed(format!(
                "a delta for output item {id:?}, never added"
            ))),
        }
    }

    /// `response.output_item.added`: a new item, known by its id.
    fn added(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), StreamError> {
        let item = v["item"].clone();
        let Some(id) = item["id"].as_str().map(str::to_owned) else {
            return Err(StreamError::Malformed(
                "response.output_item.added has no `item.id`".into(),
            ));
        };
        let item = match item["type"].as_str() {
            Some("message") => Item::Message {
                parts: item["content"].as_array().cloned().unwrap_or_default(),
                item,
            },
            Some("function_call") => {
                let call = self.calls;
                self.calls += 1;
                out.push(StreamEvent::ToolCallStart {
                    index: call,
                    id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                    name: item["name"].as_str().unwrap_or_default().to_owned(),
                });
                let arguments = item["arguments"].as_str().unwrap_or_default().to_owned();
                if !arguments.is_empty() {
                    out.push(StreamEvent::ToolCallArguments {
                        index: call,
                        delta: arguments.clone(),
                    });
                }
                Item::Call {
                    call,
                    item,
                    arguments,
                    ended: false,
                }
            }
            _ => Item::Other(item),
        };
        self.ids.insert(id, self.items.len());
        self.items.push(item);
        Ok(())
    }

    /// `response.output_item.done`: the whole item, in place of what the
    /// deltas built.
    fn done(&mut self, v: &Value, out: &mut Vec<StreamEvent>) {
        let done = v["item"].clone();
        let id = done["id"].as_str().unwrap_or_default();
        let Some(&p) = self.ids.get(id) else {
            // An item never announced: kept, in its place at the end.
            self.ids.insert(id.to_owned(), self.items.len());
            self.items.push(Item::Other(done));
            return;
        };
        match &mut self.items[p] {
            Item::Call {
                call,
                item,
                arguments,
                ended,
            } => {
                if let Some(whole) = done["arguments"].as_str() {
                    whole.clone_into(arguments);
                }
                *item = done;
                if !*ended {
                    *ended = true;
                    out.push(StreamEvent::ToolCallEnd { index: *call });
                }
            }
            Item::Message { item, parts } => {
                *parts = done["content"].as_array().cloned().unwrap_or_default();
                *item = done;
            }
            Item::Other(item) => *item = done,
        }
    }

    /// A text delta of a message's content part.
    fn text(
        &mut self,
        v: &Value,
        key: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        let delta = v["delta"].as_str().unwrap_or_default();
        let index = usize::try_from(v["content_index"].as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
        let Item::Message { parts, .. } = self.item(v)? else {
            return Ok(());
        };
        // A part the deltas begin (`content_part.added` is not needed),
        // within reason.
        if index >= parts.len() && index <= parts.len().saturating_add(64) {
            let kind = if key == "refusal" {
                "refusal"
            } else {
                "output_text"
            };
            parts.resize_with(index + 1, || {
                let mut part = Map::new();
                part.insert("type".into(), kind.into());
                part.insert(key.into(), "".into());
                Value::Object(part)
            });
        }
        if let Some(Value::String(text)) = parts.get_mut(index).and_then(|p| p.get_mut(key)) {
            text.push_str(delta);
        }
        if !delta.is_empty() {
            out.push(StreamEvent::Text(delta.to_owned()));
        }
        Ok(())
    }

    /// The end: the response's last fields, and whether it failed.
    fn end(&mut self, v: &Value) -> Result<Progress, StreamError> {
        if let Value::Object(r) = &v["response"] {
            for (k, value) in r {
                self.response.insert(k.clone(), value.clone());
            }
        }
        if self.response.get("status").and_then(Value::as_str) == Some("failed") {
            return Err(provider_error(&self.response["error"]));
        }
        Ok(Progress::End)
    }
}

/// An error's code and message, flat (`{code, message}`) or nested
/// (`{error: {code, message}}`), as the stream's `error` event comes
/// either way.
pub(crate) fn error_fields(error: &Value) -> (Option<String>, String) {
    let e = error
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(error);
    let code = e["code"]
        .as_str()
        .or_else(|| e["type"].as_str())
        .map(str::to_owned);
    let message = e["message"]
        .as_str()
        .map_or_else(|| e.to_string(), str::to_owned);
    (code, message)
}

/// A provider's error, a refusal of the request's length told apart.
fn provider_error(error: &Value) -> StreamError {
    let (code, message) = error_fields(error);
    if code.as_deref() == Some("context_length_exceeded") {
        return StreamError::ContextOverflow(message);
    }
    StreamError::Provider(match code {
        Some(code) => format!("{code}: {message}"),
        None => message,
    })
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Progress, StreamError> {
        let v = parse(event, data)?;
        // The type is in the data; the event's name, when there is one,
        // says the same.
        let kind = v["type"].as_str().unwrap_or(event);
        match kind {
            "error" => return Err(provider_error(&v)),
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Value::Object(r) = &v["response"] {
                    for (k, value) in r {
                        self.response.insert(k.clone(), value.clone());
                    }
                }
            }
            "response.output_item.added" => self.added(&v, out)?,
            "response.output_item.done" => self.done(&v, out),
            "response.output_text.delta" => self.text(&v, "text", out)?,
            "response.refusal.delta" => self.text(&v, "refusal", out)?,
            "response.function_call_arguments.delta" => {
                let delta = v["delta"].as_str().unwrap_or_default();
                if let Item::Call {
                    call, arguments, ..
                } = self.item(&v)?
                {
                    arguments.push_str(delta);
                    if !delta.is_empty() {
                        out.push(StreamEvent::ToolCallArguments {
                            index: *call,
                            delta: delta.to_owned(),
                        });
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let Item::Call {
                    call,
                    arguments,
                    ended,
                    ..
                } = self.item(&v)?
                {
                    if let Some(whole) = v["arguments"].as_str() {
                        whole.clone_into(arguments);
                    }
                    if !*ended {
                        *ended = true;
                        out.push(StreamEvent::ToolCallEnd { index: *call });
                    }
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(delta) = v["delta"].as_str().filter(|d| !d.is_empty()) {
                    out.push(StreamEvent::Thought(delta.to_owned()));
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                return self.end(&v);
            }
            // Parts added and done, annotations, built-in tools' progress:
            // the items they belong to say it all at their end.
            _ => {}
        }
        Ok(Progress::More)
    }

    fn into_body(self) -> Value {
        let mut body = self.response;
        let output: Vec<Value> = self
            .items
            .into_iter()
            .map(|item| match item {
                Item::Message { mut item, parts } => {
                    item["content"] = Value::Array(parts);
                    item
                }
                Item::Call {
                    mut item,
                    arguments,
                    ..
                } => {
                    item["arguments"] = arguments.into();
                    item
                }
                Item::Other(item) => item,
            })
            .collect();
        // A server that sent only the end has its output there.
        if !output.is_empty() || !body.get("output").is_some_and(Value::is_array) {
            body.insert("output".into(), Value::Array(output));
        }
        Value::Object(body)
    }
}
