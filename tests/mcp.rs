//! MCP both ways against real processes: `examples/mcp_server` and the
//! fixture `tests/support/mcp_test_server.rs`, over stdio and HTTP, with
//! kesoku's client on the other end (the official Python SDK's client runs
//! against the same example in `.ci/run`).
#![cfg(feature = "mcp")]

#[path = "support/example.rs"]
mod example;
use example::example;

use std::fmt::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::mcp::{ImportOptions, McpClient, McpError, McpServer, Protocol};
use kesoku::{ContentBlock, LiveRegistry, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

fn fixture() -> Command {
    Command::new(example("mcp_test_server"))
}

/// `examples/mcp_server --http 127.0.0.1:0`, and the URL it printed.
async fn http_server() -> (Child, String) {
    let mut child = Command::new(example("mcp_server"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut line).await.expect("a line");
    // Kept reading, so a later line does not meet a closed pipe.
    tokio::spawn(async move { tokio::io::copy(&mut reader, &mut tokio::io::sink()).await });
    let url = line
        .trim()
        .strip_prefix("serving MCP on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

/// The client's tools, imported into a new registry.
async fn imported(client: &McpClient, options: &ImportOptions) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    client.import(&mut tools, options).await.unwrap();
    tools
}

async fn call(
    registry: &ToolRegistry,
    name: &str,
    args: Value,
) -> Result<kesoku::ToolOutput, ToolError> {
    let tool = registry
        .get(name)
        .unwrap_or_else(|| panic!("`{name}` was imported"));
    tool.call(args, &ToolContext::new("test")).await
}

#[tokio::test]
async fn an_agent_calls_a_tool_of_our_server_process_through_mcp() {
    let client = McpClient::stdio(Command::new(example("mcp_server")))
        .await
        .unwrap();
    assert_eq!(client.protocol_version().as_deref(), Some("2026-07-28"));
    let mut tools = ToolRegistry::new();
    let names = client
        .import(&mut tools, &ImportOptions::new())
        .await
        .unwrap();
    assert!(names.contains(&"calculate_sum".to_owned()), "{names:?}");
    let sum = tools.get("calculate_sum").unwrap();
    assert_eq!(sum.parameters()["required"], json!(["a", "b"]));

    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "calculate_sum", "arguments": {"a": 2, "b": 40}}]},
        {"text": "The sum is {{c1}}."}
    ]))
    .unwrap();
    let agent = Agent::builder(model).registry(tools).build().unwrap();
    let outcome = agent.send("s", "2 + 40?").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("The sum is 42."));
}

#[tokio::test]
async fn http_speaks_both_generations() {
    let (_server, url) = http_server().await;
    for (protocol, version) in [
        (Protocol::Auto, "2026-07-28"),
        (Protocol::Legacy, "2025-11-25"),
    ] {
        let client = McpClient::http_with(&url, protocol).await.unwrap();
        assert_eq!(client.protocol_version().as_deref(), Some(version));
        let tools = imported(&client, &ImportOptions::new()).await;
        let out = call(&tools, "calculate_sum", json!({"a": 2, "b": 40}))
            .await
            .unwrap();
        assert_eq!(out.text(), "42", "{version}");
        client.close();
    }
}

#[tokio::test]
async fn bad_arguments_are_refused_here_with_the_local_errors() {
    let client = McpClient::stdio(fixture()).await.unwrap();
    let tools = imported(&client, &ImportOptions::new()).await;
    let err = call(&tools, "calculate_sum", json!({"a": "two"}))
        .await
        .unwrap_err();
    // An `Args` error is kesoku's validator; the server's would come back
    // as a failed call.
    let ToolError::Args(args) = &err else {
        panic!("checked locally, got {err:?}")
    };
    assert_eq!(
        args.to_string(),
        "invalid arguments for tool `calculate_sum` (2 problems):\n- argument `a`: expected an integer, got string \"two\"\n- argument `b` is required (The second integer.)"
    );
}

#[tokio::test]
async fn listings_carry_output_schemas_hints_and_images() {
    let client = McpClient::stdio(fixture()).await.unwrap();
    let listed = client.list_tools().await.unwrap();
    let look_up = listed.iter().find(|t| t.name == "look_up").unwrap();
    let json = serde_json::to_value(look_up).unwrap();
    assert_eq!(json["title"], "Look up");
    assert_eq!(json["annotations"]["readOnlyHint"], true);
    assert_eq!(json["annotations"]["openWorldHint"], false);
    assert_eq!(
        json["outputSchema"]["properties"]["letters"]["type"],
        "integer"
    );
    let sum = listed.iter().find(|t| t.name == "calculate_sum").unwrap();
    assert!(sum.output_schema.is_none(), "an integer is not an object");

    let tools = imported(&client, &ImportOptions::new()).await;
    let found = call(&tools, "look_up", json!({"word": "kesoku"}))
        .await
        .unwrap();
    assert_eq!(found.value, json!({"word": "kesoku", "letters": 6}));
    assert_eq!(tools.get("look_up").unwrap().hints().read_only, Some(true));
    let picture = call(&tools, "picture", json!({})).await.unwrap();
    assert_eq!(picture.value, json!("a picture"));
    assert_eq!(
        picture.blocks,
        [ContentBlock::image(
            "image/png",
            vec![0x89, b'P', b'N', b'G']
        )]
    );
}

#[tokio::test]
async fn imported_tools_keep_the_connection_after_the_client_is_dropped() {
    let tools = {
        let client = McpClient::stdio(fixture()).await.unwrap();
        imported(&client, &ImportOptions::new()).await
    };
    let out = call(&tools, "calculate_sum", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(out.text(), "3");
    // A remote failure is the tool's own text, once.
    let err = call(&tools, "fail", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "it broke");
}

#[tokio::test]
async fn a_name_clash_is_an_error_unless_prefixed() {
    let client = McpClient::stdio(fixture()).await.unwrap();
    let mut tools = imported(&client, &ImportOptions::new()).await;
    let before = tools.len();
    let err = client
        .import(&mut tools, &ImportOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, McpError::NameClash { name, .. } if name == "calculate_sum"),
        "{err}"
    );
    assert!(
        err.to_string().contains("mcp_test_server"),
        "names the server: {err}"
    );
    assert_eq!(tools.len(), before, "nothing was added");
    let names = client
        .import(&mut tools, &ImportOptions::new().prefix("again_"))
        .await
        .unwrap();
    assert!(names.contains(&"again_calculate_sum".to_owned()));
    let out = call(&tools, "again_calculate_sum", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(out.text(), "3");
}

#[tokio::test]
async fn a_dropped_call_is_cancelled_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut cmd = fixture();
    cmd.env("MCP_FIXTURE_LOG", &log);
    let client = McpClient::stdio(cmd).await.unwrap();
    let tools = imported(
        &client,
        &ImportOptions::new().timeout(Duration::from_millis(300)),
    )
    .await;
    let err = call(&tools, "wait_ms", json!({"ms": 60_000}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("did not answer `wait_ms` within"),
        "{err}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if std::fs::read_to_string(&log).is_ok_and(|l| l.contains("cancelled wait_ms")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_server_killed_mid_call_gives_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut cmd = fixture();
    cmd.env("MCP_FIXTURE_PID_FILE", &pid_file);
    let client = McpClient::stdio(cmd).await.unwrap();
    let tools = imported(&client, &ImportOptions::new()).await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let tools = Arc::new(tools);
    let running = {
        let tools = Arc::clone(&tools);
        tokio::spawn(async move { call(&tools, "wait_ms", json!({"ms": 60_000})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("an answer, not a hang")
        .unwrap()
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    let text = err.to_string();
    assert!(text.contains("mcp_test_server"), "names the server: {text}");
    assert!(text.contains("connection closed"), "{text}");
}

#[tokio::test]
async fn stdin_closed_during_a_call_still_gets_its_answer() {
    // Longer than the five seconds rmcp waits for running calls on its own.
    let mut child = fixture()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "wait_ms", "arguments": {"ms": 6000}}}),
    ];
    for line in lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(stdin);
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_to_string(&mut out))
        .await
        .expect("the server exits")
        .unwrap();
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
    let call = answers
        .iter()
        .find(|a| a["id"] == 2)
        .expect("the call's answer");
    assert_eq!(call["result"]["content"][0]["text"], "waited 6000 ms");
    assert!(child.wait().await.unwrap().success());
}

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

/// A server whose tool list changes on request, in this process, for the
/// client's list-changed handling on both protocol generations.
mod changing {
    use std::sync::{Arc, Mutex};

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    };
    use rmcp::service::{Peer, RequestContext, SubscriptionContext, SubscriptionSink};
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    #[derive(Clone, Default)]
    pub(crate) struct Changing {
        pub(crate) tools: Arc<Mutex<Vec<&'static str>>>,
        peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
        sinks: Arc<Mutex<Vec<SubscriptionSink>>>,
    }

    impl Changing {
        /// Adds a tool and tells every client.
        pub(crate) async fn add(&self, name: &'static str) {
            self.tools.lock().unwrap().push(name);
            let peers = self.peers.lock().unwrap().clone();
            for p in peers {
                let _ = p.notify_tool_list_changed().await;
            }
            let sinks = self.sinks.lock().unwrap().clone();
            for s in sinks {
                let _ = s.notify_tool_list_changed().await;
            }
        }
    }

    fn tool(name: &'static str) -> Tool {
        // `broken` has a schema no validator can compile.
        let schema = if name == "broken" {
            serde_json::json!({"type": "object", "properties": {"x": {"type": 5}}})
        } else {
            serde_json::json!({"type": "object", "properties": {}})
        };
        Tool::new(
            name,
            "A tool.",
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    impl ServerHandler for Changing {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_tool_list_changed()
                    .build(),
            )
        }

        async fn list_tools(
            &self,
            _r: Option<PaginatedRequestParams>,
            context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            self.peers.lock().unwrap().push(context.peer.clone());
            let tools = self.tools.lock().unwrap().iter().map(|n| tool(n)).collect();
            Ok(ListToolsResult::with_all_items(tools))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _c: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(
                CallToolResult::success(vec![ContentBlock::text(format!("{} ran", request.name))])
                    .into(),
            )
        }

        fn accepted_subscription_filter(
            &self,
            requested: &SubscriptionFilter,
        ) -> Option<SubscriptionFilter> {
            Some(requested.supported_by(&self.get_info().capabilities))
        }

        async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
            self.sinks.lock().unwrap().push(context.sink().clone());
            context.cancelled().await;
            Ok(())
        }
    }
}

#[tokio::test]
async fn list_changed_updates_the_imported_tools_on_both_generations() {
    use rmcp::ServiceExt as _;

    for (protocol, version) in [
        (Protocol::Auto, "2026-07-28"),
        (Protocol::Legacy, "2025-11-25"),
    ] {
        let server = changing::Changing::default();
        server.tools.lock().unwrap().extend(["first", "broken"]);
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(server_side);
        let serving = server.clone();
        tokio::spawn(async move {
            if let Ok(running) = serving.serve((sr, sw)).await {
                let _ = running.waiting().await;
            }
        });
        let (cr, cw) = tokio::io::split(client_side);
        let client = McpClient::io("the changing server", cr, cw, protocol)
            .await
            .unwrap();
        assert_eq!(client.protocol_version().as_deref(), Some(version));

        let live = LiveRegistry::new(ToolRegistry::new());
        let names = client
            .import_live(&live, ImportOptions::new().prefix("remote_"))
            .await
            .unwrap();
        // `broken` is left out (with a warning); the rest come.
        assert_eq!(names, ["remote_first"]);
        let mut versions = live.subscribe();
        server.add("second").await;
        tokio::time::timeout(Duration::from_secs(10), versions.changed())
            .await
            .unwrap_or_else(|_| panic!("{version}: the registry was never updated"))
            .unwrap();
        let now = live.snapshot();
        let names: Vec<&str> = now.names().collect();
        assert_eq!(names, ["remote_first", "remote_second"], "{version}");
        let out = now
            .get("remote_second")
            .unwrap()
            .call(json!({}), &ToolContext::new("s"))
            .await
            .unwrap();
        assert_eq!(out.text(), "second ran");
    }
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
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 64 && exec "$0" "$@""#)
        .arg(example("mcp_server"))
        .args([
            "--http",
            "127.0.0.1:0",
            "--read-timeout-ms",
            "1000",
            "--max-connections",
            "16",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    let url = line
        .trim()
        .strip_prefix("serving MCP on ")
        .unwrap()
        .to_owned();
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
