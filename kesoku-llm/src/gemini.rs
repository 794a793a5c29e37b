//! [`GeminiLlm`]: the `generateContent` wire format, replaying each part's
//! `thoughtSignature` with the part it came on.

use kesoku_core::lowering::{Dialect, ToolNames};
use kesoku_core::{ToolRequest, keys};
use serde_json::{Map, Value, json};

use crate::backend::public_backend;
use crate::blocks::Block;
use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history::{Call, Item, Text, ToolResult, provider_fields};
use crate::options::{LlmOptions, ToolChoice};
use crate::turn::{AssistantTurn, PROVIDER_KEY, StopReason, TurnBuilder, Usage};
use crate::wire::{Request, WireFormat, WireHistory, push_merged};

const PROVIDER: &str = "Gemini";
/// Set in a call's provider fields when Gemini sent no call id and kesoku
/// made one up for pairing: it is never sent back.
const SYNTHETIC_ID: &str = "syntheticId";
const THOUGHT_SIGNATURE: &str = "thoughtSignature";
/// The model's parts as they came, replayed unchanged.
const RAW_PARTS: &str = "parts";
/// Which model turn a message came from.
const TURN: &str = "turn";

public_backend! {
    /// Gemini's `generateContent`.
    ///
    /// Configured like the official SDK: `GEMINI_API_KEY` (falling back to
    /// `GOOGLE_API_KEY`) and `GOOGLE_GEMINI_BASE_URL`, or the builder methods.
    /// Tools are declared with `parametersJsonSchema`; set
    /// [`with_legacy_parameters`](Self::with_legacy_parameters) for the older
    /// OpenAPI-subset `parameters`.
    GeminiLlm(GenerateContent),
    env: "`GEMINI_API_KEY` (or `GOOGLE_API_KEY`) and `GOOGLE_GEMINI_BASE_URL`"
}

impl GeminiLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com";

    /// Declares tools with the legacy OpenAPI-subset `parameters`, lowered
    /// by kesoku's sanitizer, instead of `parametersJsonSchema`.
    #[must_use]
    pub fn with_legacy_parameters(mut self, legacy: bool) -> Self {
        self.0.format.legacy_parameters = legacy;
        self
    }
}

/// The `generateContent` wire format.
#[derive(Debug, Default)]
pub(crate) struct GenerateContent {
    legacy_parameters: bool,
}

impl WireFormat for GenerateContent {
    const NAME: &'static str = PROVIDER;
    const DEFAULT_BASE_URL: &'static str = GeminiLlm::DEFAULT_BASE_URL;
    const DEFAULT_MODEL: &'static str = "gemini-2.5-flash";
    fn context_window(model: &str) -> Option<u64> {
        if model.starts_with("gemini-1.5-pro") {
            Some(2_097_152)
        } else if model.starts_with("gemini-") {
            Some(1_048_576)
        } else {
            None
        }
    }
    const KEY_VARS: &'static [&'static str] = &["GEMINI_API_KEY", "GOOGLE_API_KEY"];
    const BASE_URL_VAR: &'static str = "GOOGLE_GEMINI_BASE_URL";
    const NAMES: Dialect = Dialect::GeminiJsonSchema;
    type Decoder = crate::stream::gemini::Decoder;

    fn schema_dialect(&self) -> Dialect {
        if self.legacy_parameters {
            Dialect::GeminiOpenApi
        } else {
            Dialect::GeminiJsonSchema
        }
    }

    fn output_dialect(&self) -> Dialect {
        self.schema_dialect()
    }

    /// Gemini rejects an OBJECT without properties: a tool without
    /// arguments is declared without a schema.
    fn sends_schema(&self, tool: &ToolDeclaration) -> bool {
        tool.parameters["properties"]
            .as_object()
            .is_some_and(|p| !p.is_empty())
    }

    fn path(&self, options: &LlmOptions) -> String {
        format!("/v1beta/models/{}:generateContent", options.model)
    }

    fn stream_path(&self, options: &LlmOptions) -> String {
        // Without `alt=sse` the answer is one JSON array, not events.
        format!(
            "/v1beta/models/{}:streamGenerateContent?alt=sse",
            options.model
        )
    }

    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        vec![("x-goog-api-key", key.unwrap_or_default().to_owned())]
    }

    const HISTORY_KEY: &'static str = "contents";

    fn encode_history<'a>(
        &self,
        history: &[Item<'a>],
        names: &ToolNames,
        _fallbacks: &mut Vec<ContentFallback>,
    ) -> WireHistory<'a> {
        let mut system = Vec::new();
        let mut contents: Vec<(usize, &'static str, Vec<Value>)> = Vec::new();
        // The turn whose parts were replayed verbatim: its other messages are
        // already in them.
        let mut replayed: Option<&str> = None;
        for (i, item) in history.iter().enumerate() {
            if let Some(fields) = item.message().and_then(provider_fields) {
                let turn = fields.get(TURN).and_then(Value::as_str);
                if turn.is_some() && turn == replayed {
                    continue;
                }
                if let Some(raw) = fields.get(RAW_PARTS).and_then(Value::as_array) {
                    // Gemini wants its parts back unchanged: order, text split
                    // and every signature as they came.
                    replayed = turn;
                    push_merged(&mut contents, i, "model", raw.clone());
                    continue;
                }
            }
            let (role, parts) = match item {
                Item::System(text) => {
                    system.push((i, *text));
                    continue;
                }
                Item::ToolCall(call) => ("model", vec![function_call(call, names)]),
                Item::ToolResult(result) => ("user", function_response(result, names)),
                Item::AssistantText(text) => ("model", text_parts(text)),
                Item::User(text) => ("user", text_parts(text)),
            };
            if !parts.is_empty() {
                // A replayed turn ends where another role starts, so what
                // follows a new wire message never depends on what came
                // before it (the backend keeps those encoded).
                if contents.last().is_none_or(|(_, r, _)| *r != role) {
                    replayed = None;
                }
                push_merged(&mut contents, i, role, parts);
            }
        }
        let messages = contents
            .into_iter()
            .map(|(i, role, mut parts)| {
                // A turn's function responses first, as many as it had calls.
                parts.sort_by_key(|p| p.get("functionResponse").is_none());
                (i, json!({"role": role, "parts": parts}))
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
        // The typed answer's shape goes in the JSON mode, or, where the
        // model cannot take it beside tools, in the instructions.
        let (native, told) = match request.output {
            Some(output) if !request.tools.is_empty() && !takes_tools_with_json(&options.model) => {
                (None, Some(shape_instruction(output)))
            }
            output => (output, None),
        };
        let system: Vec<&str> = system.iter().copied().chain(told.as_deref()).collect();
        if !system.is_empty() {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system.join("\n\n")}]}),
            );
        }
        if !request.tools.is_empty() {
            let key = if self.legacy_parameters {
                "parameters"
            } else {
                "parametersJsonSchema"
            };
            let decls: Vec<Value> = request
                .declarations()
                .map(|(t, name, schema)| {
                    let mut d = json!({"name": name, "description": t.description});
                    if let Some(schema) = schema {
                        d[key] = schema.clone();
                    }
                    d
                })
                .collect();
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
        if let Some(output) = native {
            generation["responseMimeType"] = "application/json".into();
            let key = if self.legacy_parameters {
                "responseSchema"
            } else {
                "responseJsonSchema"
            };
            generation[key] = output.schema.clone();
        }
        body.insert("generationConfig".into(), generation);
        body
    }

    /// Keeps each part's `thoughtSignature` on the message made from that
    /// part, and the parts themselves on the turn's first message.
    fn decode(
        &self,
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
        let mut turn = TurnBuilder::default();
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
                turn.push_call(
                    ToolRequest::new(id, names.from_wire(name), args),
                    Some(fields),
                );
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                turn.push_text(t);
                if let Some(sig) = signature {
                    turn.set_text_field(THOUGHT_SIGNATURE, sig);
                }
            }
        }
        let stop_reason = match candidate["finishReason"].as_str() {
            _ if turn.has_calls() => StopReason::ToolUse,
            Some("STOP") | None => StopReason::EndTurn,
            Some("MAX_TOKENS") => StopReason::MaxTokens,
            Some("SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII") => {
                StopReason::Refusal
            }
            Some(other) => StopReason::Other(other.to_owned()),
        };
        // `promptTokenCount` counts the cached part too; thinking is
        // counted apart from the answer, and billed as output.
        let usage = &body["usageMetadata"];
        let count = |key: &str| usage[key].as_u64().unwrap_or(0);
        turn.set_usage(
            Usage::new(
                count("promptTokenCount"),
                count("candidatesTokenCount").saturating_add(count("thoughtsTokenCount")),
            )
            .with_cache(usage["cachedContentTokenCount"].as_u64(), None),
        );
        let mut turn = turn.finish(session_id, PROVIDER, stop_reason);
        turn.response_id = body
            .get("responseId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        turn.response_model = body
            .get("modelVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // Keep the parts exactly as they came, for replay, on the turn's
        // first message; mark every message of the turn.
        let turn_id = turn
            .messages()
            .next()
            .map(|m| m.id.clone())
            .unwrap_or_default();
        let mut parts = Some(parts);
        for m in turn.messages_mut() {
            let entry = m
                .metadata
                .entry(PROVIDER_KEY)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = entry {
                fields.insert(TURN.into(), turn_id.clone().into());
                if let Some(parts) = parts.take() {
                    fields.insert(RAW_PARTS.into(), Value::Array(parts));
                }
            }
        }
        Ok(turn)
    }
}

/// A model `functionCall` part, with its own signature and no other.
fn function_call(call: &Call<'_>, names: &ToolNames) -> Value {
    let fields = provider_fields(call.message);
    let mut fc = json!({
        "name": names.to_wire(call.tool.unwrap_or_default()),
        "args": call.arguments_object(),
    });
    if let Some(id) = sent_id(call) {
        fc["id"] = id.into();
    }
    let mut part = json!({"functionCall": fc});
    if let Some(sig) = fields.and_then(|f| f.get(THOUGHT_SIGNATURE)) {
        part[THOUGHT_SIGNATURE] = sig.clone();
    }
    part
}

/// The call id Gemini gave, if any: made-up ones are never sent back.
fn sent_id<'a>(call: &Call<'a>) -> Option<&'a str> {
    let synthetic = provider_fields(call.message).is_some_and(|f| f.contains_key(SYNTHETIC_ID));
    call.id.filter(|_| !synthetic)
}

/// A `functionResponse` part, plus the result's media as `inlineData`.
fn function_response(r: &ToolResult<'_>, names: &ToolNames) -> Vec<Value> {
    let m = r.message;
    let name = r
        .call
        .and_then(|c| c.tool)
        .or_else(|| m.meta_str(keys::TOOL_NAME))
        .unwrap_or(&m.sender);
    let response = match m.metadata.get(keys::TOOL_ERROR) {
        Some(error) => json!({"error": error}),
        None => {
            json!({"output": m.metadata.get(keys::TOOL_RESULT).cloned().unwrap_or_else(|| m.content.clone().into())})
        }
    };
    let mut fr = json!({"name": names.to_wire(name), "response": response});
    // Only the paired call's id: Gemini matches responses to its calls.
    if let Some(id) = r.call.as_ref().and_then(sent_id) {
        fr["id"] = id.into();
    }
    let mut parts = Vec::with_capacity(r.blocks.len() + 1);
    parts.push(json!({"functionResponse": fr}));
    parts.extend(r.blocks.iter().map(inline_data));
    parts
}

fn text_parts(t: &Text<'_>) -> Vec<Value> {
    let m = t.message;
    let mut parts = Vec::with_capacity(t.blocks.len() + 1);
    if !m.content.is_empty() {
        let mut p = json!({"text": m.content});
        if let Some(sig) = provider_fields(m).and_then(|f| f.get(THOUGHT_SIGNATURE)) {
            p[THOUGHT_SIGNATURE] = sig.clone();
        }
        parts.push(p);
    }
    parts.extend(t.blocks.iter().map(inline_data));
    parts
}

/// Gemini takes every kind of block as `inlineData`.
fn inline_data(b: &Block<'_>) -> Value {
    match b {
        Block::Text(text) => json!({"text": text}),
        Block::Image(x) | Block::Document(x, _) | Block::Media(x) => {
            json!({"inlineData": {"mimeType": x.mime_type, "data": x.base64}})
        }
    }
}

/// A short random id for calls Gemini sent without one.
fn short_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// Whether `model` takes function declarations together with a JSON
/// response type. Gemini 1.x and 2.x refuse the pair ("Function calling
/// with a response mime type: 'application/json' is unsupported");
/// Gemini 3 takes it, and so is any model this does not recognise assumed
/// to.
fn takes_tools_with_json(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    !(name.starts_with("gemini-1") || name.starts_with("gemini-2"))
}

/// The typed answer's shape as an instruction, for a model that cannot
/// take it in JSON mode beside tools: kesoku's check of the answer, and
/// its repairs, still hold the model to it.
fn shape_instruction(output: crate::wire::Output<'_>) -> String {
    format!(
        "When you give your final answer, answer with only a JSON value (no other text, no code fence) \
         that matches this JSON Schema, named `{}`:\n{}",
        output.name, output.schema
    )
}
