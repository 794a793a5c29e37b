//! [`Delta`]: a piece of a reply as the model writes it. The gateway
//! delivers deltas live to whoever listens and never stores them: the
//! finished message is stored once, as it always is.

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
}

impl Delta {
    /// A delta of `session_id`.
    pub fn new(session_id: impl Into<String>, kind: DeltaKind) -> Self {
        Delta {
            session_id: session_id.into(),
            reply_to: None,
            kind,
        }
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
}
