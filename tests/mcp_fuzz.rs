//! A fuzz harness for MCP's JSON-RPC framing, against real server
//! processes: random valid and invalid messages (ids of every JSON type,
//! strange strings and lone surrogates, numbers beyond a float, deep
//! nesting, params and members of the wrong type, truncated messages and
//! garbage), over stdio to the fixture `mcp_test_server` and over HTTP to
//! `examples/mcp_server`, one process each for the whole run.
//!
//! The property: every request with an id gets exactly one answer, with
//! that id (as written, when rmcp cannot carry it; `null` for an id of the
//! wrong type), nothing else is answered but what cannot be read, and the
//! server stays up.
//!
//! 100 cases of up to 8 messages per transport by default (about a second);
//! `PROPTEST_CASES=2000` runs longer.
#![cfg(feature = "mcp")]

#[path = "support/example.rs"]
mod example;
use example::example;

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;
use serde_json::value::RawValue;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

/// Few shrinking steps: each may wait seconds for an answer that never
/// comes.
fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 64,
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// An id, by kind; the harness makes each one unique.
#[derive(Debug, Clone)]
enum Id {
    Absent,
    Int(i8),
    /// The content of a JSON string, escaped.
    Str(String),
    /// An integer beyond 64 bits.
    Big,
    Float,
    /// A number beyond a 64-bit float.
    Huge,
    Null,
    Bool,
    Object,
    Array,
}

/// One line or body sent.
#[derive(Debug, Clone)]
enum Item {
    Message {
        id: Id,
        id_last: bool,
        jsonrpc: &'static str,
        method: String,
        params: Option<String>,
    },
    /// A message cut short: not JSON.
    Truncated(Box<Item>, prop::sample::Index),
    /// JSON that is not an object.
    NotObject(String),
    /// Bytes that are not JSON (no newline).
    Junk(Vec<u8>),
}

/// The content of a JSON string: any text, escaped, and escapes `serde_json`
/// refuses or that must be decoded.
fn string_body() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        3 => any::<String>().prop_map(|s| {
            let quoted = serde_json::to_string(&s).unwrap();
            quoted[1..quoted.len() - 1].to_owned()
        }),
        1 => Just(r"\ud800".to_owned()),
        1 => Just(r"\udfff".to_owned()),
        1 => Just(r"\ud83d".to_owned()),
        1 => Just(r"\ud83d\ude00".to_owned()),
        1 => Just(r"\u0000\u00e9\/".to_owned()),
        1 => Just(r#"\"\\\n\t"#.to_owned()),
        1 => Just("é😀\u{2028}".to_owned()),
    ];
    prop::collection::vec(fragment, 0..4).prop_map(|v| v.concat())
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// Any JSON text, some of it beyond what `serde_json` reads.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::to_string(&f).unwrap()),
        Just("1e400".to_owned()),
        Just("-1.5E+999".to_owned()),
        Just("123456789012345678901234567890".to_owned()),
        string_body().prop_map(|s| format!("\"{s}\"")),
        (100usize..400).prop_map(nested),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((string_body(), inner), 0..4).prop_map(|v| {
                let members: Vec<String> = v.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

fn params() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        json_value().prop_map(Some),
        Just(Some(
            r#"{"name":"calculate_sum","arguments":{"a":1,"b":2}}"#.to_owned()
        )),
        string_body().prop_map(|w| Some(format!(
            r#"{{"name":"look_up","arguments":{{"word":"{w}"}}}}"#
        ))),
        (0u64..30)
            .prop_map(|ms| Some(format!(r#"{{"name":"wait_ms","arguments":{{"ms":{ms}}}}}"#))),
        json_value().prop_map(|v| Some(format!(r#"{{"_meta":{v}}}"#))),
        json_value().prop_map(|v| Some(format!(r#"{{"name":"look_up","arguments":{v}}}"#))),
        json_value().prop_map(|v| Some(format!(r#"{{"name":{v}}}"#))),
    ]
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        2 => Just(Id::Absent),
        3 => any::<i8>().prop_map(Id::Int),
        3 => string_body().prop_map(Id::Str),
        1 => Just(Id::Big),
        1 => Just(Id::Float),
        1 => Just(Id::Huge),
        1 => Just(Id::Null),
        1 => Just(Id::Bool),
        1 => Just(Id::Object),
        1 => Just(Id::Array),
    ]
}

fn message() -> impl Strategy<Value = Item> {
    let method = prop_oneof![
        3 => Just("\"tools/call\"".to_owned()),
        1 => Just("\"ping\"".to_owned()),
        1 => Just("\"tools/list\"".to_owned()),
        1 => Just("\"no/such\"".to_owned()),
        1 => Just("\"notifications/initialized\"".to_owned()),
        1 => string_body().prop_map(|m| format!("\"{m}\"")),
        1 => json_value(),
    ];
    let jsonrpc = prop_oneof![
        8 => Just(r#""jsonrpc":"2.0","#),
        1 => Just(""),
        1 => Just(r#""jsonrpc":"1.0","#),
        1 => Just(r#""jsonrpc":2,"#),
    ];
    (id(), any::<bool>(), jsonrpc, method, params()).prop_map(
        |(id, id_last, jsonrpc, method, params)| Item::Message {
            id,
            id_last,
            jsonrpc,
            method,
            params,
        },
    )
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        8 => message(),
        1 => (message(), any::<prop::sample::Index>())
            .prop_map(|(m, at)| Item::Truncated(Box::new(m), at)),
        1 => json_value().prop_map(|v| Item::NotObject(format!("[{v}]"))),
        1 => prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40)
            .prop_map(|mut bytes| {
                bytes.insert(0, b'#');
                Item::Junk(bytes)
            }),
    ]
}

/// What an item should get back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// One answer with this id (canonical form, see [`canon`]).
    Answer(String),
    /// One answer with a `null` id.
    NullAnswer,
    /// Nothing (over HTTP: no JSON-RPC answer with an id).
    Nothing,
}

/// An id's text in a form both sides agree on: a string or an integer
/// `serde_json` reads is compared as its value re-serialized (rmcp writes
/// ids anew), anything else exactly as written (echoed as it came).
fn canon(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::String(_)) => v.to_string(),
        Ok(Value::Number(n)) if n.is_i64() => n.to_string(),
        _ => raw.trim().to_owned(),
    }
}

/// The bytes to send and what they should get; `n` makes ids unique.
fn render(item: &Item, n: u64) -> (Vec<u8>, Expect) {
    match item {
        Item::Message {
            id,
            id_last,
            jsonrpc,
            method,
            params,
        } => {
            let id_text = match id {
                Id::Absent => None,
                Id::Int(sign) => {
                    let n = i64::try_from(n).unwrap();
                    Some(if *sign < 0 { -n } else { n }.to_string())
                }
                Id::Str(body) => Some(format!("\"f{n}:{body}\"")),
                Id::Big => Some(format!("{n}00000000000000000000000")),
                Id::Float => Some(format!("{n}.5")),
                Id::Huge => Some(format!("{n}e400")),
                Id::Null => Some("null".to_owned()),
                Id::Bool => Some("true".to_owned()),
                Id::Object => Some(format!("{{\"n\":{n}}}")),
                Id::Array => Some(format!("[{n}]")),
            };
            let expect = match (id, &id_text) {
                (Id::Absent, _) => Expect::Nothing,
                (Id::Null | Id::Bool | Id::Object | Id::Array, _) => Expect::NullAnswer,
                (_, Some(text)) => Expect::Answer(canon(text)),
                (_, None) => unreachable!("an id"),
            };
            let params = params
                .as_ref()
                .map(|p| format!(",\"params\":{p}"))
                .unwrap_or_default();
            let body = format!("{jsonrpc}\"method\":{method}{params}");
            let text = match (id_text, id_last) {
                (None, _) => format!("{{{body}}}"),
                (Some(id), false) => format!("{{\"id\":{id},{body}}}"),
                (Some(id), true) => format!("{{{body},\"id\":{id}}}"),
            };
            (text.into_bytes(), expect)
        }
        Item::Truncated(inner, at) => {
            let (mut bytes, _) = render(inner, n);
            // Any proper prefix of an object is not JSON.
            bytes.truncate(at.index(bytes.len()));
            (bytes, Expect::Nothing)
        }
        Item::NotObject(text) => (text.clone().into_bytes(), Expect::NullAnswer),
        Item::Junk(bytes) => (bytes.clone(), Expect::Nothing),
    }
}

/// An answer's id, exactly as written.
fn answer_id(answer: &str) -> Result<String, TestCaseError> {
    let members: HashMap<String, Box<RawValue>> = serde_json::from_str(answer)
        .map_err(|e| TestCaseError::fail(format!("an answer that is not JSON ({e}): {answer}")))?;
    let id = members
        .get("id")
        .ok_or_else(|| TestCaseError::fail(format!("an answer without an id: {answer}")))?;
    if !members.contains_key("result") && !members.contains_key("error") {
        return Err(TestCaseError::fail(format!("not an answer: {answer}")));
    }
    Ok(id.get().to_owned())
}

/// Checks the answers to a batch against what was expected of it.
fn check(expected: &[Expect], answers: &[String]) -> Result<(), TestCaseError> {
    let mut want: HashMap<String, usize> = HashMap::new();
    let mut nulls = 0;
    for e in expected {
        match e {
            Expect::Answer(id) => *want.entry(id.clone()).or_default() += 1,
            Expect::NullAnswer => nulls += 1,
            Expect::Nothing => {}
        }
    }
    let mut got: HashMap<String, usize> = HashMap::new();
    let mut got_nulls = 0;
    for a in answers {
        let id = answer_id(a)?;
        if id == "null" {
            got_nulls += 1;
        } else {
            *got.entry(canon(&id)).or_default() += 1;
        }
    }
    prop_assert_eq!(got, want, "answers by id: {:?}", answers);
    prop_assert_eq!(got_nulls, nulls, "answers without an id: {:?}", answers);
    Ok(())
}

/// The fixture over stdio, its output lines read on a thread.
struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Stdio_ {
    fn start() -> Self {
        let mut child = Command::new(example("mcp_test_server"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the fixture starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut this = Stdio_ {
            child,
            stdin,
            lines,
        };
        this.send(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#,
        );
        let first = this.lines.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(first.contains("protocolVersion"), "{first}");
        this.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        this
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends the items and a ping named `sentinel`; the answers, up to the
    /// ping's and every expected one.
    fn exchange(
        &mut self,
        items: &[(Vec<u8>, Expect)],
        sentinel: &str,
    ) -> Result<Vec<String>, TestCaseError> {
        for (bytes, _) in items {
            self.send(bytes);
        }
        self.send(format!(r#"{{"jsonrpc":"2.0","id":"{sentinel}","method":"ping"}}"#).as_bytes());
        let mut wanted: Vec<String> = items
            .iter()
            .filter_map(|(_, e)| match e {
                Expect::Answer(id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        wanted.push(canon(&format!("\"{sentinel}\"")));
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut answers = Vec::new();
        while !wanted.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                let alive = self.child.try_wait().unwrap().is_none();
                return Err(TestCaseError::fail(format!(
                    "no answer for {wanted:?} (server running: {alive}); answers: {answers:?}"
                )));
            };
            let id = canon(&answer_id(&line)?);
            if let Some(at) = wanted.iter().position(|w| *w == id) {
                wanted.remove(at);
            }
            answers.push(line);
        }
        // The sentinel is not part of the check.
        let sentinel = canon(&format!("\"{sentinel}\""));
        answers.retain(|a| !answer_id(a).is_ok_and(|id| canon(&id) == sentinel));
        Ok(answers)
    }
}

#[test]
fn stdio_answers_each_request_once_with_its_id() {
    let server = std::cell::RefCell::new(Stdio_::start());
    let counter = std::cell::Cell::new(1u64);
    let mut runner = TestRunner::new(config());
    let result = runner.run(&prop::collection::vec(item(), 1..8), |items| {
        let mut server = server.borrow_mut();
        let rendered: Vec<(Vec<u8>, Expect)> = items
            .iter()
            .map(|item| {
                let n = counter.get();
                counter.set(n + 1);
                render(item, n)
            })
            .collect();
        let sentinel = format!("sentinel-{}", counter.get());
        let answers = server.exchange(&rendered, &sentinel)?;
        let expected: Vec<Expect> = rendered.into_iter().map(|(_, e)| e).collect();
        check(&expected, &answers)
    });
    let mut server = server.into_inner();
    // Nothing answered late, twice, and the server is up.
    let late = server.exchange(&[], "the-end");
    let _ = server.child.kill();
    result.unwrap();
    assert_eq!(late.unwrap(), Vec::<String>::new(), "answers after the run");
}

/// `examples/mcp_server --http`, and the address it serves.
fn http_server() -> (Child, String) {
    let mut child = Command::new(example("mcp_server"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let url = line.trim().strip_prefix("serving MCP on http://").unwrap();
    let authority = url.split_once('/').unwrap().0.to_owned();
    (child, authority)
}

/// One POST; the status and the body.
fn post(authority: &str, body: &[u8]) -> Result<(u16, String), TestCaseError> {
    let fail = |e: std::io::Error| TestCaseError::fail(format!("the exchange failed: {e}"));
    let mut stream = TcpStream::connect(authority).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(fail)?;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(fail)?;
    stream.write_all(body).map_err(fail)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(fail)?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| TestCaseError::fail(format!("no status line: {response:?}")))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

#[test]
fn http_answers_each_request_once_with_its_id() {
    let (mut child, authority) = http_server();
    let counter = std::cell::Cell::new(1u64);
    let mut runner = TestRunner::new(config());
    let result = runner.run(&prop::collection::vec(item(), 1..8), |items| {
        for item in &items {
            let n = counter.get();
            counter.set(n + 1);
            let (bytes, expect) = render(item, n);
            let (status, body) = post(&authority, &bytes)?;
            let shown = String::from_utf8_lossy(&bytes);
            match &expect {
                Expect::Nothing => {
                    // Accepted (202), or refused (400), with no answer that
                    // names an id.
                    prop_assert!(
                        status == 202 || status == 400,
                        "{} for {}: {}",
                        status,
                        shown,
                        body
                    );
                    if let Ok(id) = answer_id(&body) {
                        prop_assert_eq!(id, "null", "for {}", shown);
                    }
                }
                Expect::NullAnswer | Expect::Answer(_) => {
                    let id = answer_id(&body)
                        .map_err(|e| TestCaseError::fail(format!("{status} for {shown}: {e}")))?;
                    let want = match &expect {
                        Expect::Answer(id) => id.clone(),
                        _ => "null".to_owned(),
                    };
                    prop_assert_eq!(canon(&id), want, "{} for {}: {}", status, shown, body);
                }
            }
        }
        Ok(())
    });
    let alive = post(
        &authority,
        br#"{"jsonrpc":"2.0","id":"the-end","method":"ping"}"#,
    );
    let _ = child.kill();
    result.unwrap();
    let (_, body) = alive.unwrap();
    assert_eq!(answer_id(&body).unwrap(), r#""the-end""#, "{body}");
}
