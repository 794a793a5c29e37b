//! A [`Message`] as a row of `messages`, and back, field for field.

use kesoku_core::Message;
use kesoku_core::store::Seq;
use rusqlite::types::FromSql;

use crate::error::Undecodable;

/// The columns [`decode`] reads, in its order.
pub(crate) const COLUMNS: &str =
    "seq, id, session_id, sender, role, type, status, content, metadata, timestamp, parent_id";

use kesoku_core::store::row::variant;
pub(crate) use kesoku_core::store::row::{Row, name, parse_time};

/// `message` as a row.
pub(crate) fn encode(message: &Message) -> Row {
    Row::encode(message)
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
