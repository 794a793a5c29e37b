//! [`ClaudeLlm`]: the Anthropic Messages API, and the one place where kesoku
//! history becomes Claude's wire format and back.

use std::collections::HashMap;

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

const PROVIDER: &str = "Claude";

/// The Anthropic Messages API.
///
/// Configured like the official SDK: `ANTHROPIC_API_KEY` and
/// `ANTHROPIC_BASE_URL`, or the builder methods.
///
/// ```
/// let claude = kesoku_llm::ClaudeLlm::new("sk-ant-test").with_base_url("http://127.0.0.1:9");
/// assert!(!format!("{claude:?}").contains("sk-ant-test"));
/// ```
#[derive(Debug)]
pub struct ClaudeLlm {
    endpoint: Endpoint,
}

impl ClaudeLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The `anthropic-version` header sent.
    pub const API_VERSION: &'static str = "2023-06-01";

    /// A backend with this key and the default address.
    pub fn new(api_key: impl Into<String>) -> Self {
        let key = Some(ApiKey::new(api_key));
        ClaudeLlm {
            endpoint: Endpoint::new(PROVIDER, key, Self::DEFAULT_BASE_URL),
        }
    }

    /// A backend configured from `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`.
    pub fn from_env() -> Result<Self, LlmError> {
        let endpoint = Endpoint::from_env(
            PROVIDER,
            &["ANTHROPIC_API_KEY"],
            "ANTHROPIC_BASE_URL",
            Self::DEFAULT_BASE_URL,
        )?;
        Ok(ClaudeLlm { endpoint })
    }

    /// Sets the base address (for proxies and compatible servers).
    #[must_use]
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.set_base_url(&url.into());
        self
    }

    /// Sets timeouts and the retry policy.
    #[must_use]
    pub fn with_http_options(mut self, options: HttpOptions) -> Self {
        self.endpoint.set_http_options(options);
        self
    }

    /// Converts history, tools and options into Claude's request body.
    pub fn request(
        &self,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> WireRequest {
        let names = ToolNames::new(Dialect::Anthropic, tools.iter().map(|t| t.name.as_str()));
        let mut fallbacks = Vec::new();
        let mut system: Vec<String> = options.system.iter().cloned().collect();
        let calls = call_index(messages);
        let mut wire: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for m in messages {
            let (role, blocks) = match (m.role, m.kind) {
                (Role::System, _) => {
                    system.push(m.content.clone());
                    continue;
                }
                (_, MessageType::Thought) => continue,
                (Role::Assistant, MessageType::ToolCall) => {
                    let name = m.meta_str(keys::TOOL_NAME).unwrap_or_default();
                    let input = match m.metadata.get(keys::ARGUMENTS) {
                        Some(Value::String(raw)) => {
                            serde_json::from_str(raw).unwrap_or_else(|_| json!({}))
                        }
                        Some(v @ Value::Object(_)) => v.clone(),
                        _ => json!({}),
                    };
                    let block = json!({
                        "type": "tool_use",
                        "id": m.meta_str(keys::CALL_ID).unwrap_or_default(),
                        "name": names.to_wire(name),
                        "input": input,
                    });
                    ("assistant", vec![block])
                }
                (Role::Tool, _) | (_, MessageType::ToolResult) => {
                    ("user", vec![tool_result(m, &calls, &mut fallbacks)])
                }
                (Role::Assistant, _) => ("assistant", text_blocks(m, &mut fallbacks)),
                (Role::User, _) => ("user", text_blocks(m, &mut fallbacks)),
            };
            if blocks.is_empty() {
                continue;
            }
            match wire.last_mut() {
                Some((last, content)) if *last == role => content.extend(blocks),
                _ => wire.push((role, blocks)),
            }
        }
        let messages: Vec<Value> = wire
            .into_iter()
            .map(|(role, mut content)| {
                // Claude wants a turn's tool results before anything else.
                content.sort_by_key(|b| b["type"] != "tool_result");
                json!({"role": role, "content": content})
            })
            .collect();

        let mut body = Map::new();
        body.insert("model".into(), options.model.clone().into());
        body.insert("max_tokens".into(), options.max_tokens.into());
        if !system.is_empty() {
            body.insert("system".into(), system.join("\n\n").into());
        }
        body.insert("messages".into(), Value::Array(messages));
        if options.temperature.is_some() {
            // The current Messages API (anthropic SDK 2.15) has no sampling
            // parameters; only older models honour them.
            tracing::warn!(
                "Claude: `temperature` is not part of the current Messages API and is not sent"
            );
        }
        if !tools.is_empty() {
            let decls: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let lowered = lower(Dialect::Anthropic, &t.name, &t.parameters);
                    json!({
                        "name": names.to_wire(&t.name),
                        "description": t.description,
                        "input_schema": lowered.schema,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(decls));
            let choice = match &options.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::Any => json!({"type": "any"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": names.to_wire(name)}),
            };
            body.insert("tool_choice".into(), choice);
        }
        WireRequest {
            body: Value::Object(body),
            fallbacks,
            names,
        }
    }

    /// Reads a Messages API response into an assistant turn.
    pub fn parse_response(
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError> {
        let malformed = |message: String| LlmError::malformed(PROVIDER, message);
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("the response has no `content` array".into()))?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for (i, block) in content.iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
                Some("tool_use") => {
                    let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str())
                    else {
                        return Err(malformed(format!(
                            "content[{i}] is a tool_use without `id` or `name`"
                        )));
                    };
                    let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                    calls.push((ToolRequest::new(id, names.from_wire(name), input), None));
                }
                // Thinking and server-tool blocks carry nothing kesoku runs.
                _ => {}
            }
        }
        let stop_reason = match body.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("stop_sequence") => StopReason::StopSequence,
            Some("refusal") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None => return Err(malformed("the response has no `stop_reason`".into())),
        };
        let usage = Usage {
            input_tokens: body["usage"]["input_tokens"].as_u64().unwrap_or(0),
            output_tokens: body["usage"]["output_tokens"].as_u64().unwrap_or(0),
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

impl Llm for ClaudeLlm {
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
            let headers = [
                (
                    "x-api-key",
                    self.endpoint.key().unwrap_or_default().to_owned(),
                ),
                ("anthropic-version", Self::API_VERSION.to_owned()),
            ];
            let body = self
                .endpoint
                .post("/v1/messages", &headers, &request.body)
                .await?;
            let mut turn = Self::parse_response(session_id, &body, &request.names)?;
            turn.fallbacks = request.fallbacks;
            Ok(turn)
        })
    }
}

/// Tool-call message id → its call id, for pairing results via `parent_id`.
fn call_index(messages: &[Message]) -> HashMap<&str, &str> {
    messages
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall)
        .filter_map(|m| Some((m.id.as_str(), m.meta_str(keys::CALL_ID)?)))
        .collect()
}

fn tool_result(
    m: &Message,
    calls: &HashMap<&str, &str>,
    fallbacks: &mut Vec<ContentFallback>,
) -> Value {
    let tool_use_id = m
        .parent_id
        .as_deref()
        .and_then(|p| calls.get(p).copied())
        .or_else(|| m.meta_str(keys::CALL_ID))
        .unwrap_or_default();
    let blocks = content_blocks(m);
    let content = if blocks.is_empty() {
        Value::String(m.content.clone())
    } else {
        let mut parts = Vec::new();
        if !m.content.is_empty() {
            parts.push(json!({"type": "text", "text": m.content}));
        }
        parts.extend(blocks.iter().map(|b| block(b, m, fallbacks)));
        Value::Array(parts)
    };
    let mut v = json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
    if m.metadata.contains_key(keys::TOOL_ERROR) {
        v["is_error"] = true.into();
    }
    v
}

fn text_blocks(m: &Message, fallbacks: &mut Vec<ContentFallback>) -> Vec<Value> {
    let mut out = Vec::new();
    if !m.content.trim().is_empty() {
        out.push(json!({"type": "text", "text": m.content}));
    }
    out.extend(content_blocks(m).iter().map(|b| block(b, m, fallbacks)));
    out
}

/// One content block in Claude's form; audio and video become a note.
fn block(b: &ContentBlock, m: &Message, fallbacks: &mut Vec<ContentFallback>) -> Value {
    match b {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image { mime_type, .. } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": b.base64()},
        }),
        ContentBlock::Document {
            mime_type, data, ..
        } if mime_type == "text/plain" => json!({
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": String::from_utf8_lossy(data)},
        }),
        ContentBlock::Document { mime_type, .. } => json!({
            "type": "document",
            "source": {"type": "base64", "media_type": mime_type, "data": b.base64()},
        }),
        ContentBlock::Media { mime_type, .. } => {
            fallbacks.push(ContentFallback {
                provider: PROVIDER,
                kind: b.kind(),
                mime_type: mime_type.clone(),
                message_id: m.id.clone(),
            });
            json!({"type": "text", "text": b.fallback_text(PROVIDER)})
        }
    }
}
