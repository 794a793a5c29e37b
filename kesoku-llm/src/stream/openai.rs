//! An OpenAI-compatible streamed chat completion: `chat.completion.chunk`
//! events whose `choices[0].delta` carries pieces of the text and of the
//! tool calls (joined by their `index`), a `finish_reason` on the last
//! choice chunk, with `stream_options.include_usage` a last chunk with the
//! usage and no choices, and `data: [DONE]`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{Progress, StreamDecoder, StreamError, StreamEvent, parse};

/// The reply so far, as the one-shot `ChatCompletion` it will be.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// The chunk's own fields (id, model, created...), each from the
    /// first chunk that gives it (not empty).
    head: Map<String, Value>,
    content: Option<String>,
    /// A strict-mode refusal, which comes in place of the content.
    refusal: Option<String>,
    /// Calls in the order they began, with the provider's `index`.
    calls: Vec<Call>,
    /// The position of the latest call with each `index`, so a piece
    /// finds its call at once however many there are.
    latest: HashMap<u64, usize>,
    /// The calls before this position are ended.
    ended: usize,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    /// Calls looked at to find or end one: what the linear-work test
    /// counts.
    #[cfg(test)]
    pub(crate) looked: usize,
}

#[derive(Debug)]
struct Call {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

impl Decoder {
    fn end_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for position in self.ended..self.calls.len() {
            #[cfg(test)]
            {
                self.looked += 1;
            }
            out.push(StreamEvent::ToolCallEnd { index: position });
        }
        self.ended = self.calls.len();
    }
}

impl Decoder {
    /// A finish reason makes the reply whole; `[DONE]` (or the usage
    /// chunk before it) may follow, or, from some servers, nothing.
    fn progress(&self) -> Progress {
        if self.finish_reason.is_some() {
            Progress::Complete
        } else {
            Progress::More
        }
    }
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Progress, StreamError> {
        if data.trim() == "[DONE]" {
            self.end_calls(out);
            return Ok(Progress::End);
        }
        let v = parse(event, data)?;
        if let Some(e) = v.get("error") {
            return Err(StreamError::Provider(
                e["message"]
                    .as_str()
                    .map_or_else(|| e.to_string(), str::to_owned),
            ));
        }
        // The chunk's own fields, from the first that has them: Azure's
        // first chunk (its prompt filter results, no choices) has an empty
        // id and model.
        if let Value::Object(chunk) = &v {
            for (k, value) in chunk {
                if matches!(k.as_str(), "choices" | "usage" | "object") {
                    continue;
                }
                let known = self
                    .head
                    .get(k)
                    .is_some_and(|h| h.as_str().is_none_or(|h| !h.is_empty()));
                if !known {
                    self.head.insert(k.clone(), value.clone());
                }
            }
        }
        if let Some(usage) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = v["choices"].as_array().and_then(|c| c.first()) else {
            return Ok(self.progress());
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str()
            && !text.is_empty()
        {
            self.content.get_or_insert_with(String::new).push_str(text);
            out.push(StreamEvent::Text(text.to_owned()));
        }
        if let Some(text) = delta["refusal"].as_str()
            && !text.is_empty()
        {
            self.refusal.get_or_insert_with(String::new).push_str(text);
            out.push(StreamEvent::Text(text.to_owned()));
        }
        for piece in delta["tool_calls"].as_array().into_iter().flatten() {
            let id = piece["id"].as_str().unwrap_or_default();
            let function = &piece["function"];
            // Joined by `index`; a piece with another call's id starts a
            // new call even at a known index (servers that send `index: 0`
            // for every call, or none).
            let index = piece["index"]
                .as_u64()
                .unwrap_or_else(|| self.calls.last().map_or(0, |c| c.index));
            #[cfg(test)]
            {
                self.looked += 1;
            }
            let known = self
                .latest
                .get(&index)
                .copied()
                .filter(|&p| id.is_empty() || self.calls[p].id == id);
            let position = if let Some(p) = known {
                p
            } else {
                // The first piece names the call; later ones only add
                // arguments (a server repeating the id is not joined).
                let id = id.to_owned();
                let name = function["name"].as_str().unwrap_or_default().to_owned();
                out.push(StreamEvent::ToolCallStart {
                    index: self.calls.len(),
                    id: id.clone(),
                    name: name.clone(),
                });
                self.calls.push(Call {
                    index,
                    id,
                    name,
                    arguments: String::new(),
                });
                self.latest.insert(index, self.calls.len() - 1);
                self.calls.len() - 1
            };
            if let Some(args) = function["arguments"].as_str()
                && !args.is_empty()
            {
                self.calls[position].arguments.push_str(args);
                out.push(StreamEvent::ToolCallArguments {
                    index: position,
                    delta: args.to_owned(),
                });
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
            self.end_calls(out);
        }
        Ok(self.progress())
    }

    fn into_body(self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if let Some(refusal) = self.refusal {
            message["refusal"] = refusal.into();
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    })
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = self.head;
        body.insert("object".into(), "chat.completion".into());
        body.insert(
            "choices".into(),
            json!([{
                "index": 0,
                "message": message,
                "finish_reason": self.finish_reason,
            }]),
        );
        if let Some(usage) = self.usage {
            body.insert("usage".into(), usage);
        }
        Value::Object(body)
    }
}
