//! Gemini's `streamGenerateContent?alt=sse`: each event is a partial
//! `GenerateContentResponse` whose parts are appended, each kept whole with
//! its own `thoughtSignature`; the last carries the `finishReason`, and
//! usage may come on every one.

use serde_json::{Map, Value, json};

use super::{Progress, StreamDecoder, StreamError, StreamEvent, parse};

/// The reply so far, as the one-shot `GenerateContentResponse` it will be.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// The response's own fields (modelVersion, responseId...).
    head: Map<String, Value>,
    parts: Vec<Value>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    calls: usize,
}

impl Decoder {
    /// The stream has no end event: a reason to stop makes the reply
    /// whole, and the server closes the stream after its last usage.
    fn progress(&self) -> Progress {
        if self.finish_reason.is_some() || self.head.contains_key("promptFeedback") {
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
        let v = parse(event, data)?;
        if let Some(e) = v.get("error") {
            return Err(StreamError::Provider(format!(
                "{}: {}",
                e["status"].as_str().unwrap_or("error"),
                e["message"].as_str().unwrap_or("no message")
            )));
        }
        if let Value::Object(chunk) = &v {
            for (k, value) in chunk {
                match k.as_str() {
                    "candidates" => {}
                    "usageMetadata" => self.usage = Some(value.clone()),
                    _ => {
                        self.head.insert(k.clone(), value.clone());
                    }
                }
            }
        }
        let Some(candidate) = v["candidates"].as_array().and_then(|c| c.first()) else {
            // A blocked prompt has no candidates: its reason is the answer,
            // which the one-shot decoder reports.
            if v["promptFeedback"]["blockReason"].is_string() {
                self.head
                    .insert("promptFeedback".into(), v["promptFeedback"].clone());
                return Ok(Progress::Complete);
            }
            return Ok(self.progress());
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(call) = part.get("functionCall") {
                let index = self.calls;
                self.calls += 1;
                // Gemini sends a call whole, in one part.
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: call["id"].as_str().unwrap_or_default().to_owned(),
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                });
                out.push(StreamEvent::ToolCallArguments {
                    index,
                    delta: call.get("args").unwrap_or(&json!({})).to_string(),
                });
                out.push(StreamEvent::ToolCallEnd { index });
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    out.push(StreamEvent::Thought(text.to_owned()));
                } else if !text.is_empty() {
                    out.push(StreamEvent::Text(text.to_owned()));
                }
            }
            self.parts.push(part.clone());
        }
        if let Some(reason) = candidate.get("finishReason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
        }
        Ok(self.progress())
    }

    fn into_body(self) -> Value {
        let mut candidate = json!({"content": {"role": "model", "parts": self.parts}, "index": 0});
        if let Some(reason) = self.finish_reason {
            candidate["finishReason"] = reason;
        }
        let mut body = self.head;
        body.insert("candidates".into(), json!([candidate]));
        if let Some(usage) = self.usage {
            body.insert("usageMetadata".into(), usage);
        }
        Value::Object(body)
    }
}
