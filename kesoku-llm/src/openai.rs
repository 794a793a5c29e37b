//! [`OpenAiLlm`]: Chat Completions, for OpenAI and the servers that speak
//! its protocol (Ollama, vLLM, llama.cpp server), and the one place where
//! kesoku history becomes its wire format and back.

use kesoku_core::lowering::{Dialect, ToolNames, lower};
use kesoku_core::{Message, MessageType, Role, ToolRequest, keys};
use serde_json::{Map, Value, json};

use kesoku_core::ContentBlock;

use crate::content::ContentFallback;
use crate::endpoint::Endpoint;
use crate::error::LlmError;
use crate::http::HttpOptions;
use crate::key::ApiKey;
use crate::llm::{
    AssistantTurn, Llm, LlmFuture, LlmOptions, StopReason, ToolChoice, ToolDeclaration, Usage,
    WireRequest, content_blocks, turn_messages,
};

const PROVIDER: &str = "OpenAI";

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
#[derive(Debug)]
pub struct OpenAiLlm {
    endpoint: Endpoint,
    strict: bool,
    send_tool_choice: bool,
    legacy_max_tokens: bool,
}

impl OpenAiLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// OpenAI with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        let key = Some(ApiKey::new(api_key));
        OpenAiLlm::with_endpoint(Endpoint::new(PROVIDER, key, Self::DEFAULT_BASE_URL))
    }

    fn with_endpoint(endpoint: Endpoint) -> Self {
        OpenAiLlm {
            endpoint,
            strict: false,
            send_tool_choice: true,
            legacy_max_tokens: false,
        }
    }

    /// A compatible server at `base_url` (ending in `/v1`): no key, no
    /// `tool_choice`, and `max_tokens` rather than `max_completion_tokens`.
    pub fn compatible(base_url: impl Into<String>) -> Self {
        let mut llm = OpenAiLlm::with_endpoint(Endpoint::new(PROVIDER, None, &base_url.into()));
        llm.send_tool_choice = false;
        llm.legacy_max_tokens = true;
        llm
    }

    /// OpenAI configured from `OPENAI_API_KEY` and `OPENAI_BASE_URL`.
    pub fn from_env() -> Result<Self, LlmError> {
        let endpoint = Endpoint::from_env(
            PROVIDER,
            &["OPENAI_API_KEY"],
            "OPENAI_BASE_URL",
            Self::DEFAULT_BASE_URL,
        )?;
        Ok(OpenAiLlm::with_endpoint(endpoint))
    }

    /// Sets the base address.
    #[must_use]
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.set_base_url(&url.into());
        self
    }

    /// Sends no `Authorization` header (local servers).
    #[must_use]
    pub fn without_key(mut self) -> Self {
        self.endpoint.clear_key();
        self
    }

    /// Strict mode: schemas lowered to OpenAI's strict dialect and sent
    /// with `strict: true`.
    #[must_use]
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Whether to send `tool_choice` (Ollama rejects it).
    #[must_use]
    pub fn with_tool_choice(mut self, send: bool) -> Self {
        self.send_tool_choice = send;
        self
    }

    /// Sends `max_tokens` (older servers) instead of `max_completion_tokens`.
    #[must_use]
    pub fn with_legacy_max_tokens(mut self, legacy: bool) -> Self {
        self.legacy_max_tokens = legacy;
        self
    }

    /// Sets timeouts and the retry policy.
    #[must_use]
    pub fn with_http_options(mut self, options: HttpOptions) -> Self {
        self.endpoint.set_http_options(options);
        self
    }

    /// Converts history, tools and options into a request body.
    pub fn request(
        &self,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> WireRequest {
        let names = ToolNames::new(Dialect::OpenAi, tools.iter().map(|t| t.name.as_str()));
        let mut fallbacks = Vec::new();
        let mut wire: Vec<Value> = Vec::new();
        if let Some(system) = &options.system {
            wire.push(json!({"role": "system", "content": system}));
        }
        for m in messages {
            match (m.role, m.kind) {
                (_, MessageType::Thought) => {}
                (Role::System, _) => wire.push(json!({"role": "system", "content": m.content})),
                (Role::Assistant, MessageType::ToolCall) => push_call(&mut wire, m, &names),
                (Role::Tool, _) | (_, MessageType::ToolResult) => {
                    wire.push(tool_message(m, messages, &mut fallbacks));
                }
                (Role::Assistant, _) => {
                    if m.content.is_empty() {
                        continue;
                    }
                    match wire.last_mut() {
                        Some(last) if last["role"] == "assistant" && last["content"].is_null() => {
                            last["content"] = m.content.clone().into();
                        }
                        _ => wire.push(json!({"role": "assistant", "content": m.content})),
                    }
                }
                (Role::User, _) => wire.push(user_message(m, &mut fallbacks)),
            }
        }

        let mut body = Map::new();
        body.insert("model".into(), options.model.clone().into());
        body.insert("messages".into(), Value::Array(wire));
        let max_key = if self.legacy_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        body.insert(max_key.into(), options.max_tokens.into());
        if let Some(t) = options.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if !tools.is_empty() {
            let dialect = if self.strict {
                Dialect::OpenAiStrict
            } else {
                Dialect::OpenAi
            };
            let decls: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let mut function = json!({
                        "name": names.to_wire(&t.name),
                        "description": t.description,
                        "parameters": lower(dialect, &t.name, &t.parameters).schema,
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
        WireRequest {
            body: Value::Object(body),
            fallbacks,
            names,
        }
    }

    /// Reads a Chat Completions response into an assistant turn. Call
    /// arguments stay the JSON string the model wrote: the runner parses
    /// it, so a broken one becomes an error result the model can read.
    pub fn parse_response(
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
        let text = message["content"].as_str().unwrap_or_default().to_owned();
        let mut calls = Vec::new();
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
            calls.push((ToolRequest::new(id, names.from_wire(name), arguments), None));
        }
        let stop_reason = match choice["finish_reason"].as_str() {
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None if !calls.is_empty() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        let usage = Usage {
            input_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            output_tokens: body["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        };
        let messages = turn_messages(session_id, PROVIDER, &text, &calls, None);
        Ok(AssistantTurn {
            text,
            tool_calls: calls.into_iter().map(|(r, _)| r).collect(),
            stop_reason,
            usage,
            messages,
            fallbacks: Vec::new(),
        })
    }
}

impl Llm for OpenAiLlm {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        Box::pin(async move {
            let request = self.request(messages, tools, options);
            let headers: Vec<_> = self
                .endpoint
                .key()
                .map(|key| ("authorization", format!("Bearer {key}")))
                .into_iter()
                .collect();
            let body = self
                .endpoint
                .post("/chat/completions", &headers, &request.body)
                .await?;
            let mut turn = Self::parse_response(session_id, &body, &request.names)?;
            turn.fallbacks = request.fallbacks;
            Ok(turn)
        })
    }
}

/// Adds a tool call to the assistant message of its turn: a turn's calls
/// ride on one message.
fn push_call(wire: &mut Vec<Value>, m: &Message, names: &ToolNames) {
    let arguments = match m.metadata.get(keys::ARGUMENTS) {
        Some(Value::String(raw)) => raw.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    let call = json!({
        "id": m.meta_str(keys::CALL_ID).unwrap_or_default(),
        "type": "function",
        "function": {
            "name": names.to_wire(m.meta_str(keys::TOOL_NAME).unwrap_or_default()),
            "arguments": arguments,
        },
    });
    if let Some(last) = wire.last_mut().filter(|l| l["role"] == "assistant") {
        if !last["tool_calls"].is_array() {
            last["tool_calls"] = json!([]);
        }
        if let Some(calls) = last["tool_calls"].as_array_mut() {
            calls.push(call);
        }
    } else {
        wire.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
    }
}

/// A `role: tool` message, paired with its call through `parent_id`.
fn tool_message(m: &Message, messages: &[Message], fallbacks: &mut Vec<ContentFallback>) -> Value {
    let call_id = m
        .parent_id
        .as_deref()
        .and_then(|p| messages.iter().find(|c| c.id == p))
        .and_then(|c| c.meta_str(keys::CALL_ID))
        .or_else(|| m.meta_str(keys::CALL_ID))
        .unwrap_or_default();
    let mut content = m.content.clone();
    // Tool messages take text only: note what was left out.
    for b in content_blocks(m) {
        content.push('\n');
        content.push_str(&fallback(&b, m, fallbacks));
    }
    json!({"role": "tool", "tool_call_id": call_id, "content": content})
}

/// A user message: plain text, or parts when it carries blocks.
fn user_message(m: &Message, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let blocks = content_blocks(m);
    if blocks.is_empty() {
        return json!({"role": "user", "content": m.content});
    }
    let mut parts = Vec::new();
    if !m.content.is_empty() {
        parts.push(json!({"type": "text", "text": m.content}));
    }
    for b in &blocks {
        let data_uri = || {
            format!(
                "data:{};base64,{}",
                b.mime_type().unwrap_or_default(),
                b.base64().unwrap_or_default()
            )
        };
        let part = match b {
            ContentBlock::Text { text } => json!({"type": "text", "text": text}),
            ContentBlock::Image { .. } => {
                json!({"type": "image_url", "image_url": {"url": data_uri()}})
            }
            ContentBlock::Document { name, .. } => json!({
                "type": "file",
                "file": {"file_data": data_uri(), "filename": name.clone().unwrap_or_else(|| "document".into())},
            }),
            ContentBlock::Media { mime_type, .. } => match audio_format(mime_type) {
                Some(format) => {
                    json!({"type": "input_audio", "input_audio": {"data": b.base64(), "format": format}})
                }
                None => {
                    json!({"type": "text", "text": fallback(b, m, fallbacks)})
                }
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
fn fallback(b: &ContentBlock, m: &Message, fallbacks: &mut Vec<ContentFallback>) -> String {
    if let ContentBlock::Text { text } = b {
        return text.clone();
    }
    fallbacks.push(ContentFallback {
        provider: PROVIDER,
        kind: b.kind(),
        mime_type: b.mime_type().unwrap_or_default().to_owned(),
        message_id: m.id.clone(),
    });
    b.fallback_text(PROVIDER)
}
