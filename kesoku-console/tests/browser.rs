//! The console in a real browser: Chromium from the system's packages,
//! driven through its `WebDriver` (`chromedriver`) with fantoccini. Each
//! test keeps a screenshot under this test target's directory
//! (`console-screenshots/`).
//!
//! Without `chromedriver` on the PATH the tests say they are skipped,
//! except in CI (`CI` set), where `.ci/run` installs it and its absence
//! fails them. The test binary re-runs itself as a worker process for the
//! approval test: with `KESOKU_CONSOLE_WORKER_DB` set, `worker_process`
//! serves that `SQLite` file.

mod support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::StreamExt as _;
use kesoku::console::{Console, Running};
use kesoku::llm::{
    Agent, AssistantTurn, EventStream, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm,
    StreamEvent, ToolDeclaration,
};
use kesoku::store::SqliteStore;
use kesoku::{DynamicTool, Gateway, Message, MessageType, Role, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// The `SQLite` file the worker process serves; unset in the tests.
const WORKER_DB: &str = "KESOKU_CONSOLE_WORKER_DB";
/// How long a page may take to show what a test waits for.
const PATIENCE: Duration = Duration::from_secs(20);

/// A chromedriver process, killed when dropped.
struct Driver(Child, u16);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A browser session on a chromedriver of its own; `None` (and a line
/// saying why) where none is installed, outside CI.
async fn browser(test: &str) -> Option<(Driver, Client)> {
    let found = Command::new("chromedriver").arg("--version").output();
    if found.is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromedriver is not installed: `.ci/run` installs Debian's chromium and chromium-driver"
        );
        eprintln!(
            "skipped {test}: chromedriver is not installed (apt-get install chromium chromium-driver)"
        );
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver(child, port);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"]}),
    );
    let url = format!("http://127.0.0.1:{}", driver.1);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return Some((driver, client)),
            Err(e) if tokio::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no WebDriver session on chromedriver: {e}"),
        }
    }
}

/// Keeps a screenshot of the page as `name.png`.
async fn screenshot(client: &Client, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// Waits until `script` (a function body returning a boolean) is true on
/// the page.
async fn until(client: &Client, script: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let ok = client.execute(script, vec![]).await.ok();
        if ok.as_ref().and_then(serde_json::Value::as_bool) == Some(true) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let text = client
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap_or_default();
            panic!("the page never showed {what}; it shows:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the page's text has `text` (a script fragment).
fn shows(text: &str) -> String {
    format!(
        "return document.body.innerText.includes({})",
        serde_json::to_string(text).unwrap()
    )
}

async fn open(client: &Client, running: &Running, route: &str) {
    client.goto(running.url()).await.expect("the console opens");
    if !route.is_empty() {
        client
            .goto(&format!("http://{}/{route}", running.addr()))
            .await
            .expect("the route opens");
    }
}

/// A scripted model that streams its text in pieces, a little apart.
struct Slowly(ScriptedLlm);

impl Llm for Slowly {
    fn provider(&self) -> &'static str {
        "slowly"
    }
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        history: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.0.complete(session_id, history, tools, options)
    }
    fn stream<'a>(
        &'a self,
        session_id: &'a str,
        history: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> EventStream<'a> {
        let turn = self.0.complete(session_id, history, tools, options);
        Box::pin(
            futures_util::stream::once(async move {
                let turn = match turn.await {
                    Ok(turn) => turn,
                    Err(e) => return vec![Err(e)],
                };
                let mut events: Vec<_> = turn
                    .text
                    .split_inclusive(' ')
                    .map(|w| Ok(StreamEvent::Text(w.to_owned())))
                    .collect();
                events.push(Ok(StreamEvent::Done(turn)));
                events
            })
            .flat_map(futures_util::stream::iter)
            .then(|e| async move {
                tokio::time::sleep(Duration::from_millis(60)).await;
                e
            }),
        )
    }
    fn streams(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_opens_with_its_token_and_lists_the_sessions() {
    let Some((_driver, client)) = browser("it_opens_with_its_token").await else {
        return;
    };
    let agent = Agent::builder(ScriptedLlm::from_json(json!([{"text": "Hello."}])).unwrap())
        .build()
        .unwrap();
    agent.send("greeting", "Say hello").await.unwrap();
    let console = Console::new(&agent);
    let running = support::serve(&console).await;
    // Without the token: refused.
    client
        .goto(&format!("http://{}/", running.addr()))
        .await
        .unwrap();
    until(&client, &shows("needs its token"), "the refusal").await;
    open(&client, &running, "").await;
    until(&client, &shows("greeting"), "the session").await;
    // The token left the address bar for a cookie.
    let url = client.current_url().await.unwrap();
    assert!(!url.as_str().contains("token"), "{url}");
    screenshot(&client, "sessions").await;
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_from_the_page_streams_its_answer() {
    let Some((_driver, client)) = browser("a_prompt_sent_streams").await else {
        return;
    };
    let model = ScriptedLlm::from_json(json!([
        {"text": "Ready."},
        {"text": "Lyon sits where the Rhône meets the Saône, and it is known for its food."}
    ]))
    .unwrap();
    let agent = Agent::builder(Slowly(model))
        .streaming(true)
        .build()
        .unwrap();
    agent.send("chat", "warm up").await.ok();
    let console = Console::new(&agent);
    let running = support::serve(&console).await;
    open(&client, &running, "#/s/chat").await;
    let text = client
        .wait()
        .for_element(Locator::Css("#prompt"))
        .await
        .unwrap();
    text.send_keys("Tell me about Lyon").await.unwrap();
    client
        .find(Locator::Css("form.prompt button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The first words show while the rest is still being written.
    until(
        &client,
        "return document.querySelector('.streaming').innerText.startsWith('Lyon sits')",
        "the streamed answer",
    )
    .await;
    screenshot(&client, "streaming").await;
    until(
        &client,
        "return [...document.querySelectorAll('ol.messages .content')].some(e => e.innerText.endsWith('known for its food.'))",
        "the stored answer",
    )
    .await;
    screenshot(&client, "answered").await;
    client.close().await.unwrap();
}

/// A tool that needs a person's approval, counting nothing: the worker
/// process runs it.
fn charge() -> ToolRegistry {
    let tool = DynamicTool::new(
        "charge",
        "Charges a card.",
        json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
        |args, _| async move { Ok(ToolOutput::new(json!(format!("charged {}", args["cents"])))) },
    )
    .unwrap()
    .needs_approval();
    let mut registry = ToolRegistry::new();
    registry.register(tool).unwrap();
    registry
}

fn billing(gateway: &Gateway) -> Agent {
    Agent::builder(
        ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"cents": 500}}]},
            {"text": "Charged: {{c1}}."}
        ]))
        .unwrap()
        .per_prompt(),
    )
    .registry(charge())
    .gateway(gateway.clone())
    .build()
    .unwrap()
}

/// The worker process: serves the file until killed; nothing unless
/// re-run by the approval test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_process() {
    let Ok(path) = std::env::var(WORKER_DB) else {
        return;
    };
    let gateway = Gateway::new(SqliteStore::open(path).unwrap());
    billing(&gateway).serve().await.unwrap();
}

/// Kills the worker when the test ends.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_a_worker_paused_is_approved_from_the_page_and_its_turn_ends() {
    let Some((_driver, client)) = browser("a_call_a_worker_paused").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("console.db");
    let gateway = Gateway::new(SqliteStore::open(&db).unwrap());
    let _worker = Worker(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "worker_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WORKER_DB, &db)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The console is a process of its own here: it only posts.
    let console = Console::new(&billing(&gateway)).posting();
    let running = support::serve(&console).await;
    open(&client, &running, "#/s/bill").await;
    let text = client
        .wait()
        .for_element(Locator::Css("#prompt"))
        .await
        .unwrap();
    text.send_keys("Charge me 5 dollars").await.unwrap();
    client
        .find(Locator::Css("form.prompt button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The worker took it and paused: the approvals page lists the call.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let history = gateway.history("bill").await.unwrap();
        if history
            .first()
            .is_some_and(|p| p.status == Status::AwaitingApproval)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .goto(&format!("http://{}/#/approvals", running.addr()))
        .await
        .unwrap();
    let approve = client
        .wait()
        .for_element(Locator::Css("button[aria-label='Approve charge']"))
        .await
        .unwrap();
    screenshot(&client, "approvals").await;
    approve.click().await.unwrap();
    until(&client, &shows("Nothing waits."), "the list emptied").await;
    // The worker resumes the turn, which ends with the call's result.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let history = gateway.history("bill").await.unwrap();
        if history
            .last()
            .is_some_and(|m| m.content == "Charged: charged 500.")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    open(&client, &running, "#/s/bill").await;
    until(&client, &shows("Charged: charged 500."), "the answer").await;
    screenshot(&client, "approved").await;
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_is_interrupted_from_the_page() {
    let Some((_driver, client)) = browser("a_running_turn_is_interrupted").await else {
        return;
    };
    let started = Arc::new(tokio::sync::Notify::new());
    let begun = Arc::clone(&started);
    let slow = DynamicTool::new(
        "slow_job",
        "Runs for a long time.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let begun = Arc::clone(&begun);
            async move {
                begun.notify_one();
                tokio::time::sleep(Duration::from_secs(120)).await;
                Ok(ToolOutput::new(json!("done")))
            }
        },
    )
    .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(slow).unwrap();
    let agent = Agent::builder(
        ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "j1", "name": "slow_job", "arguments": {}}]},
            {"text": "unreachable"}
        ]))
        .unwrap(),
    )
    .registry(registry)
    .build()
    .unwrap();
    let console = Console::new(&agent);
    let running = support::serve(&console).await;
    open(&client, &running, "#/s/job").await;
    let text = client
        .wait()
        .for_element(Locator::Css("#prompt"))
        .await
        .unwrap();
    text.send_keys("Run the job").await.unwrap();
    client
        .find(Locator::Css("form.prompt button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, started.notified())
        .await
        .expect("the job started");
    until(&client, &shows("slow_job"), "the running call").await;
    client
        .find(Locator::Css("form.prompt button[type=button]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let history = agent.history("job").await.unwrap();
        if history
            .first()
            .is_some_and(|p| p.status == Status::Interrupted)
        {
            // Its call got its one result, saying so.
            assert!(history.iter().any(|m| m.kind == MessageType::ToolResult));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until(&client, &shows("cancelled"), "the call's result").await;
    screenshot(&client, "interrupted").await;
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_content_is_shown_as_text_and_runs_nothing() {
    let Some((_driver, client)) = browser("hostile_content").await else {
        return;
    };
    let agent = Agent::builder(ScriptedLlm::from_json(json!([])).unwrap())
        .build()
        .unwrap();
    let store = agent.gateway().store();
    let hostile = [
        "<script>window.__pwned = 'script'</script>",
        "<img src=x onerror=\"window.__pwned='img'\" data-injected=1>",
        "<a href=\"javascript:window.__pwned='link'\" data-injected=1>click</a>",
        "<svg onload=\"window.__pwned='svg'\" data-injected=1></svg>",
        "\" onmouseover=\"window.__pwned='attr'",
    ];
    let mut prompt = Message::new("evil", Role::User, MessageType::Text, hostile.join("\n"))
        .with_status(Status::Processed);
    prompt.metadata.insert("note".into(), json!(hostile));
    kesoku::store::MessageLog::insert(&**store, &prompt)
        .await
        .unwrap();
    let request = kesoku::ToolRequest::new(
        "c1",
        "<img src=x onerror=alert(1)>",
        json!({"x": hostile[0]}),
    );
    let call = Message::tool_call("evil", &request).with_parent(&prompt.id);
    kesoku::store::MessageLog::insert(&**store, &call)
        .await
        .unwrap();
    let gigantic = "A".repeat(2_000_000);
    let mut result =
        Message::new("evil", Role::Tool, MessageType::ToolResult, gigantic).with_parent(&call.id);
    result
        .metadata
        .insert(kesoku::keys::TOOL_NAME.into(), json!("<b>bold</b>"));
    kesoku::store::MessageLog::insert(&**store, &result)
        .await
        .unwrap();
    let answer = Message::new("evil", Role::Assistant, MessageType::Text, hostile[1])
        .with_parent(&prompt.id);
    kesoku::store::MessageLog::insert(&**store, &answer)
        .await
        .unwrap();
    let console = Console::new(&agent);
    let running = support::serve(&console).await;
    open(&client, &running, "#/s/evil").await;
    until(
        &client,
        &shows("<script>window.__pwned"),
        "the script as text",
    )
    .await;
    // Nothing ran, nothing was injected, and the page still answers.
    let pwned = client
        .execute("return window.__pwned === undefined", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, json!(true));
    let injected = client
        .execute("return document.querySelectorAll('[data-injected], main img, main svg, main script').length", vec![])
        .await
        .unwrap();
    assert_eq!(injected, json!(0));
    assert!(client.get_alert_text().await.is_err(), "an alert opened");
    let bounded = client
        .execute("return [...document.querySelectorAll('.content')].every(e => e.innerText.length < 30000)", vec![])
        .await
        .unwrap();
    assert_eq!(bounded, json!(true), "a gigantic line is cut");
    screenshot(&client, "hostile").await;
    client
        .find(Locator::Css("nav a[href='#/']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(&client, &shows("evil"), "the sessions page, after").await;
    client.close().await.unwrap();
}
