//! [`AssistantTurn`]: what one model call returns, and [`TurnBuilder`],
//! the one place a turn is assembled from what a provider sent. A one-shot
//! decoder feeds it a whole response; a streamed reply is first rebuilt as
//! that response (`stream/mod.rs`), so it is read the same way.

use kesoku_core::{Message, MessageType, Role, Status, ToolRequest};
use serde_json::{Map, Value};

use crate::fallback::ContentFallback;

/// Metadata key holding provider fields to replay exactly.
pub const PROVIDER_KEY: &str = "provider";

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// It hit a stop sequence.
    StopSequence,
    /// It refused, or a safety filter stopped it.
    Refusal,
    /// Anything else, as the provider named it.
    Other(String),
}

/// Tokens used by one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantTurn {
    /// The text the model wrote (may be empty).
    pub text: String,
    /// The calls it asked for, with the provider's call ids.
    pub tool_calls: Vec<ToolRequest>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
    /// The turn as history messages, ready to append: a text message (if
    /// any) and one `tool_call` message per call. Provider fields that must
    /// be replayed verbatim (Gemini's `thoughtSignature`) sit in their
    /// metadata under [`PROVIDER_KEY`].
    pub messages: Vec<Message>,
    /// Blocks of the request the provider could not take, sent as text notes.
    pub fallbacks: Vec<ContentFallback>,
}

/// An assistant turn being read: text and calls in the order they came.
#[derive(Debug, Default)]
pub(crate) struct TurnBuilder {
    text: String,
    /// Provider fields of the text message.
    text_fields: Option<Map<String, Value>>,
    /// Each call, with its provider fields.
    calls: Vec<(ToolRequest, Option<Map<String, Value>>)>,
    usage: Usage,
}

impl TurnBuilder {
    pub(crate) fn push_text(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Sets a provider field of the text message, to be replayed with it.
    pub(crate) fn set_text_field(&mut self, key: &str, value: Value) {
        self.text_fields
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value);
    }

    pub(crate) fn push_call(&mut self, request: ToolRequest, fields: Option<Map<String, Value>>) {
        self.calls.push((request, fields));
    }

    pub(crate) fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }

    pub(crate) fn set_usage(&mut self, input_tokens: u64, output_tokens: u64) {
        self.usage = Usage {
            input_tokens,
            output_tokens,
        };
    }

    /// The turn, with its history messages: a text message when there is
    /// text or nothing else, then one `tool_call` message per call.
    pub(crate) fn finish(
        self,
        session_id: &str,
        provider: &'static str,
        stop_reason: StopReason,
    ) -> AssistantTurn {
        let mut messages = Vec::with_capacity(self.calls.len() + 1);
        if !self.text.is_empty() || self.calls.is_empty() {
            let mut m = Message::new(session_id, Role::Assistant, MessageType::Text, &*self.text)
                .with_sender(provider)
                .with_status(Status::Processed);
            if let Some(fields) = self.text_fields {
                m.metadata
                    .insert(PROVIDER_KEY.into(), Value::Object(fields));
            }
            messages.push(m);
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (request, fields) in self.calls {
            let mut m = Message::tool_call(session_id, &request).with_sender(provider);
            if let Some(fields) = fields {
                m.metadata
                    .insert(PROVIDER_KEY.into(), Value::Object(fields));
            }
            messages.push(m);
            tool_calls.push(request);
        }
        AssistantTurn {
            text: self.text,
            tool_calls,
            stop_reason,
            usage: self.usage,
            messages,
            fallbacks: Vec::new(),
        }
    }
}
