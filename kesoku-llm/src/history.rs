//! Reading kesoku history for a provider: one walk over the messages into
//! provider-neutral [`Item`]s, so the six ways a message can be read
//! (system, thought, tool call, tool result, assistant text, user text)
//! are decided here once, and each wire format only encodes items.
//!
//! The same walk indexes every tool call by its message id, so a result
//! finds its call through `parent_id` in constant time, and reads each
//! message's content blocks once (borrowed, see [`crate::blocks`]).

use std::collections::HashMap;

use kesoku_core::{Message, MessageType, Role, keys};
use serde_json::{Map, Value};

use crate::blocks::{self, Block};
use crate::turn::PROVIDER_KEY;

/// The provider fields a message carries, to replay verbatim.
pub(crate) fn provider_fields(m: &Message) -> Option<&Map<String, Value>> {
    m.metadata.get(PROVIDER_KEY).and_then(Value::as_object)
}

/// One piece of history, as every wire format reads it.
#[derive(Debug)]
pub(crate) enum Item<'a> {
    /// System instructions: [`LlmOptions::system`](crate::LlmOptions),
    /// then each system message where it stands.
    System(&'a str),
    /// A user message.
    User(Text<'a>),
    /// An assistant message that is not a tool call.
    AssistantText(Text<'a>),
    /// A tool call the model made.
    ToolCall(Call<'a>),
    /// A tool's result.
    ToolResult(ToolResult<'a>),
}

impl<'a> Item<'a> {
    /// The message the item was read from (none for the options' system
    /// text).
    pub(crate) fn message(&self) -> Option<&'a Message> {
        match self {
            Item::System(_) => None,
            Item::User(t) | Item::AssistantText(t) => Some(t.message),
            Item::ToolCall(c) => Some(c.message),
            Item::ToolResult(r) => Some(r.message),
        }
    }
}

/// A text message and its content blocks.
#[derive(Debug)]
pub(crate) struct Text<'a> {
    pub(crate) message: &'a Message,
    pub(crate) blocks: Vec<Block<'a>>,
}

/// A tool call, as its message stores it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) message: &'a Message,
    /// The provider's call id.
    pub(crate) id: Option<&'a str>,
    /// The tool's (kesoku) name.
    pub(crate) tool: Option<&'a str>,
    /// The arguments as the model sent them: a JSON string or a value.
    pub(crate) arguments: Option<&'a Value>,
}

impl<'a> Call<'a> {
    fn of(message: &'a Message) -> Self {
        Call {
            message,
            id: message.meta_str(keys::CALL_ID),
            tool: message.meta_str(keys::TOOL_NAME),
            arguments: message.metadata.get(keys::ARGUMENTS),
        }
    }

    /// The arguments as a JSON object, for formats that send one: a string
    /// that does not parse, or anything but an object, becomes `{}`.
    pub(crate) fn arguments_object(&self) -> Value {
        match self.arguments {
            Some(Value::String(raw)) => {
                serde_json::from_str(raw).unwrap_or_else(|_| Value::Object(Map::new()))
            }
            Some(v @ Value::Object(_)) => v.clone(),
            _ => Value::Object(Map::new()),
        }
    }
}

/// A tool's result, with the call it answers.
#[derive(Debug)]
pub(crate) struct ToolResult<'a> {
    pub(crate) message: &'a Message,
    /// The call its `parent_id` names, when that is in the history.
    pub(crate) call: Option<Call<'a>>,
    pub(crate) blocks: Vec<Block<'a>>,
}

impl ToolResult<'_> {
    /// The call id to answer: the paired call's, else the one the result
    /// carries itself, else empty.
    pub(crate) fn call_id(&self) -> &str {
        self.call
            .and_then(|c| c.id)
            .or_else(|| self.message.meta_str(keys::CALL_ID))
            .unwrap_or_default()
    }

    pub(crate) fn is_error(&self) -> bool {
        self.message.metadata.contains_key(keys::TOOL_ERROR)
    }
}

/// A history read into items.
#[derive(Debug)]
pub(crate) struct Read<'a> {
    pub(crate) items: Vec<Item<'a>>,
    /// The index in the messages of each item's message (for the options'
    /// system text, of the first message).
    pub(crate) at: Vec<usize>,
}

/// Reads `messages` into items, `system` (the options' instructions)
/// first.
#[cfg(test)]
pub(crate) fn read<'a>(system: Option<&'a str>, messages: &'a [Message]) -> Vec<Item<'a>> {
    read_from(system, messages, 0, &HashMap::new()).items
}

/// Reads `messages[start..]` into items, `system` first. A result pairs
/// with a call among them, else with one of the earlier ones `earlier`
/// indexes (call message id → its index in `messages`).
pub(crate) fn read_from<'a>(
    system: Option<&'a str>,
    messages: &'a [Message],
    start: usize,
    earlier: &HashMap<String, usize>,
) -> Read<'a> {
    let tail = &messages[start..];
    let mut items = Vec::with_capacity(tail.len() + 1);
    let mut at = Vec::with_capacity(tail.len() + 1);
    if let Some(system) = system {
        items.push(Item::System(system));
        at.push(start);
    }
    // Tool-call message id → the call, for pairing results; and the
    // results to pair once every call is known.
    let mut calls: HashMap<&str, Call<'a>> = HashMap::new();
    let mut results = Vec::new();
    let mut scratch = Vec::new();
    for (j, m) in tail.iter().enumerate() {
        if m.kind == MessageType::ToolCall {
            calls.entry(m.id.as_str()).or_insert_with(|| Call::of(m));
        }
        let item = match (m.role, m.kind) {
            // Feedback on the model's last reply reads as the user's turn:
            // a request must not end on the model's own message.
            // So does a summary of the turns before, which a view starts
            // with.
            (Role::System, MessageType::Text)
                if m.metadata.contains_key(keys::FEEDBACK)
                    || m.metadata.contains_key(keys::SUMMARY) =>
            {
                Item::User(Text {
                    message: m,
                    blocks: blocks::read(m, &mut scratch),
                })
            }
            (Role::System, _) => Item::System(&m.content),
            (_, MessageType::Thought) => continue,
            (Role::Assistant, MessageType::ToolCall) => Item::ToolCall(Call::of(m)),
            (Role::Tool, _) | (_, MessageType::ToolResult) => {
                results.push(items.len());
                Item::ToolResult(ToolResult {
                    message: m,
                    call: None,
                    blocks: blocks::read(m, &mut scratch),
                })
            }
            (Role::Assistant, _) => Item::AssistantText(Text {
                message: m,
                blocks: blocks::read(m, &mut scratch),
            }),
            (Role::User, _) => Item::User(Text {
                message: m,
                blocks: blocks::read(m, &mut scratch),
            }),
        };
        items.push(item);
        at.push(start + j);
    }
    for i in results {
        if let Item::ToolResult(r) = &mut items[i] {
            r.call = r.message.parent_id.as_deref().and_then(|p| {
                calls
                    .get(p)
                    .copied()
                    .or_else(|| earlier.get(p).map(|&j| Call::of(&messages[j])))
            });
        }
    }
    Read { items, at }
}

#[cfg(test)]
mod tests {
    use kesoku_core::ToolRequest;
    use serde_json::json;

    use super::*;

    fn text(role: Role, kind: MessageType, content: &str) -> Message {
        Message::new("s", role, kind, content)
    }

    #[test]
    fn every_message_is_read_once_in_order() {
        let call = Message::tool_call("s", &ToolRequest::new("c1", "t", json!({"a": 1})));
        let result = text(Role::Tool, MessageType::ToolResult, "ok").with_parent(call.id.clone());
        let history = [
            text(Role::System, MessageType::Text, "be brief"),
            text(Role::User, MessageType::Text, "hi"),
            text(Role::Assistant, MessageType::Thought, "hmm"),
            // A system message is an instruction whatever its kind.
            text(Role::System, MessageType::Thought, "also this"),
            call,
            result,
            text(Role::Assistant, MessageType::Text, "done"),
        ];
        let items = read(Some("first"), &history);
        let shape: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::System(t) => format!("system:{t}"),
                Item::User(t) => format!("user:{}", t.message.content),
                Item::AssistantText(t) => format!("assistant:{}", t.message.content),
                Item::ToolCall(c) => format!("call:{}", c.id.unwrap_or_default()),
                Item::ToolResult(r) => format!("result:{}", r.call_id()),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "system:first",
                "system:be brief",
                "user:hi",
                "system:also this",
                "call:c1",
                "result:c1",
                "assistant:done"
            ]
        );
        let Item::ToolCall(c) = &items[4] else {
            unreachable!()
        };
        assert_eq!(c.arguments_object(), json!({"a": 1}));
    }

    #[test]
    fn feedback_on_an_answer_reads_as_the_users_turn() {
        let mut feedback = text(Role::System, MessageType::Text, "`a` is required");
        feedback
            .metadata
            .insert(keys::FEEDBACK.into(), serde_json::Value::Bool(true));
        let history = [
            text(Role::User, MessageType::Text, "hi"),
            text(Role::Assistant, MessageType::Text, "{}"),
            feedback,
        ];
        let items = read(None, &history);
        assert!(matches!(items[1], Item::AssistantText(_)));
        let Item::User(t) = &items[2] else {
            panic!("feedback read as {:?}", items[2]);
        };
        assert_eq!(t.message.content, "`a` is required");
    }

    #[test]
    fn a_result_finds_its_call_wherever_it_stands_or_keeps_its_own_id() {
        let call = Message::tool_call("s", &ToolRequest::new("c1", "t", json!("{bad")));
        let early = text(Role::Tool, MessageType::ToolResult, "").with_parent(call.id.clone());
        let mut orphan = text(Role::Tool, MessageType::ToolResult, "").with_parent("gone");
        orphan.metadata.insert(keys::CALL_ID.into(), json!("own"));
        let unnamed = text(Role::Tool, MessageType::ToolResult, "");
        let history = [early, call, orphan, unnamed];
        let items = read(None, &history);
        let ids: Vec<&str> = items
            .iter()
            .filter_map(|i| match i {
                Item::ToolResult(r) => Some(r.call_id()),
                Item::ToolCall(c) => {
                    assert_eq!(c.arguments_object(), json!({}), "unparsable arguments");
                    None
                }
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["c1", "own", ""]);
    }
}
