//! MCP both ways against real processes: `examples/mcp_server` and the
//! fixture `tests/support/mcp_test_server.rs`, over stdio and HTTP, with
//! kesoku's client on the other end (the official Python SDK's client runs
//! against the same example in `.ci/run`).
#![cfg(feature = "mcp")]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::mcp::{ImportOptions, McpClient, McpError, Protocol};
use kesoku::{ContentBlock, LiveRegistry, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

#[path = "support/mcp_procs.rs"]
mod mcp_procs;
use mcp_procs::{example, fixture, http_server};

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

/// One line of policy asks for every destructive tool, imported ones
/// included: their MCP annotations carry the hint. (The served
/// `delete_note` is `destructive`; `calculate_sum` is not and runs.)
#[tokio::test]
async fn a_policy_asks_for_an_imported_destructive_tool() {
    use kesoku::agent::Approval;

    let client = McpClient::stdio(Command::new(example("mcp_server")))
        .await
        .unwrap();
    let tools = imported(&client, &ImportOptions::new()).await;
    assert_eq!(
        tools.get("delete_note").unwrap().hints().destructive,
        Some(true)
    );
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [
            {"id": "c1", "name": "calculate_sum", "arguments": {"a": 1, "b": 2}},
            {"id": "c2", "name": "delete_note", "arguments": {"number": 1}}
        ]}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .registry(tools)
        .approval(|check| {
            if check.hints.destructive == Some(true) {
                Approval::Ask
            } else {
                Approval::Allow
            }
        })
        .build()
        .unwrap();
    let outcome = agent.send("s", "Tidy up").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
    let waiting = outcome.pending_approvals();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].tool, "delete_note");
    let sum = outcome
        .messages
        .iter()
        .find(|m| m.kind == kesoku::MessageType::ToolResult)
        .expect("calculate_sum ran");
    assert_eq!(sum.content, "3");
}
