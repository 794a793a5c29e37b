//! [`ClaudeLlm`]: the Anthropic Messages API's wire format.

use kesoku_core::lowering::{Dialect, ToolNames};
use kesoku_core::{Message, ToolRequest};
use serde_json::{Map, Value, json};

use crate::backend::public_backend;
use crate::blocks::Block;
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history::{Call, Item, Text, ToolResult};
use crate::options::ToolChoice;
use crate::turn::{AssistantTurn, StopReason, TurnBuilder, Usage};
use crate::wire::{Request, WireFormat, WireHistory, push_merged};

const PROVIDER: &str = "Claude";

public_backend! {
    /// The Anthropic Messages API.
    ///
    /// Configured like the official SDK: `ANTHROPIC_API_KEY` and
    /// `ANTHROPIC_BASE_URL`, or the builder methods.
    ///
    /// ```
    /// let claude = kesoku_llm::ClaudeLlm::new("sk-ant-test").with_base_url("http://127.0.0.1:9");
    /// assert!(!format!("{claude:?}").contains("sk-ant-test"));
    /// ```
    ClaudeLlm(Messages), env: "`ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`"
}

impl ClaudeLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The `anthropic-version` header sent.
    pub const API_VERSION: &'static str = "2023-06-01";
}

/// The Messages API's wire format.
#[derive(Debug, Default)]
pub(crate) struct Messages;

impl WireFormat for Messages {
    const NAME: &'static str = PROVIDER;
    const DEFAULT_BASE_URL: &'static str = ClaudeLlm::DEFAULT_BASE_URL;
    const DEFAULT_MODEL: &'static str = "claude-sonnet-4-5";
    // Every Claude model takes 200,000 tokens (more only with a beta
    // header kesoku does not send).
    fn context_window(model: &str) -> Option<u64> {
        model.starts_with("claude-").then_some(200_000)
    }
    const KEY_VARS: &'static [&'static str] = &["ANTHROPIC_API_KEY"];
    const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";
    const NAMES: Dialect = Dialect::Anthropic;
    type Decoder = crate::stream::claude::Decoder;

    fn schema_dialect(&self) -> Dialect {
        Dialect::Anthropic
    }

    fn output_dialect(&self) -> Dialect {
        Dialect::AnthropicStructured
    }

    fn path(&self, _options: &crate::options::LlmOptions) -> String {
        "/v1/messages".to_owned()
    }

    fn stream_fields(&self, fields: &mut Map<String, Value>) {
        fields.insert("stream".into(), true.into());
    }

    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        vec![
            ("x-api-key", key.unwrap_or_default().to_owned()),
            ("anthropic-version", ClaudeLlm::API_VERSION.to_owned()),
        ]
    }

    const HISTORY_KEY: &'static str = "messages";

    fn encode_history<'a>(
        &self,
        history: &[Item<'a>],
        names: &ToolNames,
        fallbacks: &mut Vec<ContentFallback>,
    ) -> WireHistory<'a> {
        let mut system = Vec::new();
        let mut wire: Vec<(usize, &'static str, Vec<Value>)> = Vec::new();
        for (i, item) in history.iter().enumerate() {
            let (role, blocks) = match item {
                Item::System(text) => {
                    system.push((i, *text));
                    continue;
                }
                Item::ToolCall(call) => ("assistant", vec![tool_use(call, names)]),
                Item::ToolResult(result) => ("user", vec![tool_result(result, fallbacks)]),
                Item::AssistantText(text) => ("assistant", text_blocks(text, fallbacks)),
                Item::User(text) => ("user", text_blocks(text, fallbacks)),
            };
            if !blocks.is_empty() {
                push_merged(&mut wire, i, role, blocks);
            }
        }
        let messages = wire
            .into_iter()
            .map(|(i, role, mut content)| {
                // Claude wants a turn's tool results before anything else.
                content.sort_by_key(|b| b["type"] != "tool_result");
                (i, json!({"role": role, "content": content}))
            })
            .collect();
        WireHistory {
            messages,
            system,
            previous: None,
        }
    }

    fn encode_body(&self, request: &Request<'_>, system: &[&str]) -> Map<String, Value> {
        let names = request.names();
        let options = request.options;
        let mut body = Map::new();
        body.insert("model".into(), options.model.clone().into());
        body.insert("max_tokens".into(), options.max_tokens.into());
        if !system.is_empty() {
            body.insert("system".into(), system.join("\n\n").into());
        }
        if options.temperature.is_some() {
            // The current Messages API (anthropic SDK 2.15) has no sampling
            // parameters; only older models honour them.
            tracing::warn!(
                "Claude: `temperature` is not part of the current Messages API and is not sent"
            );
        }
        if !request.tools.is_empty() {
            let decls: Vec<Value> = request
                .declarations()
                .map(|(t, name, schema)| {
                    json!({
                        "name": name,
                        "description": t.description,
                        "input_schema": schema,
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
        if let Some(output) = request.output {
            body.insert(
                "output_config".into(),
                json!({"format": {"type": "json_schema", "schema": output.schema}}),
            );
        }
        body
    }

    fn decode(
        &self,
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError> {
        let malformed = |message: String| LlmError::malformed(PROVIDER, message);
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("the response has no `content` array".into()))?;
        let mut turn = TurnBuilder::default();
        for (i, block) in content.iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => turn.push_text(block["text"].as_str().unwrap_or_default()),
                Some("tool_use") => {
                    let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str())
                    else {
                        return Err(malformed(format!(
                            "content[{i}] is a tool_use without `id` or `name`"
                        )));
                    };
                    let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                    turn.push_call(ToolRequest::new(id, names.from_wire(name), input), None);
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
        turn.set_usage(usage(&body["usage"]));
        let mut turn = turn.finish(session_id, PROVIDER, stop_reason);
        turn.response_id = body.get("id").and_then(Value::as_str).map(str::to_owned);
        turn.response_model = body.get("model").and_then(Value::as_str).map(str::to_owned);
        Ok(turn)
    }
}

fn tool_use(call: &Call<'_>, names: &ToolNames) -> Value {
    json!({
        "type": "tool_use",
        "id": call.id.unwrap_or_default(),
        "name": names.to_wire(call.tool.unwrap_or_default()),
        "input": call.arguments_object(),
    })
}

fn tool_result(r: &ToolResult<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let m = r.message;
    let content = if r.blocks.is_empty() {
        Value::String(m.content.clone())
    } else {
        let mut parts = Vec::with_capacity(r.blocks.len() + 1);
        if !m.content.is_empty() {
            parts.push(json!({"type": "text", "text": m.content}));
        }
        parts.extend(r.blocks.iter().map(|b| block(b, m, fallbacks)));
        Value::Array(parts)
    };
    let mut v = json!({"type": "tool_result", "tool_use_id": r.call_id(), "content": content});
    if r.is_error() {
        v["is_error"] = true.into();
    }
    v
}

fn text_blocks(t: &Text<'_>, fallbacks: &mut Vec<ContentFallback>) -> Vec<Value> {
    let m = t.message;
    let mut out = Vec::with_capacity(t.blocks.len() + 1);
    if !m.content.trim().is_empty() {
        out.push(json!({"type": "text", "text": m.content}));
    }
    out.extend(t.blocks.iter().map(|b| block(b, m, fallbacks)));
    out
}

/// One content block in Claude's form; audio and video become a note.
fn block(b: &Block<'_>, m: &Message, fallbacks: &mut Vec<ContentFallback>) -> Value {
    match b {
        Block::Text(text) => json!({"type": "text", "text": text}),
        Block::Image(image) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.base64},
        }),
        Block::Document(doc, _) if doc.mime_type == "text/plain" => json!({
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": String::from_utf8_lossy(&doc.bytes())},
        }),
        Block::Document(doc, _) => json!({
            "type": "document",
            "source": {"type": "base64", "media_type": doc.mime_type, "data": doc.base64},
        }),
        Block::Media(media) => {
            fallbacks.push(ContentFallback {
                provider: PROVIDER,
                kind: b.kind(),
                mime_type: media.mime_type.to_owned(),
                message_id: m.id.clone(),
            });
            json!({"type": "text", "text": b.fallback_text(PROVIDER)})
        }
    }
}

/// Claude's `usage`: its `input_tokens` are the part of the request read
/// neither from nor into the cache, so the cached parts are added back.
fn usage(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let read = count("cache_read_input_tokens");
    let write = count("cache_creation_input_tokens");
    let input = count("input_tokens")
        .unwrap_or(0)
        .saturating_add(read.unwrap_or(0))
        .saturating_add(write.unwrap_or(0));
    Usage::new(input, count("output_tokens").unwrap_or(0)).with_cache(read, write)
}
