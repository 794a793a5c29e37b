//! The serde shape of `Message` and `ToolRequest`: public contracts.

use kesoku::{Message, MessageType, Role, Status, ToolRequest};
use serde_json::json;

#[test]
fn message_serializes_with_exactly_the_seed_fields() {
    let mut m = Message::new("s-1", Role::Assistant, MessageType::ToolCall, "add(1, 2)")
        .with_sender("claude")
        .with_status(Status::PendingAgent)
        .with_parent("m-0");
    m.metadata.insert("k".into(), json!([1]));
    let wire = serde_json::to_value(&m).unwrap();
    let keys: Vec<&str> = wire
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "session_id",
            "sender",
            "role",
            "type",
            "status",
            "content",
            "metadata",
            "timestamp",
            "parent_id"
        ]
    );
    assert_eq!(wire["role"], "assistant");
    assert_eq!(wire["type"], "tool_call");
    assert_eq!(wire["status"], "pending_agent");
    assert_eq!(wire["parent_id"], "m-0");
    assert_eq!(wire["metadata"], json!({"k": [1]}));
    // RFC 3339 timestamps, and a round trip is lossless.
    assert!(wire["timestamp"].as_str().unwrap().contains('T'));
    let back: Message = serde_json::from_value(wire).unwrap();
    assert_eq!(back, m);
}

#[test]
fn every_enum_value_is_snake_case() {
    let roles = [Role::User, Role::Assistant, Role::Tool, Role::System];
    assert_eq!(
        serde_json::to_value(roles).unwrap(),
        json!(["user", "assistant", "tool", "system"])
    );
    let kinds = [
        MessageType::Text,
        MessageType::Thought,
        MessageType::ToolCall,
        MessageType::ToolResult,
    ];
    assert_eq!(
        serde_json::to_value(kinds).unwrap(),
        json!(["text", "thought", "tool_call", "tool_result"])
    );
    let statuses = [
        Status::PendingAgent,
        Status::Processing,
        Status::Processed,
        Status::Interrupted,
        Status::Error,
        Status::Pending,
        Status::Delivered,
        Status::Responded,
    ];
    assert_eq!(
        serde_json::to_value(statuses).unwrap(),
        json!([
            "pending_agent",
            "processing",
            "processed",
            "interrupted",
            "error",
            "pending",
            "delivered",
            "responded"
        ])
    );
}

#[test]
fn only_session_role_type_and_content_are_needed() {
    let m: Message = serde_json::from_value(json!({
        "session_id": "s", "role": "tool", "type": "tool_result", "content": "ok"
    }))
    .unwrap();
    assert_eq!(m.id.len(), 36, "a UUID: {}", m.id);
    assert_eq!(m.sender, "");
    assert_eq!(m.status, Status::Pending);
    assert!(m.metadata.is_empty());
    assert!(m.parent_id.is_none());
    assert!((chrono::Utc::now() - m.timestamp).num_seconds().abs() < 5);

    for missing in ["session_id", "role", "type", "content"] {
        let mut v = json!({"session_id": "s", "role": "tool", "type": "text", "content": "x"});
        v.as_object_mut().unwrap().remove(missing);
        let err = serde_json::from_value::<Message>(v)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("missing field `{missing}`")), "{err}");
    }
    let err = serde_json::from_value::<Message>(json!({
        "session_id": "s", "role": "robot", "type": "text", "content": "x"
    }))
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown variant `robot`"), "{err}");
}

#[test]
fn tool_request_takes_object_or_string_arguments() {
    let claude: ToolRequest =
        serde_json::from_value(json!({"id": "toolu_1", "name": "add", "arguments": {"a": 1}}))
            .unwrap();
    assert_eq!(claude.parse_arguments().unwrap()["a"], 1);
    let openai: ToolRequest =
        serde_json::from_value(json!({"id": "call_1", "name": "add", "arguments": "{\"a\": 1}"}))
            .unwrap();
    assert_eq!(openai.parse_arguments().unwrap()["a"], 1);
    // Absent or blank arguments are an empty object.
    let none: ToolRequest = serde_json::from_value(json!({"id": "c", "name": "now"})).unwrap();
    assert_eq!(none.arguments, serde_json::Value::Null);
    let blank = ToolRequest::new("c", "now", json!(""));
    assert_eq!(*blank.parse_arguments().unwrap(), json!({}));
    // It serializes back to the same shape.
    assert_eq!(
        serde_json::to_value(&openai).unwrap(),
        json!({"id": "call_1", "name": "add", "arguments": "{\"a\": 1}"})
    );
}

#[test]
fn a_tool_call_message_carries_the_call() {
    let request = ToolRequest::new("call_7", "add", json!({"a": 1, "b": 2}));
    let m = Message::tool_call("s", &request);
    assert_eq!((m.role, m.kind), (Role::Assistant, MessageType::ToolCall));
    assert_eq!(m.meta_str("call_id"), Some("call_7"));
    assert_eq!(m.meta_str("tool_name"), Some("add"));
    assert_eq!(m.metadata["arguments"], json!({"a": 1, "b": 2}));
}
