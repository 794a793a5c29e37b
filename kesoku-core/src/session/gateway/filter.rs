//! [`Filter`]: which messages a gateway listener wants.

use crate::session::message::{Message, Role, Status};
use crate::session::store::{Header, Seq};

/// Which messages a listener wants.
///
/// ```
/// use kesoku_core::gateway::Filter;
/// use kesoku_core::{Message, MessageType, Role, Status};
///
/// let waiting = Filter::new().status(Status::PendingAgent);
/// let prompt = Message::new("s", Role::User, MessageType::Text, "hi").with_status(Status::PendingAgent);
/// assert!(waiting.matches(&prompt));
/// assert!(!Filter::new().session("other").matches(&prompt));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    session: Option<String>,
    pub(super) status: Option<Status>,
    roles: Option<Vec<Role>>,
    pub(super) after: Option<Seq>,
}

impl Filter {
    /// Every message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only this session's messages.
    #[must_use]
    pub fn session(mut self, id: impl Into<String>) -> Self {
        self.session = Some(id.into());
        self
    }

    /// Only messages with this status (as stored, for the replay; as
    /// posted, for live ones).
    #[must_use]
    pub fn status(mut self, status: Status) -> Self {
        self.status = Some(status);
        self
    }

    /// Only messages from these roles.
    #[must_use]
    pub fn roles(mut self, roles: impl IntoIterator<Item = Role>) -> Self {
        self.roles = Some(roles.into_iter().collect());
        self
    }

    /// Replays the messages stored after `seq` (live ones follow as
    /// ever). Without it, a filter with a status replays every stored
    /// message with that status, and one without replays nothing: it
    /// starts with what is posted after [`Gateway::listen`](super::Gateway::listen) returned.
    #[must_use]
    pub fn after(mut self, seq: Seq) -> Self {
        self.after = Some(seq);
        self
    }

    /// Whether a message with this header may pass the filter (it does,
    /// since the filter reads nothing else).
    pub(super) fn admits(&self, header: &Header) -> bool {
        self.session
            .as_deref()
            .is_none_or(|s| s == header.session_id)
            && self.status.is_none_or(|s| s == header.status)
            && self.roles.as_ref().is_none_or(|r| r.contains(&header.role))
    }

    /// Whether `message` passes the filter.
    pub fn matches(&self, message: &Message) -> bool {
        self.session
            .as_deref()
            .is_none_or(|s| s == message.session_id)
            && self.status.is_none_or(|s| s == message.status)
            && self
                .roles
                .as_ref()
                .is_none_or(|r| r.contains(&message.role))
    }
}
