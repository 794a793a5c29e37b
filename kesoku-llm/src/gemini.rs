//! [`GeminiLlm`]: `generateContent`, and the one place where kesoku history
//! becomes Gemini's wire format and back, replaying each part's
//! `thoughtSignature` with the part it came on.

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
    AssistantTurn, Llm, LlmFuture, LlmOptions, PROVIDER_KEY, StopReason, ToolChoice,
    ToolDeclaration, Usage, WireRequest, content_blocks, turn_messages,
};

const PROVIDER: &str = "Gemini";
/// Set in a call's provider fields when Gemini sent no call id and kesoku
/// made one up for pairing: it is never sent back.
const SYNTHETIC_ID: &str = "syntheticId";
const THOUGHT_SIGNATURE: &str = "thoughtSignature";
/// The model's parts as they came, replayed unchanged.
const RAW_PARTS: &str = "parts";
/// Which model turn a message came from.
const TURN: &str = "turn";

/// Gemini's `generateContent`.
///
/// Configured like the official SDK: `GEMINI_API_KEY` (falling back to
/// `GOOGLE_API_KEY`) and `GOOGLE_GEMINI_BASE_URL`, or the builder methods.
/// Tools are declared with `parametersJsonSchema`; set
/// [`with_legacy_parameters`](Self::with_legacy_parameters) for the older
/// OpenAPI-subset `parameters`.
#[derive(Debug)]
pub struct GeminiLlm {
    endpoint: Endpoint,
    legacy_parameters: bool,
}

impl GeminiLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com";

    /// Gemini with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        let key = Some(ApiKey::new(api_key));
        GeminiLlm {
            endpoint: Endpoint::new(PROVIDER, key, Self::DEFAULT_BASE_URL),
            legacy_parameters: false,
        }
    }

    /// Gemini configured from the environment, as the official SDK is.
    pub fn from_env() -> Result<Self, LlmError> {
        let endpoint = Endpoint::from_env(
            PROVIDER,
            &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            "GOOGLE_GEMINI_BASE_URL",
            Self::DEFAULT_BASE_URL,
        )?;
        Ok(GeminiLlm {
            endpoint,
            legacy_parameters: false,
        })
    }

    /// Sets the base address.
    #[must_use]
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.set_base_url(&url.into());
        self
    }

    /// Declares tools with the legacy OpenAPI-subset `parameters`, lowered
    /// by kesoku's sanitizer, instead of `parametersJsonSchema`.
    #[must_use]
    pub fn with_legacy_parameters(mut self, legacy: bool) -> Self {
        self.legacy_parameters = legacy;
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
        let names = ToolNames::new(
            Dialect::GeminiJsonSchema,
            tools.iter().map(|t| t.name.as_str()),
        );
        let mut fallbacks = Vec::new();
        let mut system: Vec<String> = options.system.iter().cloned().collect();
        let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
        // The turn whose parts were replayed verbatim: its other messages are
        // already in them.
        let mut replayed: Option<&str> = None;
        for m in messages {
            let fields = provider_fields(m);
            let turn = fields.and_then(|f| f.get(TURN)).and_then(Value::as_str);
            if turn.is_some() && turn == replayed {
                continue;
            }
            if let Some(raw) = fields
                .and_then(|f| f.get(RAW_PARTS))
                .and_then(Value::as_array)
            {
                // Gemini wants its parts back unchanged: order, text split
                // and every signature as they came.
                replayed = turn;
                match contents.last_mut() {
                    Some((last, p)) if *last == "model" => p.extend(raw.iter().cloned()),
                    _ => contents.push(("model", raw.clone())),
                }
                continue;
            }
            let (role, parts) = match (m.role, m.kind) {
                (Role::System, _) => {
                    system.push(m.content.clone());
                    continue;
                }
                (_, MessageType::Thought) => continue,
                (Role::Assistant, MessageType::ToolCall) => {
                    ("model", vec![function_call(m, &names)])
                }
                (Role::Tool, _) | (_, MessageType::ToolResult) => {
                    ("user", function_response(m, messages, &names))
                }
                (Role::Assistant, _) => ("model", text_parts(m, &mut fallbacks)),
                (Role::User, _) => ("user", text_parts(m, &mut fallbacks)),
            };
            if parts.is_empty() {
                continue;
            }
            match contents.last_mut() {
                Some((last, p)) if *last == role => p.extend(parts),
                _ => contents.push((role, parts)),
            }
        }
        let mut body = Map::new();
        body.insert(
            "contents".into(),
            contents
                .into_iter()
                .map(|(role, mut parts)| {
                    // A turn's function responses first, as many as it had calls.
                    parts.sort_by_key(|p| p.get("functionResponse").is_none());
                    json!({"role": role, "parts": parts})
                })
                .collect(),
        );
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        if !tools.is_empty() {
            let decls = self.declarations(tools, &names);
            body.insert("tools".into(), json!([{"functionDeclarations": decls}]));
            let config = match &options.tool_choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::Any => json!({"mode": "ANY"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Tool(name) => {
                    json!({"mode": "ANY", "allowedFunctionNames": [names.to_wire(name)]})
                }
            };
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": config}),
            );
        }
        let mut generation = json!({"maxOutputTokens": options.max_tokens});
        if let Some(t) = options.temperature {
            generation["temperature"] = json!(t);
        }
        body.insert("generationConfig".into(), generation);
        WireRequest {
            body: Value::Object(body),
            fallbacks,
            names,
        }
    }

    /// The function declarations, lowered to the chosen dialect.
    fn declarations(&self, tools: &[ToolDeclaration], names: &ToolNames) -> Vec<Value> {
        let (dialect, key) = if self.legacy_parameters {
            (Dialect::GeminiOpenApi, "parameters")
        } else {
            (Dialect::GeminiJsonSchema, "parametersJsonSchema")
        };
        tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": names.to_wire(&t.name), "description": t.description});
                // Gemini rejects an OBJECT without properties: a tool
                // without arguments is declared without a schema.
                let has_args = t.parameters["properties"]
                    .as_object()
                    .is_some_and(|p| !p.is_empty());
                if has_args {
                    d[key] = lower(dialect, &t.name, &t.parameters).schema;
                }
                d
            })
            .collect()
    }

    /// Reads a `generateContent` response into an assistant turn, keeping
    /// each part's `thoughtSignature` on the message made from that part.
    pub fn parse_response(
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError> {
        let malformed = |message: String| LlmError::malformed(PROVIDER, message);
        let candidate = body
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| {
                let blocked = body["promptFeedback"]["blockReason"].as_str();
                malformed(blocked.map_or_else(
                    || "the response has no `candidates`".to_owned(),
                    |r| format!("the prompt was blocked ({r})"),
                ))
            })?;
        let parts = candidate["content"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut text = String::new();
        let mut text_fields: Option<Map<String, Value>> = None;
        let mut calls = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let signature = part.get(THOUGHT_SIGNATURE).cloned();
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(call) = part.get("functionCall") {
                let Some(name) = call["name"].as_str() else {
                    return Err(malformed(format!("parts[{i}].functionCall has no `name`")));
                };
                let mut fields = Map::new();
                let id = if let Some(id) = call["id"].as_str() {
                    id.to_owned()
                } else {
                    fields.insert(SYNTHETIC_ID.into(), true.into());
                    format!("gemini-call-{i}-{}", short_id())
                };
                if let Some(sig) = signature {
                    fields.insert(THOUGHT_SIGNATURE.into(), sig);
                }
                let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                calls.push((
                    ToolRequest::new(id, names.from_wire(name), args),
                    Some(fields),
                ));
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                text.push_str(t);
                if let Some(sig) = signature {
                    text_fields
                        .get_or_insert_with(Map::new)
                        .insert(THOUGHT_SIGNATURE.into(), sig);
                }
            }
        }
        let stop_reason = match candidate["finishReason"].as_str() {
            _ if !calls.is_empty() => StopReason::ToolUse,
            Some("STOP") | None => StopReason::EndTurn,
            Some("MAX_TOKENS") => StopReason::MaxTokens,
            Some("SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII") => {
                StopReason::Refusal
            }
            Some(other) => StopReason::Other(other.to_owned()),
        };
        let usage = Usage {
            input_tokens: body["usageMetadata"]["promptTokenCount"]
                .as_u64()
                .unwrap_or(0),
            output_tokens: body["usageMetadata"]["candidatesTokenCount"]
                .as_u64()
                .unwrap_or(0),
        };
        let mut messages = turn_messages(session_id, PROVIDER, &text, &calls, text_fields);
        // Keep the parts exactly as they came, for replay, on the turn's
        // first message; mark every message of the turn.
        let turn_id = messages.first().map(|m| m.id.clone()).unwrap_or_default();
        for (i, m) in messages.iter_mut().enumerate() {
            let entry = m
                .metadata
                .entry(PROVIDER_KEY)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = entry {
                fields.insert(TURN.into(), turn_id.clone().into());
                if i == 0 {
                    fields.insert(RAW_PARTS.into(), Value::Array(parts.clone()));
                }
            }
        }
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

impl Llm for GeminiLlm {
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
            let headers = [(
                "x-goog-api-key",
                self.endpoint.key().unwrap_or_default().to_owned(),
            )];
            let path = format!("/v1beta/models/{}:generateContent", options.model);
            let body = self.endpoint.post(&path, &headers, &request.body).await?;
            let mut turn = Self::parse_response(session_id, &body, &request.names)?;
            turn.fallbacks = request.fallbacks;
            Ok(turn)
        })
    }
}

fn provider_fields(m: &Message) -> Option<&Map<String, Value>> {
    m.metadata.get(PROVIDER_KEY).and_then(Value::as_object)
}

/// A model `functionCall` part, with its own signature and no other.
fn function_call(m: &Message, names: &ToolNames) -> Value {
    let fields = provider_fields(m);
    let args = match m.metadata.get(keys::ARGUMENTS) {
        Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or_else(|_| json!({})),
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({}),
    };
    let mut call = json!({"name": names.to_wire(m.meta_str(keys::TOOL_NAME).unwrap_or_default()), "args": args});
    let synthetic = fields.is_some_and(|f| f.contains_key(SYNTHETIC_ID));
    if let (false, Some(id)) = (synthetic, m.meta_str(keys::CALL_ID)) {
        call["id"] = id.into();
    }
    let mut part = json!({"functionCall": call});
    if let Some(sig) = fields.and_then(|f| f.get(THOUGHT_SIGNATURE)) {
        part[THOUGHT_SIGNATURE] = sig.clone();
    }
    part
}

/// A `functionResponse` part, plus the result's media as `inlineData`.
fn function_response(m: &Message, messages: &[Message], names: &ToolNames) -> Vec<Value> {
    let call = m
        .parent_id
        .as_deref()
        .and_then(|p| messages.iter().find(|c| c.id == p));
    let name = call
        .and_then(|c| c.meta_str(keys::TOOL_NAME))
        .or_else(|| m.meta_str(keys::TOOL_NAME))
        .unwrap_or(&m.sender);
    let response = match m.metadata.get(keys::TOOL_ERROR) {
        Some(error) => json!({"error": error}),
        None => {
            json!({"output": m.metadata.get(keys::TOOL_RESULT).cloned().unwrap_or_else(|| m.content.clone().into())})
        }
    };
    let mut fr = json!({"name": names.to_wire(name), "response": response});
    let synthetic = call
        .and_then(provider_fields)
        .is_some_and(|f| f.contains_key(SYNTHETIC_ID));
    if let (false, Some(id)) = (synthetic, call.and_then(|c| c.meta_str(keys::CALL_ID))) {
        fr["id"] = id.into();
    }
    let mut parts = vec![json!({"functionResponse": fr})];
    parts.extend(content_blocks(m).iter().filter_map(inline_data));
    parts
}

fn text_parts(m: &Message, _fallbacks: &mut [ContentFallback]) -> Vec<Value> {
    let mut parts = Vec::new();
    if !m.content.is_empty() {
        let mut p = json!({"text": m.content});
        if let Some(sig) = provider_fields(m).and_then(|f| f.get(THOUGHT_SIGNATURE)) {
            p[THOUGHT_SIGNATURE] = sig.clone();
        }
        parts.push(p);
    }
    parts.extend(content_blocks(m).iter().filter_map(inline_data));
    parts
}

/// Gemini takes every kind of block as `inlineData`.
fn inline_data(b: &ContentBlock) -> Option<Value> {
    match b {
        ContentBlock::Text { text } => Some(json!({"text": text})),
        _ => Some(json!({"inlineData": {"mimeType": b.mime_type()?, "data": b.base64()?}})),
    }
}

/// A short random id for calls Gemini sent without one.
fn short_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}
