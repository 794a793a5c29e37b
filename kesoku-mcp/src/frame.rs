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

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, InitializeRequestParams,
    PaginatedRequestParams,
};
use serde_json::Value;

/// `serde_json` refuses a document nested deeper than this.
pub(crate) const MAX_DEPTH: usize = 127;

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
    /// A message rmcp can take; `text` is what was sent, with lone
    /// surrogates replaced, which rmcp parses as `message`.
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
    let id = top.id.as_ref();
    let reply_id = id.map_or("null", |id| id.reply(text));
    let is_request = top.method.is_some();
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
            text: repaired.into_owned(),
        },
        (_, Some(m)) if KNOWN_METHODS.contains(&m) => {
            refuse(INVALID_PARAMS, &params_problem(m, params))
        }
        (_, Some(m)) => refuse(METHOD_NOT_FOUND, &format!("method not found: `{m}`")),
        (Err(e), None) => Frame::Skip(Skip::Unreadable(e.to_string())),
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

/// Where in a message a problem lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Id,
    Params,
    Other,
}

impl Place {
    fn of(member: &str) -> Self {
        match member {
            "id" => Place::Id,
            "params" => Place::Params,
            _ => Place::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// A top-level member's value: its span in the text.
#[derive(Debug, Clone)]
struct Token {
    start: usize,
    end: usize,
    kind: Kind,
    /// A string with a lone surrogate escape.
    lone_surrogate: bool,
}

impl Token {
    /// The id to answer with: as the client wrote it if a string or a
    /// number, else `null` (JSON-RPC: an id that cannot be read).
    fn reply<'t>(&self, text: &'t str) -> &'t str {
        match self.kind {
            Kind::String | Kind::Number => &text[self.start..self.end],
            _ => "null",
        }
    }

    /// An id rmcp carries unchanged: a string without lone surrogates, or
    /// an integer that fits an i64.
    fn is_plain(&self, text: &str) -> bool {
        match self.kind {
            Kind::String => !self.lone_surrogate,
            Kind::Number => text[self.start..self.end].parse::<i64>().is_ok(),
            _ => false,
        }
    }
}

/// The top-level object's members that matter here.
#[derive(Debug, Default)]
struct Top {
    id: Option<Token>,
    method: Option<Token>,
}

/// What a scan of a JSON text found.
#[derive(Debug, Default)]
struct Scan {
    /// `None` if the text is not an object.
    top: Option<Top>,
    /// Byte offsets of lone surrogate escapes (the `\`).
    lone: Vec<usize>,
    /// The first place nested deeper than [`MAX_DEPTH`].
    too_deep: Option<Place>,
    /// The first number beyond a 64-bit float, and where.
    out_of_range: Option<(Place, String)>,
}

impl Scan {
    /// Scans `text`; `None` if it is not JSON.
    fn of(text: &str) -> Option<Scan> {
        Scanner {
            b: text.as_bytes(),
            i: 0,
            scan: Scan::default(),
        }
        .run()
    }

    /// What `serde_json` would refuse, and where.
    fn unparsable(&self) -> Option<(Place, String)> {
        if let Some(place) = self.too_deep {
            return Some((place, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.out_of_range.as_ref().map(|(place, number)| {
            let shown: String = number.chars().take(40).collect();
            (
                *place,
                format!("the number {shown} is beyond the range of a 64-bit float"),
            )
        })
    }

    /// The text with each lone surrogate escape replaced by `\ufffd` (the
    /// same length, so spans still hold).
    fn repaired<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.lone.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_owned();
        for &at in &self.lone {
            out.replace_range(at..at + 6, "\\ufffd");
        }
        Cow::Owned(out)
    }
}

/// A JSON scanner with an explicit stack, so that depth costs no recursion.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    scan: Scan,
}

impl Scanner<'_> {
    fn run(mut self) -> Option<Scan> {
        // Open containers: `{` or `[`.
        let mut stack: Vec<u8> = Vec::new();
        // The top-level member being read: its name, and where its value
        // starts once it has begun.
        let mut member: Option<(String, Option<usize>)> = None;
        if self.peek() == Some(b'{') {
            self.scan.top = Some(Top::default());
        }
        'value: loop {
            self.ws();
            let start = self.i;
            if stack.len() == 1
                && let Some((_, begun @ None)) = &mut member
            {
                *begun = Some(start);
            }
            let place = member.as_ref().map_or(Place::Other, |(m, _)| Place::of(m));
            let kind;
            let mut lone = false;
            match self.peek()? {
                open @ (b'{' | b'[') => {
                    self.i += 1;
                    stack.push(open);
                    if stack.len() > MAX_DEPTH && self.scan.too_deep.is_none() {
                        self.scan.too_deep = Some(place);
                    }
                    self.ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek() != Some(close) {
                        if open == b'{' {
                            let name = self.key()?;
                            if stack.len() == 1 {
                                member = Some((self.name(name), None));
                            }
                        }
                        continue 'value;
                    }
                    self.i += 1;
                    stack.pop();
                    kind = if open == b'{' {
                        Kind::Object
                    } else {
                        Kind::Array
                    };
                }
                b'"' => {
                    lone = self.string()?;
                    kind = Kind::String;
                }
                b'-' | b'0'..=b'9' => {
                    self.number(place)?;
                    kind = Kind::Number;
                }
                b't' => {
                    self.literal(b"true")?;
                    kind = Kind::Bool;
                }
                b'f' => {
                    self.literal(b"false")?;
                    kind = Kind::Bool;
                }
                b'n' => {
                    self.literal(b"null")?;
                    kind = Kind::Null;
                }
                _ => return None,
            }
            // A value ended (a scalar, or an empty container).
            self.ended(&stack, &mut member, kind, lone);
            // Close containers, or go on to the next element.
            loop {
                self.ws();
                let Some(&open) = stack.last() else {
                    return (self.i == self.b.len()).then_some(self.scan);
                };
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if open == b'{' {
                            let name = self.key()?;
                            if stack.len() == 1 {
                                member = Some((self.name(name), None));
                            }
                        }
                        continue 'value;
                    }
                    b'}' if open == b'{' => {}
                    b']' if open == b'[' => {}
                    _ => return None,
                }
                self.i += 1;
                stack.pop();
                let kind = if open == b'{' {
                    Kind::Object
                } else {
                    Kind::Array
                };
                self.ended(&stack, &mut member, kind, false);
            }
        }
    }

    /// Records a value that ended at `self.i`, if it is a top-level member.
    fn ended(
        &mut self,
        stack: &[u8],
        member: &mut Option<(String, Option<usize>)>,
        kind: Kind,
        lone_surrogate: bool,
    ) {
        if stack.len() != 1 {
            return;
        }
        let Some((name, Some(start))) = member.take() else {
            return;
        };
        let Some(top) = &mut self.scan.top else {
            return;
        };
        let token = Token {
            start,
            end: self.i,
            kind,
            lone_surrogate,
        };
        // The first of a repeated member is kept, as for the id serde_json
        // would refuse anyway.
        match name.as_str() {
            "id" if top.id.is_none() => top.id = Some(token),
            "method" if top.method.is_none() => top.method = Some(token),
            _ => {}
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A member name and its colon; the name's span, quotes included.
    fn key(&mut self) -> Option<(usize, usize)> {
        self.ws();
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.i;
        self.string()?;
        let end = self.i;
        self.ws();
        if self.peek() != Some(b':') {
            return None;
        }
        self.i += 1;
        Some((start, end))
    }

    /// A member name, decoded (`"\u0069d"` is `id`); one with a lone
    /// surrogate is no name that matters here.
    fn name(&self, (start, end): (usize, usize)) -> String {
        serde_json::from_slice(&self.b[start..end]).unwrap_or_default()
    }

    /// A string; whether it has a lone surrogate escape.
    fn string(&mut self) -> Option<bool> {
        self.i += 1;
        let mut lone = false;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(lone);
                }
                b'\\' => match *self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                    b'u' => {
                        let unit = self.hex(self.i + 2)?;
                        if (0xD800..0xDC00).contains(&unit)
                            && self.b.get(self.i + 6..self.i + 8) == Some(b"\\u")
                            && self
                                .hex(self.i + 8)
                                .is_some_and(|low| (0xDC00..0xE000).contains(&low))
                        {
                            self.i += 12;
                        } else {
                            if (0xD800..0xE000).contains(&unit) {
                                self.scan.lone.push(self.i);
                                lone = true;
                            }
                            self.i += 6;
                        }
                    }
                    _ => return None,
                },
                0..0x20 => return None,
                _ => self.i += 1,
            }
        }
    }

    fn hex(&self, at: usize) -> Option<u32> {
        let digits = self.b.get(at..at + 4)?;
        let digits = std::str::from_utf8(digits).ok()?;
        if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number, by RFC 8259's grammar; notes one beyond a 64-bit float.
    fn number(&mut self, place: Place) -> Option<()> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
            integer = false;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        // serde_json reads integers as i64 or u64, and anything else as an
        // f64, refusing one that would be infinite.
        let fits = (integer && (text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()))
            || text.parse::<f64>().is_ok_and(f64::is_finite);
        if !fits && self.scan.out_of_range.is_none() {
            self.scan.out_of_range = Some((place, text.to_owned()));
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|d| d.is_ascii_digit()) {
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(text.contains(r"a\ufffdb\ufffd"), "{text}");
        // A pair stays a pair.
        let Frame::Message { text, .. } =
            read(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud83d\ude00"}}"#)
        else {
            panic!("served")
        };
        assert!(text.contains(r"\ud83d\ude00"));
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
