//! Claude's streamed Messages reply: `message_start`, then per content
//! block `content_block_start`, its deltas and `content_block_stop`, then
//! `message_delta` (stop reason, usage) and `message_stop`; `ping` and
//! `error` may come at any point.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{Progress, StreamDecoder, StreamError, StreamEvent, parse};

/// The reply so far, as the one-shot `Message` it will be.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// `message_start`'s message (id, model, role, usage...).
    message: Map<String, Value>,
    blocks: Vec<Block>,
    /// The position in `blocks` of each of the stream's block indexes
    /// (the first block given it), so a delta finds its block at once
    /// however many there are.
    indexes: HashMap<u64, usize>,
    calls: usize,
    /// Blocks looked at to find one: what the linear-work test counts.
    #[cfg(test)]
    pub(crate) looked: usize,
}

#[derive(Debug)]
enum Block {
    Text(String),
    /// A call: its position among the reply's calls, its start block, and
    /// its input as JSON text, parsed once at its end.
    ToolUse {
        call: usize,
        block: Map<String, Value>,
        input: String,
    },
    Thinking {
        block: Map<String, Value>,
        thinking: String,
        signature: String,
    },
    /// Kept as it came (server tools, redacted thinking).
    Other(Value),
}

impl Decoder {
    fn block(&mut self, index: u64) -> Result<&mut Block, StreamError> {
        #[cfg(test)]
        {
            self.looked += 1;
        }
        self.indexes
            .get(&index)
            .map(|&p| &mut self.blocks[p])
            .ok_or_else(|| {
                StreamError::Malformed(format!("a delta for content block {index}, never started"))
            })
    }

    /// `content_block_start`: a text, a call (whose input comes as
    /// deltas), thinking, or a block kept as it is.
    fn start_block(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), StreamError> {
        let index = v["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let Value::Object(mut block) = v["content_block"].clone() else {
            return Err(StreamError::Malformed(
                "content_block_start has no `content_block`".into(),
            ));
        };
        let block = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !text.is_empty() {
                    out.push(StreamEvent::Text(text.to_owned()));
                }
                Block::Text(text.to_owned())
            }
            Some("tool_use") => {
                let call = self.calls;
                self.calls += 1;
                out.push(StreamEvent::ToolCallStart {
                    index: call,
                    id: block
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                });
                // The input comes as deltas; the start's `{}` is a
                // placeholder.
                block.remove("input");
                Block::ToolUse {
                    call,
                    block,
                    input: String::new(),
                }
            }
            Some("thinking") => {
                let thinking = take_str(&mut block, "thinking");
                let signature = take_str(&mut block, "signature");
                Block::Thinking {
                    block,
                    thinking,
                    signature,
                }
            }
            _ => Block::Other(Value::Object(block)),
        };
        self.indexes.entry(index).or_insert(self.blocks.len());
        self.blocks.push(block);

        Ok(())
    }

    /// `content_block_delta`: more of a block.
    fn delta(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), StreamError> {
        let index = v["index"].as_u64().unwrap_or_default();
        let delta = &v["delta"];
        let piece = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
        match (self.block(index)?, delta["type"].as_str()) {
            (Block::Text(text), Some("text_delta")) => {
                let t = piece("text");
                text.push_str(&t);
                out.push(StreamEvent::Text(t));
            }
            (Block::ToolUse { call, input, .. }, Some("input_json_delta")) => {
                let t = piece("partial_json");
                input.push_str(&t);
                out.push(StreamEvent::ToolCallArguments {
                    index: *call,
                    delta: t,
                });
            }
            (Block::Thinking { thinking, .. }, Some("thinking_delta")) => {
                let t = piece("thinking");
                thinking.push_str(&t);
                out.push(StreamEvent::Thought(t));
            }
            (Block::Thinking { signature, .. }, Some("signature_delta")) => {
                signature.push_str(&piece("signature"));
            }
            // Citations and deltas of blocks kesoku keeps as they
            // are carry nothing it reads.
            _ => {}
        }

        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Progress, StreamError> {
        match event {
            "message_stop" => return Ok(Progress::End),
            "error"
            | "message_start"
            | "content_block_start"
            | "content_block_delta"
            | "content_block_stop"
            | "message_delta" => {}
            // Pings, events without a name and any other: the official SDK
            // reads only the events it knows, and does not parse the rest.
            _ => return Ok(Progress::More),
        }
        let v = parse(event, data)?;
        match event {
            "error" => {
                let e = &v["error"];
                return Err(StreamError::Provider(format!(
                    "{}: {}",
                    e["type"].as_str().unwrap_or("error"),
                    e["message"].as_str().unwrap_or("no message")
                )));
            }
            "message_start" => {
                if let Value::Object(m) = &v["message"] {
                    self.message.clone_from(m);
                }
            }
            "content_block_start" => self.start_block(&v, out)?,
            "content_block_delta" => self.delta(&v, out)?,
            "content_block_stop" => {
                let index = v["index"].as_u64().unwrap_or_default();
                if let Block::ToolUse { call, .. } = self.block(index)? {
                    let call = *call;
                    out.push(StreamEvent::ToolCallEnd { index: call });
                }
            }
            "message_delta" => {
                for key in ["stop_reason", "stop_sequence"] {
                    if let Some(value) = v["delta"].get(key) {
                        self.message.insert(key.into(), value.clone());
                    }
                }
                // The final counts: output always, input when it changed.
                if let Value::Object(usage) = &v["usage"] {
                    let total = self.message.entry("usage").or_insert_with(|| json!({}));
                    if let Value::Object(total) = total {
                        for (k, n) in usage {
                            if !n.is_null() {
                                total.insert(k.clone(), n.clone());
                            }
                        }
                    }
                }
            }
            // Only the names let through above come here.
            _ => {}
        }
        Ok(Progress::More)
    }

    fn into_body(self) -> Value {
        let mut message = self.message;
        let content: Vec<Value> = self
            .blocks
            .into_iter()
            .map(|b| match b {
                Block::Text(text) => json!({"type": "text", "text": text}),
                Block::ToolUse {
                    mut block, input, ..
                } => {
                    // Parsed once, whole; an input that does not parse is
                    // kept as its text, which the runner reports to the
                    // model as it does a truncated one.
                    let input = if input.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&input).unwrap_or(Value::String(input))
                    };
                    block.insert("input".into(), input);
                    Value::Object(block)
                }
                Block::Thinking {
                    mut block,
                    thinking,
                    signature,
                } => {
                    block.insert("thinking".into(), thinking.into());
                    block.insert("signature".into(), signature.into());
                    Value::Object(block)
                }
                Block::Other(v) => v,
            })
            .collect();
        message.insert("content".into(), Value::Array(content));
        Value::Object(message)
    }
}

fn take_str(block: &mut Map<String, Value>, key: &str) -> String {
    match block.remove(key) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}
