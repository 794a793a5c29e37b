//! [`OpenAiLlm`]: the Chat Completions wire format, for OpenAI and the
//! servers that speak it (Ollama, vLLM, llama.cpp server).

use kesoku_core::lowering::{Dialect, ToolNames};
use kesoku_core::{Message, ToolRequest};
use serde_json::{Map, Value, json};

use crate::backend::{Backend, public_backend};
use crate::blocks::{Binary, Block};
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history::{Call, Item, Text, ToolResult};
use crate::options::{LlmOptions, ToolChoice};
use crate::turn::{AssistantTurn, StopReason, TurnBuilder, Usage};
use crate::wire::{Request, WireFormat, WireHistory};

const PROVIDER: &str = "OpenAI";

public_backend! {
    /// OpenAI Chat Completions, or a compatible server.
    ///
    /// Configured like the official SDK: `OPENAI_API_KEY` and `OPENAI_BASE_URL`
    /// (whose default ends in `/v1`), or the builder methods.
    ///
    /// For compatible servers, point the base URL at their `/v1` and adjust:
    /// Ollama (`http://localhost:11434/v1`) takes no `tool_choice` and wants
    /// `max_tokens`, so use [`OpenAiLlm::compatible`]; vLLM and llama.cpp's
    /// server also accept `max_tokens`. A key is optional for local servers.
    ///
    /// ```
    /// let ollama = kesoku_llm::OpenAiLlm::compatible("http://localhost:11434/v1");
    /// let openai = kesoku_llm::OpenAiLlm::new("sk-test").with_strict(true);
    /// assert!(!format!("{openai:?}").contains("sk-test"));
    /// # let _ = ollama;
    /// ```
    OpenAiLlm(ChatCompletions), env: "`OPENAI_API_KEY` and `OPENAI_BASE_URL`"
}

impl OpenAiLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A compatible server at `base_url` (ending in `/v1`): no key, no
    /// `tool_choice`, and `max_tokens` rather than `max_completion_tokens`.
    pub fn compatible(base_url: impl Into<String>) -> Self {
        let format = ChatCompletions {
            send_tool_choice: false,
            legacy_max_tokens: true,
            ..ChatCompletions::default()
        };
        OpenAiLlm(Backend::new(None, &base_url.into(), format))
    }

    /// Sends no `Authorization` header (local servers).
    #[must_use]
    pub fn without_key(mut self) -> Self {
        self.0.endpoint.clear_key();
        self
    }

    /// Strict mode: schemas lowered to OpenAI's strict dialect and sent
    /// with `strict: true`.
    #[must_use]
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.0.format.strict = strict;
        self
    }

    /// Whether to send `tool_choice` (Ollama rejects it).
    #[must_use]
    pub fn with_tool_choice(mut self, send: bool) -> Self {
        self.0.format.send_tool_choice = send;
        self
    }

    /// Sends `max_tokens` (older servers) instead of `max_completion_tokens`.
    #[must_use]
    pub fn with_legacy_max_tokens(mut self, legacy: bool) -> Self {
        self.0.format.legacy_max_tokens = legacy;
        self
    }
}

/// The Chat Completions wire format, and the options of the server spoken
/// to.
#[derive(Debug)]
pub(crate) struct ChatCompletions {
    pub(crate) strict: bool,
    send_tool_choice: bool,
    legacy_max_tokens: bool,
}

impl Default for ChatCompletions {
    fn default() -> Self {
        ChatCompletions {
            strict: false,
            send_tool_choice: true,
            legacy_max_tokens: false,
        }
    }
}

impl WireFormat for ChatCompletions {
    const NAME: &'static str = PROVIDER;
    const DEFAULT_BASE_URL: &'static str = OpenAiLlm::DEFAULT_BASE_URL;
    const DEFAULT_MODEL: &'static str = "gpt-4.1";
    // The input a request may hold, for the names OpenAI documents; the
    // more specific first. GPT-5's 400,000 are shared with up to 128,000
    // of output: 272,000 of input. Any other name (a compatible server's
    // model, a new family) is not guessed.
    fn context_window(model: &str) -> Option<u64> {
        const FAMILIES: [(&str, u64); 16] = [
            ("gpt-4.1", 1_047_576),
            ("gpt-4.5", 128_000),
            ("gpt-4o", 128_000),
            ("gpt-4-turbo", 128_000),
            ("gpt-4-0125-preview", 128_000),
            ("gpt-4-1106-preview", 128_000),
            ("gpt-4-vision-preview", 128_000),
            ("gpt-4-32k", 32_768),
            ("gpt-5-chat", 128_000),
            ("gpt-5", 272_000),
            ("o1-mini", 128_000),
            ("o1-preview", 128_000),
            ("o1", 200_000),
            ("o3", 200_000),
            ("o4-mini", 200_000),
            ("gpt-3.5-turbo-instruct", 4_096),
        ];
        if matches!(model, "gpt-4" | "gpt-4-0613" | "gpt-4-0314") {
            return Some(8_192);
        }
        if model.starts_with("gpt-3.5-turbo") && !model.contains("instruct") {
            return Some(16_385);
        }
        FAMILIES
            .iter()
            .find(|(family, _)| model.starts_with(family))
            .map(|&(_, tokens)| tokens)
    }
    const KEY_VARS: &'static [&'static str] = &["OPENAI_API_KEY"];
    const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";
    const NAMES: Dialect = Dialect::OpenAi;
    type Decoder = crate::stream::openai::Decoder;

    fn schema_dialect(&self) -> Dialect {
        if self.strict {
            Dialect::OpenAiStrict
        } else {
            Dialect::OpenAi
        }
    }

    /// Always strict: a typed answer is the grammar's, whatever the tools.
    fn output_dialect(&self) -> Dialect {
        Dialect::OpenAiStrict
    }

    fn path(&self, _options: &LlmOptions) -> String {
        "/chat/completions".to_owned()
    }

    fn stream_fields(&self, fields: &mut Map<String, Value>) {
        fields.insert("stream".into(), true.into());
        // The usage comes in a last chunk only when asked for.
        fields.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }

    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|key| ("authorization", format!("Bearer {key}")))
            .into_iter()
            .collect()
    }

    const HISTORY_KEY: &'static str = "messages";

    fn encode_history<'a>(
        &self,
        history: &[Item<'a>],
        names: &ToolNames,
        fallbacks: &mut Vec<ContentFallback>,
    ) -> WireHistory<'a> {
        let mut wire: Vec<(usize, Value)> = Vec::with_capacity(history.len());
        for (i, item) in history.iter().enumerate() {
            match item {
                Item::System(text) => wire.push((i, json!({"role": "system", "content": text}))),
                Item::ToolCall(call) => push_call(&mut wire, i, call, names),
                Item::ToolResult(result) => wire.push((i, tool_message(result, fallbacks))),
                Item::AssistantText(text) => push_assistant_text(&mut wire, i, text.message),
                Item::User(text) => wire.push((i, user_message(text, fallbacks))),
            }
        }
        WireHistory {
            messages: wire,
            system: Vec::new(),
            previous: None,
        }
    }

    fn encode_body(&self, request: &Request<'_>, _system: &[&str]) -> Map<String, Value> {
        let names = request.names();
        let options = request.options;
        let mut body = Map::new();
        body.insert("model".into(), options.model.clone().into());
        let max_key = if self.legacy_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        body.insert(max_key.into(), options.max_tokens.into());
        if let Some(t) = options.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if !request.tools.is_empty() {
            let decls: Vec<Value> = request
                .declarations()
                .map(|(t, name, schema)| {
                    let mut function = json!({
                        "name": name,
                        "description": t.description,
                        "parameters": schema,
                    });
                    if self.strict {
                        function["strict"] = true.into();
                    }
                    json!({"type": "function", "function": function})
                })
                .collect();
            body.insert("tools".into(), Value::Array(decls));
            if self.send_tool_choice {
                let choice = match &options.tool_choice {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::Any => json!("required"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Tool(name) => {
                        json!({"type": "function", "function": {"name": names.to_wire(name)}})
                    }
                };
                body.insert("tool_choice".into(), choice);
            }
        }
        if let Some(output) = request.output {
            body.insert(
                "response_format".into(),
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": output.name, "schema": output.schema, "strict": true}
                }),
            );
        }
        body
    }

    /// Call arguments stay the JSON string the model wrote: the runner
    /// parses it, so a broken one becomes an error result the model can
    /// read.
    fn decode(
        &self,
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError> {
        let malformed = |message: String| LlmError::malformed(PROVIDER, message);
        let choice = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| malformed("the response has no `choices`".into()))?;
        let message = choice
            .get("message")
            .ok_or_else(|| malformed("choices[0] has no `message`".into()))?;
        let mut turn = TurnBuilder::default();
        let content = message["content"].as_str().unwrap_or_default();
        // A refusal in strict mode comes in its own field, instead of the
        // content: it is the reply's text, so it is not lost.
        let refusal = message["refusal"].as_str().filter(|r| !r.is_empty());
        turn.push_text(match refusal {
            Some(refusal) if content.is_empty() => refusal,
            _ => content,
        });
        for (i, call) in message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (Some(id), Some(name)) = (call["id"].as_str(), call["function"]["name"].as_str())
            else {
                return Err(malformed(format!(
                    "tool_calls[{i}] has no `id` or `function.name`"
                )));
            };
            let arguments = call["function"]["arguments"].clone();
            turn.push_call(ToolRequest::new(id, names.from_wire(name), arguments), None);
        }
        let stop_reason = match choice["finish_reason"].as_str() {
            _ if refusal.is_some() => StopReason::Refusal,
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None if turn.has_calls() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        // `prompt_tokens` counts the cached part too.
        let usage = &body["usage"];
        turn.set_usage(
            Usage::new(
                usage["prompt_tokens"].as_u64().unwrap_or(0),
                usage["completion_tokens"].as_u64().unwrap_or(0),
            )
            .with_cache(
                usage["prompt_tokens_details"]["cached_tokens"].as_u64(),
                None,
            ),
        );
        let mut turn = turn.finish(session_id, PROVIDER, stop_reason);
        turn.response_id = body.get("id").and_then(Value::as_str).map(str::to_owned);
        turn.response_model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        Ok(turn)
    }
}

/// Adds a tool call to the assistant message of its turn: a turn's calls
/// ride on one message.
fn push_call(wire: &mut Vec<(usize, Value)>, item: usize, call: &Call<'_>, names: &ToolNames) {
    let arguments = match call.arguments {
        Some(Value::String(raw)) => raw.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    let call = json!({
        "id": call.id.unwrap_or_default(),
        "type": "function",
        "function": {
            "name": names.to_wire(call.tool.unwrap_or_default()),
            "arguments": arguments,
        },
    });
    if let Some((_, last)) = wire.last_mut().filter(|(_, l)| l["role"] == "assistant") {
        if !last["tool_calls"].is_array() {
            last["tool_calls"] = json!([]);
        }
        if let Some(calls) = last["tool_calls"].as_array_mut() {
            calls.push(call);
        }
    } else {
        wire.push((
            item,
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
        ));
    }
}

/// Assistant text, on the message of its turn's calls when that has none
/// yet. Chat Completions takes no blocks from the assistant.
fn push_assistant_text(wire: &mut Vec<(usize, Value)>, item: usize, m: &Message) {
    if m.content.is_empty() {
        return;
    }
    match wire.last_mut() {
        Some((_, last)) if last["role"] == "assistant" && last["content"].is_null() => {
            last["content"] = m.content.clone().into();
        }
        _ => wire.push((item, json!({"role": "assistant", "content": m.content}))),
    }
}

/// A `role: tool` message, paired with its call through `parent_id`.
fn tool_message(r: &ToolResult<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let m = r.message;
    let mut content = m.content.clone();
    // Tool messages take text only: note what was left out.
    for b in &r.blocks {
        content.push('\n');
        content.push_str(&fallback(b, m, fallbacks));
    }
    json!({"role": "tool", "tool_call_id": r.call_id(), "content": content})
}

/// A user message: plain text, or parts when it carries blocks.
fn user_message(t: &Text<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let m = t.message;
    if t.blocks.is_empty() {
        return json!({"role": "user", "content": m.content});
    }
    let mut parts = Vec::with_capacity(t.blocks.len() + 1);
    if !m.content.is_empty() {
        parts.push(json!({"type": "text", "text": m.content}));
    }
    for b in &t.blocks {
        let data_uri = |x: &Binary<'_>| format!("data:{};base64,{}", x.mime_type, x.base64);
        let part = match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Image(image) => {
                json!({"type": "image_url", "image_url": {"url": data_uri(image)}})
            }
            Block::Document(doc, name) => json!({
                "type": "file",
                "file": {"file_data": data_uri(doc), "filename": name.unwrap_or("document")},
            }),
            Block::Media(media) => match audio_format(media.mime_type) {
                Some(format) => {
                    json!({"type": "input_audio", "input_audio": {"data": media.base64, "format": format}})
                }
                None => json!({"type": "text", "text": fallback(b, m, fallbacks)}),
            },
        };
        parts.push(part);
    }
    json!({"role": "user", "content": parts})
}

/// Chat Completions takes wav and mp3 audio; nothing else of the media kind.
fn audio_format(mime: &str) -> Option<&'static str> {
    match mime {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

/// Records a block that cannot go where it is, and returns its note.
fn fallback(b: &Block<'_>, m: &Message, fallbacks: &mut Vec<ContentFallback>) -> String {
    let x = match b {
        Block::Text(text) => return (*text).to_owned(),
        Block::Image(x) | Block::Document(x, _) | Block::Media(x) => x,
    };
    fallbacks.push(ContentFallback {
        provider: PROVIDER,
        kind: b.kind(),
        mime_type: x.mime_type.to_owned(),
        message_id: m.id.clone(),
    });
    b.fallback_text(PROVIDER)
}
