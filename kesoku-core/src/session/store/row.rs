//! A [`Message`] as the columns of a SQL store's row, and back: one
//! encoding for every SQL backend (`SQLite`, PostgreSQL), so a message
//! reads back the same from each.
//!
//! Roles, types and statuses keep their JSON spelling; timestamps are
//! RFC 3339 text in UTC with nanoseconds, fixed width (so they round-trip
//! exactly and text order is time order); metadata is its JSON object as
//! text, in its original key order.
//!
//! ```
//! use kesoku_core::store::row::{self, Row};
//! use kesoku_core::{Message, MessageType, Role, Status};
//!
//! let m = Message::new("s", Role::User, MessageType::Text, "hi").with_status(Status::PendingAgent);
//! let r = Row::encode(&m);
//! assert_eq!((r.role.as_str(), r.status.as_str()), ("user", "pending_agent"));
//! assert_eq!(row::parse_time(&r.timestamp).unwrap(), m.timestamp);
//! let status: Status = row::variant(&r.status).unwrap();
//! assert_eq!(status, Status::PendingAgent);
//! ```

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer, value::StrDeserializer};

use super::title_of;
use crate::session::message::Message;

/// A message's columns, encoded on the caller's task so a database
/// thread or connection only runs SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Row {
    /// The message id.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Who sent it.
    pub sender: String,
    /// Its role, as [`name`] spells it.
    pub role: String,
    /// Its type, as [`name`] spells it.
    pub kind: String,
    /// Its status, as [`name`] spells it.
    pub status: String,
    /// Its content.
    pub content: String,
    /// Its metadata, a JSON object as text.
    pub metadata: String,
    /// Its timestamp, as [`time`] writes it.
    pub timestamp: String,
    /// The message it answers.
    pub parent_id: Option<String>,
    /// The session's title, if this message gives it one.
    pub title: Option<String>,
}

impl Row {
    /// `message`'s columns.
    pub fn encode(message: &Message) -> Self {
        Row {
            id: message.id.clone(),
            session_id: message.session_id.clone(),
            sender: message.sender.clone(),
            role: name(message.role),
            kind: name(message.kind),
            status: name(message.status),
            content: message.content.clone(),
            metadata: serde_json::to_string(&message.metadata)
                .expect("a JSON map with string keys always serializes"),
            timestamp: time(&message.timestamp),
            parent_id: message.parent_id.clone(),
            title: title_of(message),
        }
    }
}

/// The `snake_case` name serde gives a unit variant (a role, type or
/// status): the spelling of its JSON form.
pub fn name(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("a unit variant serializes as a string, not {other:?}"),
    }
}

/// A role, type or status from its stored name.
pub fn variant<T: DeserializeOwned>(name: &str) -> Result<T, String> {
    let de: StrDeserializer<'_, serde::de::value::Error> = name.into_deserializer();
    T::deserialize(de).map_err(|e| e.to_string())
}

/// A timestamp as stored: RFC 3339, UTC, nanoseconds, fixed width.
pub fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// A stored timestamp.
pub fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("timestamp `{text}`: {e}"))
}

#[cfg(test)]
mod tests {
    use crate::{MessageType, Role, Status};
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn timestamps_are_fixed_width_and_exact() {
        let t = Utc.timestamp_opt(1_700_000_000, 1).unwrap();
        assert_eq!(time(&t), "2023-11-14T22:13:20.000000001Z");
        assert_eq!(parse_time(&time(&t)), Ok(t));
        let whole = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        assert_eq!(time(&whole).len(), time(&t).len());
    }

    #[test]
    fn names_are_the_json_spelling() {
        assert_eq!(name(Status::PendingAgent), "pending_agent");
        assert_eq!(name(MessageType::ToolResult), "tool_result");
        assert_eq!(variant::<Role>("assistant"), Ok(Role::Assistant));
        assert!(variant::<Role>("wizard").unwrap_err().contains("wizard"));
    }
}
