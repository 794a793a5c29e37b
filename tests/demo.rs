//! The demo agent (`examples/demo`), run as a user runs it: the binary,
//! offline and against in-process fake servers of each provider.

use kesoku::store::MessageLog;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kesoku::store::SqliteStore;
use kesoku::{MessageType, Role, Status};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The demo binary `cargo test` built beside this test.
fn demo() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let debug = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let demo = debug
        .join("examples")
        .join(format!("demo{}", std::env::consts::EXE_SUFFIX));
    assert!(demo.exists(), "{} is built by `cargo test`", demo.display());
    demo
}

/// Runs the demo in `dir` with `args` and `env`, stdin closed (not a
/// terminal), and no provider set from the caller's environment.
async fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(demo());
    cmd.current_dir(dir)
        .args(args)
        .env_remove("KESOKU_PROVIDER")
        .env_remove("KESOKU_MODEL")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("the demo runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn offline_the_demo_shows_every_kind_of_call_and_keeps_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--session", "s1"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("offline"), "{stdout}");
    // One call, two in one step, a refused one and its correction, the
    // progress note, analyze_media, and the answer quoting real results.
    assert!(stdout.contains("→ calculate_sum(a=2, b=40)"), "{stdout}");
    assert!(
        stdout.contains("→ current_time(timezone=\"Asia/Tokyo\")"),
        "{stdout}"
    );
    assert!(stdout.contains("got string \"forty\""), "{stdout}");
    assert!(
        stdout.contains("… saving a note of 27 characters"),
        "{stdout}"
    );
    assert!(
        stdout.contains("→ analyze_media(path=\"sample.png\""),
        "{stdout}"
    );
    assert!(stdout.contains("2 + 40 = 42 and 7 + 8 = 15."), "{stdout}");
    // Then the sums again, as a Rust value checked against its shape.
    assert!(
        stdout.contains("Sums {\n    sums: [\n        Sum {\n            a: 2,"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(a typed answer: 3 sums, each total is a + b)"),
        "{stdout}"
    );
    assert!(stdout.contains("Saved as note 1."), "{stdout}");
    // A call that needs approval paused the turn; with stdin closed it is
    // approved at once, and the turn resumed with its real result.
    assert!(
        stdout.contains("delete_note({\"number\":1}) needs your approval"),
        "{stdout}"
    );
    assert!(stdout.contains("(approved"), "{stdout}");
    assert!(
        stdout.contains("Deleting it: Deleted note 1 (\"2 + 40 = 42, and 7 + 8 = 15\")."),
        "{stdout}"
    );
    assert!(
        stdout.contains("The picture: A small landscape"),
        "{stdout}"
    );
    // The tokens the script's model calls report, summed over the turn,
    // its part before the pause for approval included, and the call
    // `analyze_media` made (1630 in, 24 out).
    assert!(stdout.contains("tokens: 7129 in, 397 out)"), "{stdout}");
    // A research assistant called as a tool: its work shows under the
    // call, as it happens, and its answer is the call's result.
    let call = stdout
        .find("→ research(prompt=\"What is 19 + 23? Check it with the calculator.\")")
        .expect(&stdout);
    let nested = stdout
        .find("    research │ → calculate_sum(a=19, b=23)")
        .expect(&stdout);
    let answered = stdout
        .find("The research assistant says: 19 + 23 = 42, checked with calculate_sum.")
        .expect(&stdout);
    assert!(call < nested && nested < answered, "{stdout}");
    assert!(stdout.contains("    research │   ← 42"), "{stdout}");
    // A prompt asking for a password is stopped by the input guardrail.
    assert!(
        stdout.contains("stopped by the guardrail `no_secrets`: it asks for a password"),
        "{stdout}"
    );

    // The session is in the store file: the prompt processed, every call
    // answered by a result whose parent is the call.
    let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
    let history = store.history("s1").await.unwrap();
    let prompt = &history[0];
    assert_eq!(
        (prompt.role, prompt.status),
        (Role::User, Status::Processed)
    );
    let calls: Vec<_> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall)
        .collect();
    // The showcase's eight, and the call of the research assistant (its
    // own calls are in its own session).
    assert_eq!(calls.len(), 9);
    for call in calls {
        let results = history
            .iter()
            .filter(|m| m.kind == MessageType::ToolResult && m.parent_id.as_ref() == Some(&call.id))
            .count();
        assert_eq!(results, 1, "{call:?}");
    }

    // --history prints it back.
    let out = run(dir.path(), &["--history", "--session", "s1"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.contains("[Processed]") && stdout.contains("Saved as note 1"),
        "{stdout}"
    );
    // Each model call's tokens, on the first message it wrote (a tool's
    // own call's, on the tool's result); the total.
    assert!(
        stdout.contains("calculate_sum({\"a\":2,\"b\":40}) (tokens: 412 in, 38 out)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tokens used by the session's model calls: 8979 in, 461 out"),
        "{stdout}"
    );
}

#[tokio::test]
async fn show_schemas_prints_each_provider_s_declarations() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--show-schemas"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    for heading in [
        "== Anthropic ==",
        "== OpenAI ==",
        "== Gemini (parametersJsonSchema) ==",
    ] {
        assert!(stdout.contains(heading), "{stdout}");
    }
    assert_eq!(stdout.matches("analyze_media:").count(), 3, "{stdout}");
    // And the typed answer's shape in each provider's structured outputs.
    for mode in [
        "Anthropic (structured outputs)",
        "OpenAI (strict)",
        "Gemini (parametersJsonSchema)",
    ] {
        let line = format!("answer `Sums`: the typed answer's shape, in {mode}");
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    // Nothing is stored for it.
    assert!(!dir.path().join("kesoku-demo.sqlite").exists());
}

/// Plays `replies` in order, keeping every request body.
struct Playback {
    replies: Vec<Value>,
    next: AtomicUsize,
    bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Respond for Playback {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.bodies
            .lock()
            .unwrap()
            .push(serde_json::from_slice(&request.body).unwrap_or(Value::Null));
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        let streamed = request.url.path().contains("streamGenerateContent")
            || serde_json::from_slice::<Value>(&request.body).is_ok_and(|b| b["stream"] == true);
        match self.replies.get(i) {
            Some(r) if streamed => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(as_stream(r)),
            Some(r) => ResponseTemplate::new(200).set_body_json(r),
            None => ResponseTemplate::new(500).set_body_string("no more replies"),
        }
    }
}

/// A one-shot reply as the provider would stream it: Claude's events per
/// block, OpenAI's chunks then `[DONE]`, Gemini's response as one event.
fn as_stream(reply: &Value) -> String {
    let mut events: Vec<(Option<&str>, Value)> = Vec::new();
    if reply["type"] == "message" {
        let mut start = reply.clone();
        start["content"] = json!([]);
        start["stop_reason"] = Value::Null;
        events.push((
            Some("message_start"),
            json!({"type": "message_start", "message": start}),
        ));
        for (i, block) in reply["content"].as_array().unwrap().iter().enumerate() {
            let (opening, delta) = if block["type"] == "tool_use" {
                let mut opening = block.clone();
                opening["input"] = json!({});
                (
                    opening,
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                )
            } else {
                (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": block["text"]}),
                )
            };
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": i, "content_block": opening}),
            ));
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i, "delta": delta}),
            ));
            events.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": i}),
            ));
        }
        events.push((
            Some("message_delta"),
            json!({"type": "message_delta",
            "delta": {"stop_reason": reply["stop_reason"]}, "usage": reply["usage"]}),
        ));
        events.push((Some("message_stop"), json!({"type": "message_stop"})));
    } else if let Some(choice) = reply["choices"].get(0) {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": reply["id"], "object": "chat.completion.chunk",
            "model": reply["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let message = &choice["message"];
        if let Some(text) = message["content"].as_str() {
            events.push((
                None,
                chunk(json!({"role": "assistant", "content": text}), Value::Null),
            ));
        }
        for (i, call) in message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let mut piece = call.clone();
            piece["index"] = i.into();
            events.push((None, chunk(json!({"tool_calls": [piece]}), Value::Null)));
        }
        events.push((None, chunk(json!({}), choice["finish_reason"].clone())));
        events.push((
            None,
            json!({"id": reply["id"], "object": "chat.completion.chunk",
            "model": reply["model"], "choices": [], "usage": reply["usage"]}),
        ));
    } else {
        events.push((None, reply.clone()));
    }
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            let _ = writeln!(out, "event: {name}");
        }
        let _ = write!(out, "data: {data}\n\n");
    }
    if reply.get("choices").is_some() {
        out.push_str("data: [DONE]\n\n");
    }
    out
}

/// A fake provider answering with two parallel sums, then a text; the
/// demo's request bodies.
async fn fake(replies: Vec<Value>) -> (MockServer, Arc<std::sync::Mutex<Vec<Value>>>) {
    let server = MockServer::start().await;
    let bodies = Arc::default();
    Mock::given(method("POST"))
        .respond_with(Playback {
            replies,
            next: AtomicUsize::new(0),
            bodies: Arc::clone(&bodies),
        })
        .mount(&server)
        .await;
    (server, bodies)
}

/// Runs a two-step turn against a provider and checks what a user sees.
async fn two_parallel_sums(provider: &str, key: &str, base_var: &str, base: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            "--provider",
            provider,
            "--model",
            "m",
            "Add 2 and 3, and 10 and 20.",
        ],
        &[(key, "test-key"), (base_var, base)],
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("→ calculate_sum(a=2, b=3)"), "{stdout}");
    assert!(stdout.contains("→ calculate_sum(a=10, b=20)"), "{stdout}");
    // Streamed as it was written, and not printed again at the end.
    assert_eq!(
        stdout.matches("The sums are 5 and 30.").count(),
        1,
        "{stdout}"
    );
    assert!(!stdout.contains("test-key") && !text(&out.stderr).contains("test-key"));
    stdout
}

#[tokio::test]
async fn anthropic_two_parallel_calls_results_paired_then_an_answer() {
    let (server, bodies) = fake(vec![
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "calculate_sum", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "toolu_2", "name": "calculate_sum", "input": {"a": 10, "b": 20}}
            ],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "The sums are 5 and 30."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 5}}),
    ])
    .await;
    let stdout = two_parallel_sums(
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        &server.uri(),
    )
    .await;
    // The usage Claude streamed for both steps, read and summed.
    assert!(stdout.contains("tokens: 30 in, 10 out)"), "{stdout}");
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1]["stream"], true, "the demo streams");
    let results = &bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
    assert_eq!(results[0]["content"], "5");
    assert_eq!(results[1]["tool_use_id"], "toolu_2");
    assert_eq!(results[1]["content"], "30");
}

#[tokio::test]
async fn openai_two_parallel_calls_results_paired_then_an_answer() {
    let call = |id: &str, a: i64, b: i64| {
        json!({"id": id, "type": "function",
            "function": {"name": "calculate_sum", "arguments": json!({"a": a, "b": b}).to_string()}})
    };
    let (server, bodies) = fake(vec![
        json!({"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null,
                    "tool_calls": [call("call_1", 2, 3), call("call_2", 10, 20)]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
        json!({"id": "c2", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "The sums are 5 and 30."}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}),
    ])
    .await;
    two_parallel_sums("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", &server.uri()).await;
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool = |id: &str| {
        messages
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(|m| m["content"].clone())
    };
    assert_eq!(tool("call_1"), Some(json!("5")));
    assert_eq!(tool("call_2"), Some(json!("30")));
}

#[tokio::test]
async fn gemini_two_parallel_calls_results_paired_then_an_answer() {
    let (server, bodies) = fake(vec![
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "calculate_sum", "args": {"a": 2, "b": 3}}},
                {"functionCall": {"name": "calculate_sum", "args": {"a": 10, "b": 20}}}
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}),
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"text": "The sums are 5 and 30."}
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5}}),
    ])
    .await;
    two_parallel_sums(
        "gemini",
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        &server.uri(),
    )
    .await;
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    let last = bodies[1]["contents"].as_array().unwrap().last().unwrap();
    let responses: Vec<&Value> = last["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["functionResponse"])
        .collect();
    assert_eq!(responses.len(), 2, "{last}");
    let text = last.to_string();
    assert!(
        text.contains("calculate_sum") && text.contains('5') && text.contains("30"),
        "{text}"
    );
}

#[tokio::test]
async fn a_bad_key_prints_one_clear_line_exits_non_zero_and_keeps_the_prompt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        ))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &["--provider", "anthropic", "--session", "s", "Hello"],
        &[
            ("ANTHROPIC_API_KEY", "bad-key"),
            ("ANTHROPIC_BASE_URL", &server.uri()),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error:") && stderr.contains("401"),
        "{stderr}"
    );
    assert!(!stderr.contains("bad-key"), "{stderr}");
    let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
    let history = store.history("s").await.unwrap();
    assert_eq!(history[0].content, "Hello");
    assert_eq!(history[0].status, Status::Error);
}

/// The session a run printed in its first line.
fn session_of(stdout: &str) -> String {
    stdout
        .lines()
        .next()
        .and_then(|l| l.rsplit("session ").next())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn runs_get_their_own_sessions_and_a_resumed_one_does_not_replay_the_showcase() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = tokio::join!(run(dir.path(), &["Hi"], &[]), run(dir.path(), &["Hi"], &[]));
    let (a, b) = (text(&a.stdout), text(&b.stdout));
    assert_ne!(session_of(&a), session_of(&b), "{a}\n{b}");

    // A named session resumed by another process: the scripted model
    // does not play the showcase again on it.
    let out = run(dir.path(), &["--session", "s", "first"], &[]).await;
    assert!(text(&out.stdout).contains("2 + 40 = 42"));
    let out = run(dir.path(), &["--session", "s", "again"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("it has played its showcase"), "{stdout}");
    assert!(!stdout.contains("calculate_sum"), "{stdout}");
    let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
    let prompts: Vec<String> = store
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content)
        .collect();
    assert_eq!(prompts, ["first", "again"]);
}

#[tokio::test]
async fn a_session_name_cannot_place_files_outside_the_sessions_directory() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let out = run(&work, &["--session", "../../escape", "look"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // The sample went to the session's own (escaped) directory, where
    // analyze_media found it.
    assert!(
        stdout.contains("The picture: A small landscape"),
        "{stdout}"
    );
    assert!(!dir.path().join("escape").exists());
    assert!(
        work.join("kesoku-demo-sessions/%2E%2E%2F%2E%2E%2Fescape/sample.png")
            .exists()
    );
}

#[tokio::test]
async fn provider_settings_are_checked_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    // Set but empty: unset, so offline.
    let out = run(dir.path(), &["Hi"], &[("KESOKU_PROVIDER", "")]).await;
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("offline"));

    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["Hi"], &[("KESOKU_PROVIDER", "bogus")]).await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("KESOKU_PROVIDER is `bogus`"), "{stderr}");

    let out = tokio::process::Command::new(demo())
        .current_dir(dir.path())
        .args(["--provider", "anthropic", "Hi"])
        .env_remove("ANTHROPIC_API_KEY")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    let out = run(dir.path(), &["--history", "--session", "x"], &[]).await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("there is no store"));
    // None of these made a store.
    assert!(!dir.path().join("kesoku-demo.sqlite").exists());
}

/// A session another front end left waiting for a decision: `--session`
/// asks for it (approved at once, stdin being closed) and resumes the
/// turn, whose call then really runs.
#[tokio::test]
async fn a_session_waiting_for_approval_is_decided_and_resumed() {
    use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
    use kesoku::{DynamicTool, ToolOutput, ToolRegistry};
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
        let mut tools = ToolRegistry::new();
        let delete = DynamicTool::new(
            "delete_note",
            "Deletes a note.",
            serde_json::json!({"type": "object", "properties": {"number": {"type": "integer"}}}),
            |_, _| async move { Ok(ToolOutput::new(serde_json::json!("never run here"))) },
        )
        .unwrap()
        .needs_approval();
        tools.register(delete).unwrap();
        let model = ScriptedLlm::from_json(serde_json::json!([
            {"tool_calls": [{"id": "forget", "name": "delete_note", "arguments": {"number": 1}}]}
        ]))
        .unwrap();
        let agent = Agent::builder(model)
            .registry(tools)
            .store(store)
            .build()
            .unwrap();
        let outcome = agent.send("p", "Forget note 1").await.unwrap();
        assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
    }
    let out = run(dir.path(), &["--session", "p", "--history"], &[]).await;
    assert!(
        text(&out.stdout).contains("AwaitingApproval"),
        "{}",
        text(&out.stdout)
    );
    let out = run(dir.path(), &["--session", "p", "and now?"], &[]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("delete_note({\"number\":1}) needs your approval"),
        "{stdout}"
    );
    assert!(stdout.contains("(approved"), "{stdout}");
    // The demo's own tool ran (its notebook is empty in this process).
    assert!(stdout.contains("there is no note 1"), "{stdout}");
    let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
    let history = store.history("p").await.unwrap();
    // The paused turn was taken up (the offline script's closing answer
    // quotes the showcase's calls, which this session lacks, so it ends
    // `error`), then the new prompt ran.
    assert_ne!(history[0].status, Status::AwaitingApproval, "{stdout}");
    let last = history.iter().rev().find(|m| m.role == Role::User).unwrap();
    assert_eq!(
        (last.content.as_str(), last.status),
        ("and now?", Status::Processed)
    );
}

/// `--web` serves the console beside the agent and prints the URL to
/// open: the URL's token opens it (kept as a cookie), and nothing else
/// does.
#[cfg(feature = "console")]
#[tokio::test]
async fn web_serves_the_console_and_prints_its_url() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(demo())
        .current_dir(dir.path())
        .args(["--web", "127.0.0.1:0"])
        .env_remove("KESOKU_PROVIDER")
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let get = |path: &str| {
        let mut stream = std::net::TcpStream::connect(host).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let opened = get(path);
    assert!(opened.starts_with("HTTP/1.1 303"), "{opened}");
    assert!(opened.contains("HttpOnly"), "{opened}");
    let refused = get("/api/sessions");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    child.kill().unwrap();
    child.wait().unwrap();
}
