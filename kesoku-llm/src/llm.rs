//! The [`Llm`] trait every backend implements, and the types of one model
//! turn: what goes in (history, tools, options) and what comes back.

use std::future::Future;
use std::pin::Pin;

use kesoku_core::{Message, MessageType, Role, Status, Tool, ToolRegistry, ToolRequest};
use serde_json::{Map, Value};

use kesoku_core::ContentBlock;

use crate::content::ContentFallback;
use crate::error::LlmError;

/// A boxed future borrowing its inputs, so [`Llm`] stays object-safe.
pub type LlmFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool as a model sees it: name, description and JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDeclaration {
    /// The tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The arguments' JSON Schema (draft 2020-12, as kesoku renders it).
    pub parameters: Value,
}

impl ToolDeclaration {
    /// The declaration of a registered tool.
    pub fn from_tool(tool: &Tool) -> Self {
        let mut description = tool.description().to_owned();
        if let Some(returns) = tool.returns() {
            description.push_str("\n\nReturns: ");
            description.push_str(returns);
        }
        ToolDeclaration {
            name: tool.name().to_owned(),
            description,
            parameters: tool.parameters(),
        }
    }

    /// Every tool of a registry, by name.
    pub fn all(registry: &ToolRegistry) -> Vec<Self> {
        registry.iter().map(Self::from_tool).collect()
    }
}

/// Whether and which tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Options of one model call.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmOptions {
    /// The model, such as `claude-sonnet-4-5`.
    pub model: String,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// System instructions, before any `system` messages of the history.
    pub system: Option<String>,
}

impl LlmOptions {
    /// Options for `model` with 4,096 output tokens and automatic tool choice.
    pub fn new(model: impl Into<String>) -> Self {
        LlmOptions {
            model: model.into(),
            max_tokens: 4096,
            temperature: None,
            tool_choice: ToolChoice::Auto,
            system: None,
        }
    }
}

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

/// A provider request body ready to send, with what the conversion had to
/// change: every backend's `request` returns one.
#[derive(Debug, Clone)]
pub struct WireRequest {
    /// The JSON body to POST.
    pub body: Value,
    /// Blocks the provider cannot take where they were, sent as text notes.
    pub fallbacks: Vec<ContentFallback>,
    /// How tool names were mapped for the provider.
    pub names: kesoku_core::lowering::ToolNames,
}

/// Metadata key holding provider fields to replay exactly.
pub const PROVIDER_KEY: &str = "provider";
/// Metadata key holding a message's [`ContentBlock`]s.
pub const CONTENT_BLOCKS_KEY: &str = kesoku_core::keys::CONTENT_BLOCKS;

/// An LLM backend: one call, one assistant turn.
pub trait Llm: Send + Sync {
    /// The provider's name, for logs and errors.
    fn provider(&self) -> &'static str;

    /// Sends the history and tools, and returns the model's turn.
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>>;
}

/// The content blocks stored in a message's metadata.
pub fn content_blocks(message: &Message) -> Vec<ContentBlock> {
    message
        .metadata
        .get(CONTENT_BLOCKS_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Builds the history messages of a turn (see [`AssistantTurn::messages`]).
pub(crate) fn turn_messages(
    session_id: &str,
    provider: &str,
    text: &str,
    calls: &[(ToolRequest, Option<Map<String, Value>>)],
    text_provider_fields: Option<Map<String, Value>>,
) -> Vec<Message> {
    let mut out = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() || calls.is_empty() {
        let mut m = Message::new(session_id, Role::Assistant, MessageType::Text, text)
            .with_sender(provider)
            .with_status(Status::Processed);
        if let Some(fields) = text_provider_fields {
            m.metadata
                .insert(PROVIDER_KEY.into(), Value::Object(fields));
        }
        out.push(m);
    }
    for (request, fields) in calls {
        let mut m = Message::tool_call(session_id, request).with_sender(provider);
        if let Some(fields) = fields {
            m.metadata
                .insert(PROVIDER_KEY.into(), Value::Object(fields.clone()));
        }
        out.push(m);
    }
    out
}
