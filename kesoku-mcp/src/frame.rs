//! One JSON-RPC message from the bytes a client sent, read so that every
//! request with an id gets an answer with that id.
//!
//! rmcp parses a message with `serde_json` alone, and drops what `serde_json`
//! refuses without a word (or answers it with an id-less `-32600`): strings
//! with lone surrogate escapes (`"\ud800"`, which a JavaScript client sends
//! by cutting an emoji in half), numbers beyond a 64-bit float, nesting
//! deeper than `serde_json`'s recursion limit, params of the wrong shape. And
//! a known method whose params do not fit falls through to a custom
//! request, answered "method not found".
//!
//! [`read`] first scans the text itself, without recursion, and so learns
//! the id, the method and what `serde_json` would trip on. Lone surrogates
//! are replaced with U+FFFD (the message is then served); what cannot be
//! served is answered here with the JSON-RPC error that fits, echoing the
//! id as the client wrote it; the rest goes to rmcp.

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, InitializeRequestParams,
    PaginatedRequestParams,
};
use serde_json::Value;

use crate::json_scan::{Place, Scan};

const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;
const METHOD_NOT_FOUND: i32 = -32601;
const INVALID_PARAMS: i32 = -32602;

/// The requests a client may send a server, as rmcp knows them: one of
/// these arriving as a custom request means its params did not fit.
const KNOWN_METHODS: &[&str] = &[
    "ping",
    "initialize",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// What to do with one message.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A message rmcp can take; `text` is it as JSON, which rmcp parses
    /// as `message`: what was sent as `serde_json` read it (lone surrogates
    /// replaced, a repeated member's last kept) and wrote it again, since
    /// rmcp's own parser refuses a repeated member.
    Message {
        message: Box<ClientJsonRpcMessage>,
        text: String,
    },
    /// A JSON-RPC error to send back instead (one line of JSON, no
    /// newline); `has_id` when it carries the request's id.
    Answer { text: String, has_id: bool },
    /// Nothing to answer: not JSON (answering garbage can start an echo
    /// storm between two peers; the official SDKs ignore it), or a
    /// notification or response that cannot be read.
    Skip(Skip),
}

/// Why a message is not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Skip {
    /// An empty line.
    Empty,
    /// Not JSON.
    NotJson,
    /// A notification or a response that cannot be read.
    Unreadable(String),
}

impl Frame {
    /// The answer to a body that is not JSON (`-32700`, no id): for HTTP,
    /// where a reply cannot echo back and forth.
    pub(crate) fn parse_error() -> String {
        answer("null", PARSE_ERROR, "the message is not JSON")
    }
}

/// Reads one message (a line over stdio, a body over HTTP).
pub(crate) fn read(bytes: &[u8]) -> Frame {
    // JSON is UTF-8 (RFC 8259 §8.1); a stray invalid byte becomes U+FFFD
    // rather than losing the whole request.
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim_ascii().is_empty() {
        return Frame::Skip(Skip::Empty);
    }
    let Some(scan) = Scan::of(text) else {
        return Frame::Skip(Skip::NotJson);
    };
    let Some(top) = &scan.top else {
        return Frame::Answer {
            text: answer(
                "null",
                INVALID_REQUEST,
                "a message must be a JSON object (batches are not supported)",
            ),
            has_id: false,
        };
    };
    let is_request = top.method.is_some();
    if top.repeated_id {
        // Which was meant is unknown (serde_json, and so rmcp, keeps the
        // last; the scan the first): JSON-RPC then answers `null`.
        return unknown_id(is_request, "the id is given more than once");
    }
    let id = top.id.as_ref();
    let reply_id = id.map_or("null", |id| id.reply(text));
    // Refuses with `code` and `message`, or skips a message with no id.
    let refuse = |code: i32, message: &str| match id {
        Some(_) if is_request => Frame::Answer {
            text: answer(reply_id, code, message),
            has_id: reply_id != "null",
        },
        _ => Frame::Skip(Skip::Unreadable(message.to_owned())),
    };

    if let Some((place, what)) = scan.unparsable() {
        return match place {
            Place::Params => refuse(INVALID_PARAMS, &format!("params: {what}")),
            Place::Id => refuse(INVALID_REQUEST, &format!("id: {what}")),
            Place::Other => refuse(INVALID_REQUEST, &what),
        };
    }
    if let Some(id) = id
        && !id.is_plain(text)
    {
        // rmcp holds an id as an i64 or a string: another id could not be
        // echoed as it came, so the request is refused here, with it.
        return refuse(
            INVALID_REQUEST,
            "the id must be a string of Unicode text or an integer in 64-bit range",
        );
    }
    let repaired = scan.repaired(text);
    let value: Value = match serde_json::from_str(&repaired) {
        Ok(value) => value,
        Err(e) => return refuse(INVALID_REQUEST, &format!("the message cannot be read: {e}")),
    };
    if value.get("jsonrpc") != Some(&Value::from("2.0")) {
        return refuse(INVALID_REQUEST, "`jsonrpc` must be \"2.0\"");
    }
    let method = match value.get("method") {
        None => None,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => return refuse(INVALID_REQUEST, "`method` must be a string"),
    };
    if method.is_none()
        && id.is_some()
        && value.get("result").is_none()
        && value.get("error").is_none()
    {
        return Frame::Answer {
            text: answer(
                reply_id,
                INVALID_REQUEST,
                "a request needs a `method` (a response, a `result` or an `error`)",
            ),
            has_id: reply_id != "null",
        };
    }
    let params = value.get("params");
    let parsed = serde_json::from_value::<ClientJsonRpcMessage>(value.clone());
    let misfit = match (&parsed, method) {
        // A known method that fell through to a custom request: its params
        // did not fit.
        (Ok(ClientJsonRpcMessage::Request(r)), Some(m))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && KNOWN_METHODS.contains(&m) =>
        {
            Some(m)
        }
        (Err(_), Some(m)) => Some(m),
        _ => None,
    };
    match (parsed, misfit) {
        (Ok(message), None) => Frame::Message {
            message: Box::new(message),
            text: value.to_string(),
        },
        (_, Some(m)) if KNOWN_METHODS.contains(&m) => {
            refuse(INVALID_PARAMS, &params_problem(m, params))
        }
        (_, Some(m)) => refuse(METHOD_NOT_FOUND, &format!("method not found: `{m}`")),
        (Err(e), None) => Frame::Skip(Skip::Unreadable(e.to_string())),
    }
}

/// Refuses a message whose id cannot be told: a request is answered with
/// a `null` id, anything else skipped.
fn unknown_id(is_request: bool, message: &str) -> Frame {
    if is_request {
        Frame::Answer {
            text: answer("null", INVALID_REQUEST, message),
            has_id: false,
        }
    } else {
        Frame::Skip(Skip::Unreadable(message.to_owned()))
    }
}

/// Why `params` do not fit `method`, as precisely as can be said.
fn params_problem(method: &str, params: Option<&Value>) -> String {
    let kind = match params {
        None | Some(Value::Object(_)) => None,
        Some(Value::Array(_)) => Some("an array"),
        Some(Value::String(_)) => Some("a string"),
        Some(Value::Number(_)) => Some("a number"),
        Some(Value::Bool(_)) => Some("a boolean"),
        Some(Value::Null) => Some("null"),
    };
    if let Some(kind) = kind {
        return format!("the params of `{method}` must be an object, not {kind}");
    }
    let params = params.cloned().unwrap_or(Value::Null);
    let detail = match method {
        "tools/call" => serde_json::from_value::<CallToolRequestParams>(params).err(),
        "initialize" => serde_json::from_value::<InitializeRequestParams>(params).err(),
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            serde_json::from_value::<Option<PaginatedRequestParams>>(params).err()
        }
        _ => None,
    };
    match detail {
        Some(e) => format!("invalid params for `{method}`: {e}"),
        None => {
            format!("invalid params for `{method}` (a member such as `_meta` has the wrong type)")
        }
    }
}

/// A JSON-RPC error response; `id` is JSON text.
fn answer(id: &str, code: i32, message: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{code},\"message\":{}}}}}",
        Value::from(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_scan::Kind;

    fn answered(line: &str) -> Value {
        match read(line.as_bytes()) {
            Frame::Answer { text, .. } => serde_json::from_str(&text).unwrap(),
            other => panic!("expected an answer to {line}, got {other:?}"),
        }
    }

    #[test]
    fn top_level_members_are_found_at_any_position() {
        let scan = Scan::of(r#"{"params":{"a":[1,{"id":3}]},"id":"x","method":"ping"}"#).unwrap();
        let top = scan.top.unwrap();
        let id = top.id.unwrap();
        assert_eq!(id.kind, Kind::String);
        assert_eq!((id.start, id.end), (34, 37));
        let scan = Scan::of(r#"{"id":{"a":[]},"method":"m"}"#).unwrap();
        assert_eq!(scan.top.unwrap().id.unwrap().kind, Kind::Object);
    }

    #[test]
    fn garbage_is_not_json() {
        for text in [
            "{", "{\"a\":}", "[1,]", "01", "\"\\x\"", "{} {}", "tru", "-", "1.",
        ] {
            assert!(Scan::of(text).is_none(), "{text}");
        }
        for text in [
            "{}",
            "[]",
            " 1 ",
            "\"\\ud800\"",
            "-0.5e+3",
            "[[[]]]",
            "{\"a\":[{}]}",
        ] {
            assert!(Scan::of(text).is_some(), "{text}");
        }
    }

    #[test]
    fn what_serde_refuses_is_answered_with_the_id() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{{"a":{}1{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let a = answered(&deep);
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (7.into(), (-32602).into())
        );
        let a = answered(r#"{"jsonrpc":"2.0","id":"n","method":"ping","params":{"x":1e400}}"#);
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            ("n".into(), (-32602).into())
        );
        let a = answered(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#);
        assert_eq!(a["error"]["code"], -32602);
        let a = answered(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#);
        assert_eq!(a["error"]["code"], -32602);
        let a = answered(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#);
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (Value::Null, (-32600).into())
        );
    }

    #[test]
    fn a_repeated_id_is_refused_without_guessing_which() {
        // serde_json keeps the last of a repeated member, the scan the
        // first: either answer could carry the id the client did not mean.
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"ping","id":true}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","\u0069d":1}"#,
        ] {
            let a = answered(line);
            assert_eq!(
                (a["id"].clone(), a["error"]["code"].clone()),
                (Value::Null, (-32600).into()),
                "{line}"
            );
        }
        // A repeated id inside params is no concern of the framing.
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"id":1,"id":2}}}"#),
            Frame::Message { .. }
        ));
    }

    #[test]
    fn a_mark_line_ends_and_escaped_names_are_read() {
        let Frame::Message { text, .. } =
            read(b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n")
        else {
            panic!("served")
        };
        assert!(text.starts_with('{'), "{text:?}");
        let a = answered(r#"{"jsonrpc":"2.0","\u0069d":"e","method":"ping","params":[]}"#);
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            ("e".into(), (-32602).into())
        );
    }

    #[test]
    fn lone_surrogates_are_replaced_and_served() {
        let Frame::Message { text, .. } =
            read(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"a\ud800b\udc00"}}"#)
        else {
            panic!("served")
        };
        let sent: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(sent["params"]["x"], "a\u{fffd}b\u{fffd}", "{text}");
        // A pair stays a pair.
        let Frame::Message { text, .. } =
            read(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud83d\ude00"}}"#)
        else {
            panic!("served")
        };
        let sent: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(sent["params"]["x"], "\u{1f600}", "{text}");
        // An id with one is echoed as written.
        let Frame::Answer { text, has_id } =
            read(br#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#)
        else {
            panic!("answered")
        };
        assert!(has_id);
        assert!(text.contains(r#""id":"\ud800""#), "{text}");
    }
}
