//! Other crates' types as tool arguments and struct fields: `ToolArg` for
//! `uuid`, `chrono`, `url` and `std::time::Duration` (each behind a
//! feature of its name), and a schema given to a type without one
//! (`#[arg(schema = ...)]`, `#[kesoku(schema = ...)]`), through the
//! runner: the schema the model sees, and what it may send.
#![cfg(all(
    feature = "uuid",
    feature = "chrono",
    feature = "url",
    feature = "duration"
))]

use std::time::Duration;

use kesoku::{Message, Schema, ToolArg, ToolContext, ToolRequest, ToolRunner, tool};
use serde::Deserialize;
use serde_json::{Value, json};

/// A meeting to book.
#[derive(Debug, Deserialize, ToolArg)]
struct Meeting {
    /// Its id.
    id: uuid::Uuid,
    /// When it starts.
    start: chrono::DateTime<chrono::Utc>,
    /// The host that records it (a type with no `ToolArg`: a schema is
    /// given where it is used).
    #[kesoku(schema = Schema::formatted("ipv4"))]
    recorder: std::net::Ipv4Addr,
    /// How long it lasts.
    length: Duration,
}

/// Books a meeting.
///
/// # Arguments
/// * `meeting` - The meeting.
/// * `room` - Where the notes go.
/// * `gateway` - The address it is reached through.
#[tool]
fn book_meeting(
    meeting: Meeting,
    room: url::Url,
    #[arg(schema = Schema::formatted("ipv6"))] gateway: std::net::Ipv6Addr,
) -> String {
    format!(
        "{} at {} by {} via {} for {}s in {}",
        meeting.id,
        meeting.start.format("%H:%M"),
        meeting.recorder,
        gateway,
        meeting.length.as_secs(),
        room.host_str().unwrap_or_default()
    )
}

async fn run(args: Value) -> Message {
    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    let request = ToolRequest::new("c1", "book_meeting", args);
    let message = Message::tool_call("s", &request);
    runner.execute(&request, &message, None).await
}

#[test]
fn each_type_shows_the_form_its_deserialize_takes() {
    let params = book_meeting::SCHEMA.parameters_json();
    let meeting = &params["properties"]["meeting"]["properties"];
    assert_eq!(
        meeting["id"],
        json!({"type": "string", "format": "uuid", "description": "Its id."})
    );
    assert_eq!(meeting["start"]["format"], "date-time");
    assert_eq!(meeting["recorder"]["format"], "ipv4");
    assert_eq!(meeting["length"]["required"], json!(["secs", "nanos"]));
    assert_eq!(params["properties"]["room"]["format"], "uri");
    assert_eq!(params["properties"]["gateway"]["format"], "ipv6");
}

#[tokio::test]
async fn values_in_those_forms_reach_the_function() {
    let result = run(json!({
        "meeting": {
            "id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
            "start": "2026-12-05T14:30:00Z",
            "recorder": "10.0.0.7",
            "length": {"secs": 1800, "nanos": 0}
        },
        "room": "https://notes.example.com/r/1",
        "gateway": "::1"
    }))
    .await;
    assert_eq!(
        result.content,
        "67e55044-10b1-426f-9247-bb680e5fe0c8 at 14:30 by 10.0.0.7 via ::1 for 1800s in notes.example.com",
        "{result:?}"
    );
}

#[tokio::test]
async fn a_value_out_of_form_is_named_to_the_model() {
    let result = run(json!({
        "meeting": {
            "id": "not-a-uuid",
            "start": "2026-12-05T14:30:00Z",
            "recorder": "10.0.0.7",
            "length": {"secs": 1800}
        },
        "room": "https://notes.example.com/r/1",
        "gateway": "::1"
    }))
    .await;
    let error = result.meta_str("tool_error").unwrap_or_default();
    assert!(error.contains("meeting.length.nanos"), "{error}");
    let result = run(json!({
        "meeting": {
            "id": "not-a-uuid",
            "start": "2026-12-05T14:30:00Z",
            "recorder": "10.0.0.7",
            "length": {"secs": 1800, "nanos": 0}
        },
        "room": "https://notes.example.com/r/1",
        "gateway": "::1"
    }))
    .await;
    let error = result.meta_str("tool_error").unwrap_or_default();
    assert!(
        error.contains("meeting") && error.contains("UUID"),
        "{error}"
    );
}
