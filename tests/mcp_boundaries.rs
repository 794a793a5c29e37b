//! MCP's boundaries against real server processes: every JSON-RPC request
//! with an id answered once with its id (over stdio and HTTP), and the HTTP
//! server's refusals (foreign origins and hosts, duplicate headers,
//! oversized and stalled bodies, too many connections).
#![cfg(feature = "mcp")]

#[path = "support/mcp_procs.rs"]
mod mcp_procs;
use mcp_procs::{example, fixture, http_server, http_server_with};

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kesoku::ToolRegistry;
use kesoku::mcp::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// A raw HTTP/1.1 POST; the status code.
async fn post_status(url: &str, headers: &[(&str, &str)]) -> u16 {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| *k == "Host") {
        let _ = write!(request, "Host: {authority}\r\n");
    }
    for (k, v) in headers {
        let _ = write!(request, "{k}: {v}\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {response:?}"))
}

#[tokio::test]
async fn http_refuses_foreign_origins_and_hosts() {
    let (_server, url) = http_server().await;
    assert_eq!(
        post_status(&url, &[]).await,
        200,
        "no Origin: not a browser"
    );
    let own = url.trim_end_matches("/mcp").to_owned();
    assert_eq!(
        post_status(&url, &[("Origin", &own)]).await,
        200,
        "its own origin"
    );
    assert_eq!(
        post_status(&url, &[("Origin", "http://evil.example")]).await,
        403
    );
    assert_eq!(post_status(&url, &[("Host", "evil.example")]).await, 403);
    let elsewhere = format!("{own}/other");
    assert_eq!(post_status(&elsewhere, &[]).await, 404);
}

#[tokio::test]
async fn http_refuses_a_body_over_the_limit() {
    let registry = ToolRegistry::new();
    let server = McpServer::new(registry)
        .bind_http(
            "127.0.0.1:0",
            kesoku::mcp::HttpOptions::default().max_body_bytes(1024),
        )
        .await
        .unwrap();
    let url = server.url();
    let stop = server.shutdown_token();
    tokio::spawn(server.run());
    assert_eq!(post_status(&url, &[]).await, 200, "a body under the limit");
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, _) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let body = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(4096)
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    stop.cancel();
}

/// A server process spoken to line by line over stdio.
struct RawStdio {
    child: Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl RawStdio {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        RawStdio {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line written, or `None` at the end of output or after 10 s.
    async fn next(&mut self) -> Option<String> {
        tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
            .await
            .ok()
            .and_then(Result::unwrap)
    }

    async fn handshake(&mut self) {
        self.send(&initialize_line(0)).await;
        let answer = self.next().await.expect("the initialize answer");
        assert!(answer.contains("\"protocolVersion\""), "{answer}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }
}

fn initialize_line(id: u32) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string()
}

/// An answer's id exactly as written (it may hold a lone surrogate, which
/// `serde_json` cannot read into a string), its error code, and its result.
fn read_answer(line: &str) -> (String, Option<i64>, Option<Value>) {
    let members: std::collections::HashMap<String, Box<serde_json::value::RawValue>> =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let id = members
        .get("id")
        .unwrap_or_else(|| panic!("an id: {line}"))
        .get()
        .to_owned();
    let code = members.get("error").map(|e| {
        let e: Value = serde_json::from_str(e.get()).unwrap();
        e["code"].as_i64().unwrap()
    });
    let result = members
        .get("result")
        .map(|r| serde_json::from_str(r.get()).unwrap());
    (id, code, result)
}

/// JSON nested `depth` arrays deep around `1`.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn stdio_answers_every_request_once_with_its_id() {
    let mut server = RawStdio::start(fixture());
    server.handshake().await;
    let call = |id: &str, params: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    };
    // (id as sent, line, the error code expected or None for a result)
    let cases: Vec<(&str, String, Option<i64>)> = vec![
        // Half an emoji in an argument: served, with U+FFFD in its place.
        (
            "10",
            call(
                "10",
                r#"{"name":"look_up","arguments":{"word":"ab\ud83d"}}"#,
            ),
            None,
        ),
        (
            "11",
            call(
                "11",
                r#"{"name":"calculate_sum","arguments":{"a":1e400,"b":1}}"#,
            ),
            Some(-32602),
        ),
        (
            "12",
            call(
                "12",
                &format!(
                    r#"{{"name":"look_up","arguments":{{"word":{}}}}}"#,
                    nested(200)
                ),
            ),
            Some(-32602),
        ),
        ("13", call("13", "[1,2]"), Some(-32602)),
        (
            "14",
            r#"{"jsonrpc":"2.0","id":14,"method":"ping","params":{"_meta":5}}"#.to_owned(),
            Some(-32602),
        ),
        (
            "15",
            call("15", r#"{"name":"look_up","arguments":"word"}"#),
            Some(-32602),
        ),
        ("16", call("16", r#"{"arguments":{}}"#), Some(-32602)),
        // An id with a lone surrogate cannot be carried through rmcp: it is
        // refused, with the id as it came.
        (
            r#""\ud800""#,
            r#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#.to_owned(),
            Some(-32600),
        ),
        (
            "17",
            r#"{"jsonrpc":"2.0","id":17,"method":"ping"}"#.to_owned(),
            None,
        ),
    ];
    for (_, line, _) in &cases {
        server.send(line).await;
    }
    // Every id answered, then a last ping: anything answered twice would
    // come before it (our own answers are written in order).
    let mut answers: Vec<(String, Option<i64>, Option<Value>)> = Vec::new();
    let mut last_sent = false;
    while !answers.iter().any(|(id, ..)| id == r#""last""#) {
        if !last_sent
            && cases
                .iter()
                .all(|(id, ..)| answers.iter().any(|(a, ..)| a == id))
        {
            server
                .send(r#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#)
                .await;
            last_sent = true;
        }
        let Some(line) = server.next().await else {
            panic!("the server stopped answering; answers so far: {answers:?}")
        };
        answers.push(read_answer(&line));
    }
    for (id, _, code) in &cases {
        let mine: Vec<_> = answers.iter().filter(|(a, ..)| a == id).collect();
        assert_eq!(mine.len(), 1, "one answer for id {id}: {answers:?}");
        assert_eq!(mine[0].1, *code, "id {id}: {:?}", mine[0]);
    }
    assert_eq!(answers.len(), cases.len() + 1, "no others: {answers:?}");
    let found = &answers.iter().find(|(id, ..)| id == "10").unwrap().2;
    assert_eq!(
        found.as_ref().unwrap()["structuredContent"],
        json!({"word": "ab\u{fffd}", "letters": 3})
    );
}

#[tokio::test]
async fn a_notification_before_initialize_leaves_the_stdio_server_up() {
    let mut server = RawStdio::start(fixture());
    server
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    server
        .send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#)
        .await;
    server.handshake().await;
    server
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    let answer = server.next().await.expect("the ping's answer");
    assert_eq!(read_answer(&answer).0, "2");
    assert!(server.child.try_wait().unwrap().is_none(), "still running");
}

/// A raw HTTP/1.1 exchange: `head` (the request line and headers, each
/// ending in CRLF) and `body`; the status and the response body.
async fn exchange(authority: &str, head: &str, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!(
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A connection turned away may be closed before all of this is sent.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut response = Vec::new();
    // What was read before a reset is kept.
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("an answer");
    let response = String::from_utf8_lossy(&response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn authority_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    rest.split_once('/').unwrap().0.to_owned()
}

/// A JSON POST to `/mcp` with the usual headers.
fn mcp_head(authority: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    )
}

#[tokio::test]
async fn http_answers_what_rmcp_cannot_parse_with_json_rpc_errors() {
    let (_server, url) = http_server().await;
    let authority = authority_of(&url);
    let head = mcp_head(&authority);
    // Half an emoji in the client's name: served.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw\ud83d","version":"0"}}}"#;
    let (status, body) = exchange(&authority, &head, init).await;
    assert_eq!(status, 200, "{body}");
    let (id, code, result) = read_answer(&body);
    assert_eq!((id.as_str(), code), ("1", None), "{body}");
    assert!(result.unwrap()["protocolVersion"].is_string());

    let refused = [
        (
            "2",
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":-1e999}}"#.to_owned(),
            -32602,
        ),
        (
            "3",
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":{}}}}}"#,
                nested(150)
            ),
            -32602,
        ),
        (
            r#""four""#,
            r#"{"jsonrpc":"2.0","id":"four","method":"tools/call","params":["calculate_sum"]}"#
                .to_owned(),
            -32602,
        ),
        (
            "5",
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":["calculate_sum"]}}"#
                .to_owned(),
            -32602,
        ),
    ];
    for (id, body, code) in refused {
        let (status, answer) = exchange(&authority, &head, &body).await;
        assert_eq!(status, 200, "{body}: {answer}");
        assert_eq!(
            read_answer(&answer),
            (id.to_owned(), Some(code), None),
            "{body}"
        );
    }
    // Not JSON: a parse error, with no id to give.
    let (status, answer) = exchange(&authority, &head, r#"{"jsonrpc":"2.0","id":6,"#).await;
    assert_eq!(status, 400);
    assert_eq!(
        read_answer(&answer),
        ("null".to_owned(), Some(-32700), None)
    );
    // The Host check still comes first.
    let foreign = mcp_head("evil.example");
    let (status, _) = exchange(
        &authority,
        &foreign,
        &format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{}}}"#,
            nested(150)
        ),
    )
    .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn http_serves_repeated_members_as_stdio_does() {
    // serde_json reads a repeated member as its last; rmcp's own parser
    // refuses one (415 over HTTP), though the same line is served over
    // stdio.
    let (_server, url) = http_server().await;
    let authority = authority_of(&url);
    let head = mcp_head(&authority);
    for body in [
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{},"params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":null,"cursor":null}}"#,
    ] {
        let (status, answer) = exchange(&authority, &head, body).await;
        assert_eq!(status, 200, "{body}: {answer}");
        let (id, code, result) = read_answer(&answer);
        assert_eq!((id.as_str(), code), ("1", None), "{body}: {answer}");
        assert!(result.is_some(), "{body}: {answer}");
    }
    // A repeated id leaves the request's id unknown.
    let body = r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#;
    let (status, answer) = exchange(&authority, &head, body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        read_answer(&answer),
        ("null".to_owned(), Some(-32600), None)
    );
}

#[tokio::test]
async fn http_refuses_two_hosts_two_origins_and_a_foreign_absolute_target() {
    let (_server, url) = http_server().await;
    let authority = authority_of(&url);
    let own = format!("http://{authority}");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let head = |target: &str, extra: &str| {
        format!(
            "POST {target} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}"
        )
    };
    let host = format!("Host: {authority}\r\n");
    let (status, _) = exchange(
        &authority,
        &head("/mcp", &format!("{host}Origin: {own}\r\n")),
        ping,
    )
    .await;
    assert_eq!(status, 200, "one of each is served");
    let two_hosts = format!("{host}Host: evil.example\r\n");
    assert_eq!(
        exchange(&authority, &head("/mcp", &two_hosts), ping)
            .await
            .0,
        400
    );
    let two_origins = format!("{host}Origin: {own}\r\nOrigin: http://evil.example\r\n");
    assert_eq!(
        exchange(&authority, &head("/mcp", &two_origins), ping)
            .await
            .0,
        400
    );
    let (status, _) = exchange(&authority, &head("http://evil.example/mcp", &host), ping).await;
    assert_eq!(status, 403, "the target names the host");
    let (status, _) = exchange(&authority, &head(&format!("{own}/mcp"), &host), ping).await;
    assert_eq!(status, 200, "an absolute target naming this server");
}

/// Opens a connection that sends its headers and half its body, then
/// stalls.
async fn stalled(authority: &str) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let head = format!(
        "{}Content-Length: 100\r\n\r\n{{\"jsonrpc\":",
        mcp_head(authority)
    );
    // One over the limit may be closed already.
    let _ = stream.write_all(head.as_bytes()).await;
    stream
}

/// What a stalled connection got before it was closed: the status, or 0 if
/// it was reset. `None` if it is still open after `within`.
async fn closed_with(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<u16> {
    let mut response = Vec::new();
    match tokio::time::timeout(within, stream.read_to_end(&mut response)).await {
        Err(_) => None,
        Ok(Err(_)) => Some(0),
        Ok(Ok(_)) => Some(
            String::from_utf8_lossy(&response)
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
        ),
    }
}

#[cfg(unix)]
#[tokio::test]
async fn http_closes_stalled_bodies_and_stays_reachable_past_its_descriptors() {
    // 64 descriptors, so that 100 stalled connections would exhaust them;
    // 16 connections at most, and a second to send a body.
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(r#"ulimit -n 64 && exec "$0" "$@""#)
        .arg(example("mcp_server"));
    let (mut child, url) = http_server_with(
        sh,
        &["--read-timeout-ms", "1000", "--max-connections", "16"],
    )
    .await;
    let authority = authority_of(&url);
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

    let started = Instant::now();
    let mut stalls = Vec::new();
    for _ in 0..100 {
        stalls.push(stalled(&authority).await);
    }
    // Another client, meanwhile, is answered at once: turned away for now
    // (503, try again) rather than left hanging.
    let (status, _) = tokio::time::timeout(
        Duration::from_secs(5),
        exchange(&authority, &mcp_head(&authority), ping),
    )
    .await
    .expect("an answer while the stalled connections are open");
    assert!(status == 503 || status == 200, "{status}");
    // Each stalled connection is closed: those over the limit at once,
    // the others with a 408 after the read timeout.
    let mut timed_out = 0;
    let mut turned_away = 0;
    for stream in &mut stalls {
        match closed_with(stream, Duration::from_secs(10)).await {
            None => panic!(
                "a stalled connection is still open after {:?}",
                started.elapsed()
            ),
            Some(408) => timed_out += 1,
            Some(503 | 0) => turned_away += 1,
            Some(other) => panic!("unexpected status {other}"),
        }
    }
    assert!((1..=32).contains(&timed_out), "{timed_out} timed out");
    assert_eq!(timed_out + turned_away, 100);
    // And the server serves again.
    let (status, body) = exchange(&authority, &mcp_head(&authority), ping).await;
    assert_eq!(status, 200, "{body}");
    assert!(child.try_wait().unwrap().is_none(), "still running");
}

#[cfg(unix)]
#[tokio::test]
async fn http_drops_a_client_that_never_reads_its_answers() {
    // One connection at most, so a client holding it locks out every other.
    let (mut child, url) = http_server_with(
        Command::new(example("mcp_server")),
        &["--read-timeout-ms", "1000", "--max-connections", "1"],
    )
    .await;
    let authority = authority_of(&url);

    // Pings whose ids are 1 MB long, so each answer is too, sent one after
    // another on one kept-alive connection that never reads: the answers
    // fill the socket's buffers and the server's writes stall.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut greedy = socket.connect(authority.parse().unwrap()).await.unwrap();
    let id = "x".repeat(1 << 20);
    let body = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#);
    let request = format!(
        "{}Content-Length: {}\r\n\r\n{body}",
        mcp_head(&authority),
        body.len()
    );
    let writer = tokio::spawn(async move {
        for _ in 0..64 {
            if greedy.write_all(request.as_bytes()).await.is_err() {
                break;
            }
        }
        // Held open, unread, until the test ends.
        std::future::pending::<()>().await;
        drop(greedy);
    });

    // Past a few read timeouts, the stalled connection is dropped and
    // another client is served.
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let started = Instant::now();
    let mut status = 0;
    while started.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        status = exchange(&authority, &mcp_head(&authority), ping).await.0;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
    }
    writer.abort();
    assert_eq!(
        status, 200,
        "a client that never reads still holds the only connection"
    );
    assert!(child.try_wait().unwrap().is_none(), "still running");
}
