//! A [`Message`] as a row of `messages`, and back, field for field.

use chrono::{DateTime, SecondsFormat, Utc};
use kesoku_core::Message;
use kesoku_core::store::{Seq, title_of};
use rusqlite::types::FromSql;
use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer, value::StrDeserializer};

use crate::error::Undecodable;

/// The columns [`decode`] reads, in its order.
pub(crate) const COLUMNS: &str =
    "seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id";

/// A message ready to be bound to `INSERT INTO messages`, encoded on the
/// caller's task so the database thread only runs SQL.
pub(crate) struct Row {
    pub(crate) id: String,
    pub(crate) session_id: String,
    pub(crate) sender: String,
    pub(crate) role: String,
    pub(crate) kind: String,
    pub(crate) status: String,
    pub(crate) content: String,
    pub(crate) metadata: String,
    pub(crate) timestamp: String,
    pub(crate) parent_id: Option<String>,
    /// The session's title, if this message gives it one.
    pub(crate) title: Option<String>,
}

/// `message` as a row.
pub(crate) fn encode(message: &Message) -> Row {
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

/// The `snake_case` name serde gives a unit variant (a role, type or
/// status): the store keeps the same spelling as the JSON form.
pub(crate) fn name(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("a unit variant serializes as a string, not {other:?}"),
    }
}

/// A timestamp as stored: RFC 3339, UTC, nanoseconds, fixed width (so
/// text order is time order).
pub(crate) fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// A stored timestamp.
pub(crate) fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("timestamp `{text}`: {e}"))
}

/// A row of [`COLUMNS`] as a message and its seq.
pub(crate) fn decode(row: &rusqlite::Row<'_>) -> Result<(Seq, Message), Undecodable> {
    let seq: Seq = column(row, 0, "seq", || "a row without a seq".into())?;
    let id: String = column(row, 1, "id", || format!("seq {seq}"))?;
    let bad = |message: String| Undecodable {
        id: id.clone(),
        message,
    };
    let text = |i: usize, what: &str| column::<String>(row, i, what, || id.clone());
    let message = Message {
        session_id: text(2, "session_id")?,
        sender: text(3, "sender")?,
        role: variant(&text(4, "role")?).map_err(bad)?,
        kind: variant(&text(5, "type")?).map_err(bad)?,
        status: variant(&text(6, "status")?).map_err(bad)?,
        content: text(7, "content")?,
        metadata: serde_json::from_str(&text(8, "metadata")?)
            .map_err(|e| bad(format!("metadata is not a JSON object: {e}")))?,
        timestamp: parse_time(&text(9, "timestamp")?).map_err(bad)?,
        parent_id: column(row, 10, "parent_id", || id.clone())?,
        id: id.clone(),
    };
    Ok((seq, message))
}

/// Column `i`, or why it cannot be read, naming the row with `id`.
fn column<T: FromSql>(
    row: &rusqlite::Row<'_>,
    i: usize,
    what: &str,
    id: impl FnOnce() -> String,
) -> Result<T, Undecodable> {
    row.get(i).map_err(|e| Undecodable {
        id: id(),
        message: format!("column `{what}`: {e}"),
    })
}

/// A role, type or status from its stored name.
fn variant<T: DeserializeOwned>(name: &str) -> Result<T, String> {
    let de: StrDeserializer<'_, serde::de::value::Error> = name.into_deserializer();
    T::deserialize(de).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use kesoku_core::{MessageType, Role, Status};

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
