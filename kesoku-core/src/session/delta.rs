//! [`Delta`]: a piece of a reply as the model writes it, or what a
//! nested agent did, tagged with its path ([`Via`]). The gateway
//! delivers deltas live to whoever listens and never stores them: the
//! finished message is stored once, as it always is.

use crate::session::message::Message;

/// A piece of an assistant reply being written.
///
/// ```
/// use kesoku_core::{Delta, DeltaKind};
///
/// let delta = Delta::new("session-1", DeltaKind::Text("Hel".into())).replying_to("msg-1");
/// assert_eq!(delta.reply_to.as_deref(), Some("msg-1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Delta {
    /// The session the reply belongs to.
    pub session_id: String,
    /// The user message being answered, when known.
    pub reply_to: Option<String>,
    /// What was written.
    pub kind: DeltaKind,
    /// Empty for the session's own turn. For what an agent called as a
    /// tool did while its call ran (in a session of its own), the calls
    /// that lead to it from this session, outermost first: a front end
    /// shows it nested under the last one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<Via>,
}

/// One step of a [`Delta`]'s path: a call of an agent offered as a tool,
/// and the session its turn runs in.
///
/// ```
/// use kesoku_core::{Delta, DeltaKind, Via};
///
/// let via = Via::new("research", "call-msg-1", "s/research/call-msg-1");
/// let delta = Delta::new("s", DeltaKind::Text("Looking".into())).via(vec![via]);
/// assert_eq!(delta.path[0].tool, "research");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Via {
    /// The tool called (the nested agent's name as a tool).
    pub tool: String,
    /// The id of the `tool_call` message, in the session one step up.
    pub call_id: String,
    /// The nested agent's session for this call.
    pub session_id: String,
}

impl Via {
    /// A step through `call_id`, a call of `tool`, whose turn runs in
    /// `session_id`.
    pub fn new(
        tool: impl Into<String>,
        call_id: impl Into<String>,
        session_id: impl Into<String>,
    ) -> Self {
        Via {
            tool: tool.into(),
            call_id: call_id.into(),
            session_id: session_id.into(),
        }
    }
}

impl Delta {
    /// A delta of `session_id`.
    pub fn new(session_id: impl Into<String>, kind: DeltaKind) -> Self {
        Delta {
            session_id: session_id.into(),
            reply_to: None,
            kind,
            path: Vec::new(),
        }
    }

    /// Tags the delta with the `path` of calls it came through (see
    /// [`path`](Self::path)).
    #[must_use]
    pub fn via(mut self, path: Vec<Via>) -> Self {
        self.path = path;
        self
    }

    /// Says which user message the reply answers.
    #[must_use]
    pub fn replying_to(mut self, id: impl Into<String>) -> Self {
        self.reply_to = Some(id.into());
        self
    }
}

/// What a [`Delta`] carries. Serialized (for a store that relays deltas
/// between processes) as `{"text": "..."}`, `{"tool_call": {...}}` and
/// so on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeltaKind {
    /// More of the answer's text.
    Text(String),
    /// More of the model's visible reasoning.
    Thought(String),
    /// A tool call begins.
    ToolCall {
        /// The call's position in the reply, from 0.
        index: usize,
        /// The provider's call id.
        id: String,
        /// The tool.
        name: String,
    },
    /// More of a tool call's arguments, as JSON text.
    ToolArguments {
        /// The call's position in the reply, from 0.
        index: usize,
        /// The piece.
        delta: String,
    },
    /// A message a nested agent stored in its own session (its tool
    /// calls and results, progress notes, calls held for a person, its
    /// answer), shown where its [`path`](Delta::path) leads.
    Message(Box<Message>),
}
