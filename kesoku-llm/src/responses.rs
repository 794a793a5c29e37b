//! [`OpenAiResponsesLlm`]: OpenAI's Responses API (`POST /v1/responses`),
//! stateless by default: each request carries the whole history, the
//! model's reasoning items included (encrypted, `store: false`), so any
//! worker can take a session's next turn. How a reply's output items are
//! read, and kept for replay, is `responses_output.rs`.

use kesoku_core::Message;
use kesoku_core::lowering::{Dialect, ToolNames};
use serde_json::{Map, Value, json};

use crate::backend::public_backend;
use crate::blocks::{Binary, Block};
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history::{Call, Item, Text, ToolResult, provider_fields};
use crate::options::{LlmOptions, ToolChoice};
use crate::responses_output::{OUTPUT_ITEMS, RESPONSE_ID, read_response};
use crate::turn::{AssistantTurn, PROVIDER_KEY};

/// Provider field: the message's response was stored by OpenAI.
const STORED: &str = "stored";
use crate::wire::{Request, WireFormat, WireHistory};

const PROVIDER: &str = "OpenAI";

public_backend! {
    /// OpenAI's Responses API (`POST {base}/responses`), one-shot and
    /// streamed. [`OpenAiLlm`](crate::OpenAiLlm) stays Chat Completions,
    /// for the servers that speak it.
    ///
    /// Configured like the official SDK: `OPENAI_API_KEY` and
    /// `OPENAI_BASE_URL` (whose default ends in `/v1`), or the builder
    /// methods.
    ///
    /// Stateless by default: `store: false`, and the reasoning's encrypted
    /// content asked for (`include: ["reasoning.encrypted_content"]`) and
    /// kept with the turn's messages, each reasoning item with the message
    /// or call that followed it; the next request sends them back in
    /// order, so any process can take the session's next turn.
    /// [`with_previous_response_id`](Self::with_previous_response_id)
    /// chains requests on OpenAI's stored responses instead.
    ///
    /// ```
    /// let llm = kesoku_llm::OpenAiResponsesLlm::new("sk-test").with_strict(true);
    /// assert!(!format!("{llm:?}").contains("sk-test"));
    /// ```
    OpenAiResponsesLlm(Responses), env: "`OPENAI_API_KEY` and `OPENAI_BASE_URL`"
}

impl OpenAiResponsesLlm {
    /// The API's address.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// Strict mode: tool schemas lowered to OpenAI's strict dialect and
    /// sent with `strict: true`. Off by default, and then sent as
    /// `strict: false`: the Responses API makes a schema strict when it
    /// can unless told not to.
    ///
    /// ```
    /// let llm = kesoku_llm::OpenAiResponsesLlm::new("k").with_strict(true);
    /// # let _ = llm;
    /// ```
    #[must_use]
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.0.format.strict = strict;
        self
    }

    /// Chains each request on the last stored response of the history
    /// (`previous_response_id`, with `store: true`): only what came after
    /// that response is sent. OpenAI keeps the conversation, so requests
    /// are smaller, but a session can go on only while OpenAI holds its
    /// responses, and a history without one (another provider's, or older
    /// than this setting) is sent whole, as without it.
    ///
    /// ```
    /// let llm = kesoku_llm::OpenAiResponsesLlm::new("k").with_previous_response_id(true);
    /// # let _ = llm;
    /// ```
    #[must_use]
    pub fn with_previous_response_id(mut self, chain: bool) -> Self {
        self.0.format.chain = chain;
        self
    }

    /// Offers one of OpenAI's built-in tools, sent as given beside the
    /// function tools: `{"type": "web_search"}`,
    /// `{"type": "file_search", "vector_store_ids": [...]}`,
    /// `{"type": "code_interpreter", "container": {"type": "auto"}}`.
    /// OpenAI runs them, never kesoku: their calls and results come back
    /// as output items, kept as they came in the metadata of the turn's
    /// message they preceded (`provider.output_items`, where they can be
    /// read and shown), and sent back with it.
    ///
    /// ```
    /// let llm = kesoku_llm::OpenAiResponsesLlm::new("k")
    ///     .with_builtin_tool(serde_json::json!({"type": "web_search"}));
    /// # let _ = llm;
    /// ```
    #[must_use]
    pub fn with_builtin_tool(mut self, tool: Value) -> Self {
        self.0.format.builtin.push(tool);
        self
    }
}

/// The Responses wire format, and its options.
#[derive(Debug, Default)]
pub(crate) struct Responses {
    pub(crate) strict: bool,
    /// Chain on stored responses (`previous_response_id`).
    pub(crate) chain: bool,
    /// Built-in tools offered, as given.
    pub(crate) builtin: Vec<Value>,
}

impl WireFormat for Responses {
    const NAME: &'static str = PROVIDER;
    const DEFAULT_BASE_URL: &'static str = OpenAiResponsesLlm::DEFAULT_BASE_URL;
    const DEFAULT_MODEL: &'static str = "gpt-5";
    fn context_window(model: &str) -> Option<u64> {
        crate::openai::ChatCompletions::context_window(model)
    }
    const KEY_VARS: &'static [&'static str] = &["OPENAI_API_KEY"];
    const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";
    const NAMES: Dialect = Dialect::OpenAi;
    type Decoder = crate::stream::responses::Decoder;

    fn schema_dialect(&self) -> Dialect {
        if self.strict {
            Dialect::OpenAiStrict
        } else {
            Dialect::OpenAi
        }
    }

    /// Always strict: a typed answer is the grammar's.
    fn output_dialect(&self) -> Dialect {
        Dialect::OpenAiStrict
    }

    fn path(&self, _options: &LlmOptions) -> String {
        "/responses".to_owned()
    }

    fn stream_fields(&self, fields: &mut Map<String, Value>) {
        fields.insert("stream".into(), true.into());
    }

    fn keeps_prefix(&self) -> bool {
        // Chained, a request starts after the newest stored response: what
        // it sends moves with every turn.
        !self.chain
    }

    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|key| ("authorization", format!("Bearer {key}")))
            .into_iter()
            .collect()
    }

    const HISTORY_KEY: &'static str = "input";

    fn encode_history<'a>(
        &self,
        history: &[Item<'a>],
        names: &ToolNames,
        fallbacks: &mut Vec<ContentFallback>,
    ) -> WireHistory<'a> {
        encode_items(history, names, fallbacks, self.chain)
    }

    fn encode_body(&self, request: &Request<'_>, system: &[&str]) -> Map<String, Value> {
        encode_body(self, request, system)
    }

    fn decode(
        &self,
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError> {
        let mut turn = read_response(PROVIDER, session_id, body, names)?;
        if self.chain {
            mark_stored(&mut turn);
        }
        Ok(turn)
    }
}

/// Marks each message of a turn whose response OpenAI stored (`store:
/// true`): only those can be gone on from.
fn mark_stored(turn: &mut AssistantTurn) {
    for m in turn.messages_mut() {
        if let Some(Value::Object(fields)) = m.metadata.get_mut(PROVIDER_KEY)
            && fields.contains_key(RESPONSE_ID)
        {
            fields.insert(STORED.into(), true.into());
        }
    }
}

/// The history as input items. Chained, the items up to the newest
/// message of a stored response are left out, and that response's id is
/// the one the request goes on from (a response made without `store`,
/// by an unchained backend, cannot be).
pub(crate) fn encode_items<'a>(
    history: &[Item<'a>],
    names: &ToolNames,
    fallbacks: &mut Vec<ContentFallback>,
    chain: bool,
) -> WireHistory<'a> {
    let mut system = Vec::new();
    let mut previous = None;
    let mut from = 0;
    if chain {
        for (i, item) in history.iter().enumerate().rev() {
            let id = item
                .message()
                .and_then(provider_fields)
                .filter(|f| f.get(STORED) == Some(&Value::Bool(true)))
                .and_then(|f| f.get(RESPONSE_ID))
                .and_then(Value::as_str);
            if let Some(id) = id {
                previous = Some(id);
                from = i + 1;
                break;
            }
        }
    }
    let mut wire: Vec<(usize, Value)> = Vec::with_capacity(history.len() - from);
    for (i, item) in history.iter().enumerate() {
        if let Item::System(text) = item {
            // Instructions are sent on every request: a stored response
            // does not carry them to the next.
            system.push((i, *text));
            continue;
        }
        if i < from {
            continue;
        }
        match item {
            Item::System(_) => {}
            Item::User(text) => wire.push((i, user_message(text, fallbacks))),
            Item::AssistantText(text) => match replayed(text.message) {
                Some(items) => wire.extend(items.iter().map(|v| (i, v.clone()))),
                None if text.message.content.is_empty() => {}
                None => wire.push((
                    i,
                    json!({"type": "message", "role": "assistant", "content": text.message.content}),
                )),
            },
            Item::ToolCall(call) => {
                let own = function_call(call, names);
                match replayed(call.message) {
                    Some(items) => wire.extend(items.iter().map(|v| {
                        // The call as the history holds it now: a hook may
                        // have rewritten its arguments.
                        let v = if v["type"] == "function_call" {
                            let mut v = v.clone();
                            for key in ["call_id", "name", "arguments"] {
                                v[key] = own[key].clone();
                            }
                            v
                        } else {
                            v.clone()
                        };
                        (i, v)
                    })),
                    None => wire.push((i, own)),
                }
            }
            Item::ToolResult(result) => wire.push((i, function_output(result, fallbacks))),
        }
    }
    WireHistory {
        messages: wire,
        system,
        previous,
    }
}

/// The output items kept on a message by this format, to send back as
/// they came.
fn replayed(m: &Message) -> Option<&Vec<Value>> {
    provider_fields(m)?.get(OUTPUT_ITEMS)?.as_array()
}

/// The request's fields besides the input.
pub(crate) fn encode_body(
    format: &Responses,
    request: &Request<'_>,
    system: &[&str],
) -> Map<String, Value> {
    let names = request.names();
    let options = request.options;
    let mut body = Map::new();
    body.insert("model".into(), options.model.clone().into());
    body.insert("max_output_tokens".into(), options.max_tokens.into());
    if !system.is_empty() {
        body.insert("instructions".into(), system.join("\n\n").into());
    }
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !request.tools.is_empty() || !format.builtin.is_empty() {
        let mut decls: Vec<Value> = request
            .declarations()
            .map(|(t, name, schema)| {
                json!({
                    "type": "function",
                    "name": name,
                    "description": t.description,
                    "parameters": schema,
                    // Omitted is not false: the API would make the
                    // schema strict where it can.
                    "strict": format.strict,
                })
            })
            .collect();
        decls.extend(format.builtin.iter().cloned());
        body.insert("tools".into(), Value::Array(decls));
        let choice = match &options.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Any => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "name": names.to_wire(name)}),
        };
        body.insert("tool_choice".into(), choice);
    }
    if let Some(output) = request.output {
        body.insert(
            "text".into(),
            json!({"format": {
                "type": "json_schema",
                "name": output.name,
                "schema": output.schema,
                "strict": true,
            }}),
        );
    }
    if format.chain {
        body.insert("store".into(), true.into());
        if let Some(previous) = request.previous {
            body.insert("previous_response_id".into(), previous.into());
        }
    } else {
        body.insert("store".into(), false.into());
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    body
}

/// A call sent as the history holds it.
fn function_call(call: &Call<'_>, names: &ToolNames) -> Value {
    let arguments = match call.arguments {
        Some(Value::String(raw)) => raw.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_owned(),
    };
    json!({
        "type": "function_call",
        "call_id": call.id.unwrap_or_default(),
        "name": names.to_wire(call.tool.unwrap_or_default()),
        "arguments": arguments,
    })
}

/// A result: its text, or parts when it carries blocks.
fn function_output(r: &ToolResult<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let m = r.message;
    let output = if r.blocks.is_empty() {
        Value::String(m.content.clone())
    } else {
        Value::Array(parts(&m.content, &r.blocks, m, fallbacks))
    };
    json!({"type": "function_call_output", "call_id": r.call_id(), "output": output})
}

/// A user message: plain text, or parts when it carries blocks.
fn user_message(t: &Text<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value {
    let m = t.message;
    let content = if t.blocks.is_empty() {
        Value::String(m.content.clone())
    } else {
        Value::Array(parts(&m.content, &t.blocks, m, fallbacks))
    };
    json!({"type": "message", "role": "user", "content": content})
}

/// Text and blocks as input parts: images as `input_image`, documents as
/// `input_file`, both as data URLs; audio and video (which the Responses
/// API takes nowhere in a request) as a reported note.
fn parts(
    text: &str,
    blocks: &[Block<'_>],
    m: &Message,
    fallbacks: &mut Vec<ContentFallback>,
) -> Vec<Value> {
    let data_uri = |x: &Binary<'_>| format!("data:{};base64,{}", x.mime_type, x.base64);
    let mut out = Vec::with_capacity(blocks.len() + 1);
    if !text.is_empty() {
        out.push(json!({"type": "input_text", "text": text}));
    }
    for b in blocks {
        out.push(match b {
            Block::Text(text) => json!({"type": "input_text", "text": text}),
            Block::Image(image) => {
                json!({"type": "input_image", "image_url": data_uri(image), "detail": "auto"})
            }
            Block::Document(doc, name) => json!({
                "type": "input_file",
                "file_data": data_uri(doc),
                "filename": name.unwrap_or("document"),
            }),
            Block::Media(media) => {
                fallbacks.push(ContentFallback {
                    provider: PROVIDER,
                    kind: b.kind(),
                    mime_type: media.mime_type.to_owned(),
                    message_id: m.id.clone(),
                });
                json!({"type": "input_text", "text": b.fallback_text(PROVIDER)})
            }
        });
    }
    out
}
