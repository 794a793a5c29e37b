//! [`Message`]: the seed system's message model, with its exact serde
//! shape, and the constructors for tool calls and tool results.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json_text::{json_len, push_json};
use crate::session::request::ToolRequest;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// Instructions.
    System,
}

/// What a message holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// Plain text.
    Text,
    /// The model's reasoning.
    Thought,
    /// A call the model asked for.
    ToolCall,
    /// The result of a call.
    ToolResult,
}

/// Where a message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for the agent to pick it up.
    PendingAgent,
    /// Being worked on.
    Processing,
    /// Done.
    Processed,
    /// Cut short by a newer user message.
    Interrupted,
    /// Failed.
    Error,
    /// Waiting to be delivered.
    #[default]
    Pending,
    /// Delivered to the user.
    Delivered,
    /// Answered (tool results).
    Responded,
    /// A user message whose turn paused until a person approves or denies
    /// its waiting tool calls; it is taken up again once every call is
    /// decided.
    AwaitingApproval,
}

/// One message of a session, as the seed system stores it.
///
/// Serializes with exactly the fields `id`, `session_id`, `sender`, `role`,
/// `type`, `status`, `content`, `metadata`, `timestamp` and `parent_id`, and
/// `snake_case` values. Deserializing needs only `session_id`, `role`, `type`
/// and `content`: `id` defaults to a new UUID, `timestamp` to now, `status`
/// to `pending`, `metadata` to `{}`, and `sender`/`parent_id` to empty.
///
/// ```
/// use kesoku_core::{Message, MessageType, Role};
///
/// let m: Message = serde_json::from_str(
///     r#"{"session_id": "s", "role": "user", "type": "text", "content": "hi"}"#,
/// ).unwrap();
/// assert_eq!((m.role, m.kind), (Role::User, MessageType::Text));
/// let json = serde_json::to_value(&m).unwrap();
/// assert_eq!(json["type"], "text");
/// assert_eq!(json["status"], "pending");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id (a UUID unless the store says otherwise).
    #[serde(default = "new_id")]
    pub id: String,
    /// The session the message belongs to.
    pub session_id: String,
    /// Who sent it: a user name, a model name, or a tool name.
    #[serde(default)]
    pub sender: String,
    /// The author's role.
    pub role: Role,
    /// What it holds; `type` in JSON.
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// Where it is in its life.
    #[serde(default)]
    pub status: Status,
    /// The text.
    pub content: String,
    /// Structured extras: a tool call's id, name and arguments, a tool's
    /// structured result, provider fields to replay verbatim.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// When it was created.
    #[serde(default = "Utc::now")]
    pub timestamp: DateTime<Utc>,
    /// The message this one answers (a tool result's tool call).
    #[serde(default)]
    pub parent_id: Option<String>,
}

pub(crate) fn new_id() -> String {
    // Time-ordered (UUIDv7): a store's index of ids grows at its right
    // edge, where random ids would each land on a leaf of their own.
    // Encoding into a stack buffer skips the formatting machinery of
    // `to_string`, which is a visible share of a fast tool call.
    let mut buf = uuid::Uuid::encode_buffer();
    uuid::Uuid::now_v7()
        .hyphenated()
        .encode_lower(&mut buf)
        .to_owned()
}

/// Metadata keys the runner and the backends agree on.
pub mod keys {
    /// The provider's id of a tool call.
    pub const CALL_ID: &str = "call_id";
    /// The tool's name.
    pub const TOOL_NAME: &str = "tool_name";
    /// A tool call's arguments, as the model sent them.
    pub const ARGUMENTS: &str = "arguments";
    /// A tool's structured result.
    pub const TOOL_RESULT: &str = "tool_result";
    /// Content blocks (images, documents, media) of a message.
    pub const CONTENT_BLOCKS: &str = "content_blocks";
    /// A tool's error message.
    pub const TOOL_ERROR: &str = "tool_error";
    /// What kind of error (`invalid_arguments`, `timeout`, `interrupted`, ...).
    pub const ERROR_KIND: &str = "error_kind";
    /// How long the call took, in milliseconds.
    pub const DURATION_MS: &str = "duration_ms";
    /// On a `system` message: the agent's feedback on the model's last
    /// reply (a typed answer that did not fit its schema), which models
    /// are shown as a user turn where it stands, not as instructions.
    pub const FEEDBACK: &str = "feedback";
    /// On a user message: the shape its answer must have (an
    /// [`OutputSchema`](crate::OutputSchema), stored as `{name, schema}`),
    /// so that whichever worker runs the turn asks for it.
    pub const OUTPUT: &str = "output";
    /// On the first message a model call produced: the tokens it used
    /// (`{input_tokens, output_tokens, cache_read_tokens?,
    /// cache_write_tokens?}`), as `kesoku_llm::Usage` reads them.
    pub const USAGE: &str = "usage";
    /// On a `system` message: a summary of the turns before the message
    /// it names (`{"from": id}`), which an agent's view of the session
    /// starts from, and which models are shown as a user turn.
    pub const SUMMARY: &str = "summary";
}

impl Message {
    /// A new message with a fresh id and the current time.
    pub fn new(
        session_id: impl Into<String>,
        role: Role,
        kind: MessageType,
        content: impl Into<String>,
    ) -> Self {
        Message {
            id: new_id(),
            session_id: session_id.into(),
            sender: String::new(),
            role,
            kind,
            status: Status::default(),
            content: content.into(),
            metadata: Map::new(),
            timestamp: Utc::now(),
            parent_id: None,
        }
    }

    /// The assistant's tool-call message for `request`: the call id, tool
    /// name and arguments go in the metadata.
    ///
    /// ```
    /// use kesoku_core::{Message, ToolRequest};
    ///
    /// let req = ToolRequest::new("call_1", "add", serde_json::json!({"a": 1}));
    /// let msg = Message::tool_call("s", &req);
    /// assert_eq!(msg.metadata["call_id"], "call_1");
    /// assert_eq!(msg.metadata["tool_name"], "add");
    /// assert_eq!(msg.metadata["arguments"]["a"], 1);
    /// ```
    pub fn tool_call(session_id: impl Into<String>, request: &ToolRequest) -> Self {
        let mut m = Message::new(session_id, Role::Assistant, MessageType::ToolCall, "");
        // `name(arguments)`, in a buffer sized for it at once.
        let args = json_len(&request.arguments);
        m.content = String::with_capacity(request.name.len() + args + 2);
        m.content.push_str(&request.name);
        m.content.push('(');
        push_json(&mut m.content, &request.arguments);
        m.content.push(')');
        m.status = Status::Processed;
        m.metadata
            .insert(keys::CALL_ID.into(), request.id.clone().into());
        m.metadata
            .insert(keys::TOOL_NAME.into(), request.name.clone().into());
        m.metadata
            .insert(keys::ARGUMENTS.into(), request.arguments.clone());
        m
    }

    /// Builder: sets the sender.
    #[must_use]
    pub fn with_sender(mut self, sender: impl Into<String>) -> Self {
        self.sender = sender.into();
        self
    }

    /// Builder: sets the status.
    #[must_use]
    pub fn with_status(mut self, status: Status) -> Self {
        self.status = status;
        self
    }

    /// Builder: sets the parent.
    #[must_use]
    pub fn with_parent(mut self, parent_id: impl Into<String>) -> Self {
        self.parent_id = Some(parent_id.into());
        self
    }

    /// A metadata value as a string, if it is one.
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).and_then(Value::as_str)
    }

    /// Whether this is a tool result that carries an error.
    pub fn is_tool_error(&self) -> bool {
        self.kind == MessageType::ToolResult && self.metadata.contains_key(keys::TOOL_ERROR)
    }
}
