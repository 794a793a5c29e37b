//! The console's API over loopback: each endpoint, and each refusal (no
//! token, another Origin, no CSRF token, an unknown session, a decision
//! on a call answered already).

mod support;

use std::time::Duration;

use kesoku::console::Console;
use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::{DynamicTool, ToolOutput, ToolRegistry};
use serde_json::json;
use support::{call, change, csrf, serve};

fn agent(script: serde_json::Value) -> Agent {
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
    Agent::builder(ScriptedLlm::from_json(script).unwrap())
        .registry(registry)
        .build()
        .unwrap()
}

#[tokio::test]
async fn nothing_is_served_without_the_token() {
    let console = Console::new(&agent(json!([])));
    let running = serve(&console).await;
    for path in [
        "/",
        "/app.js",
        "/api/sessions",
        "/api/sessions/s/events",
        "/api/approvals",
    ] {
        let answer = call(&running, "GET", path, &[], None).await;
        assert_eq!(answer.status, 401, "{path}");
        let wrong = call(
            &running,
            "GET",
            path,
            &[("cookie", "kesoku_console=nope")],
            None,
        )
        .await;
        assert_eq!(wrong.status, 401, "{path}");
    }
    // The token in the page's URL, once: a cookie, and the token dropped.
    let first = call(
        &running,
        "GET",
        &format!("/?token={}", console.token()),
        &[],
        None,
    )
    .await;
    assert_eq!(first.status, 303);
    assert_eq!(first.headers["location"], "/");
    let cookie = first.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let kept = cookie.split(';').next().unwrap();
    let page = call(&running, "GET", "/", &[("cookie", kept)], None).await;
    assert_eq!(page.status, 200);
    assert!(
        page.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    // The token in the URL of anything but the page is refused.
    let api = call(
        &running,
        "GET",
        &format!("/api/sessions?token={}", console.token()),
        &[],
        None,
    )
    .await;
    assert_eq!(api.status, 401);
}

#[tokio::test]
async fn a_change_needs_the_pages_origin_and_csrf_token() {
    let console = Console::new(&agent(json!([{"text": "Hi."}])));
    let running = serve(&console).await;
    let bearer = format!("Bearer {}", console.token());
    let origin = format!("http://{}", running.addr());
    let csrf = csrf(&running, console.token()).await;
    let body = Some(json!({"text": "Hello"}));
    let path = "/api/sessions/s/prompt";
    let no_origin = call(
        &running,
        "POST",
        path,
        &[
            ("authorization", &bearer),
            ("x-csrf-token", &csrf),
            ("content-type", "application/json"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(no_origin.status, 403);
    let elsewhere = call(
        &running,
        "POST",
        path,
        &[
            ("authorization", &bearer),
            ("origin", "http://evil.example"),
            ("x-csrf-token", &csrf),
            ("content-type", "application/json"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(elsewhere.status, 403);
    assert!(
        elsewhere.body.contains("another Origin"),
        "{}",
        elsewhere.body
    );
    let no_csrf = call(
        &running,
        "POST",
        path,
        &[
            ("authorization", &bearer),
            ("origin", &origin),
            ("content-type", "application/json"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(no_csrf.status, 403);
    assert!(no_csrf.body.contains("CSRF"), "{}", no_csrf.body);
    let wrong_csrf = call(
        &running,
        "POST",
        path,
        &[
            ("authorization", &bearer),
            ("origin", &origin),
            ("x-csrf-token", "0000"),
            ("content-type", "application/json"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(wrong_csrf.status, 403);
    let ok = change(
        &running,
        console.token(),
        "POST",
        path,
        json!({"text": "Hello"}),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[tokio::test]
async fn sessions_messages_and_a_prompt_answered() {
    let agent = agent(json!([{"text": "Hi there."}, {"text": "Again."}]));
    agent.send("first", "Hello").await.unwrap();
    let console = Console::new(&agent);
    let running = serve(&console).await;
    let bearer = format!("Bearer {}", console.token());
    let auth = [("authorization", bearer.as_str())];
    let prompt = change(
        &running,
        console.token(),
        "POST",
        "/api/sessions/second/prompt",
        json!({"text": "Hello again"}),
    )
    .await;
    assert_eq!(prompt.status, 200, "{}", prompt.body);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let page = call(
            &running,
            "GET",
            "/api/sessions/second/messages",
            &auth,
            None,
        )
        .await;
        if page.status == 200 && page.json()["messages"].as_array().unwrap().len() == 2 {
            assert_eq!(
                page.json()["messages"][1]["message"]["content"],
                "Hi there."
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", page.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let list = call(&running, "GET", "/api/sessions", &auth, None)
        .await
        .json();
    assert_eq!(list["total"], 2);
    let ids: Vec<_> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"first") && ids.contains(&"second"), "{list}");
    assert!(
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "idle")
    );
    let found = call(&running, "GET", "/api/sessions?q=again", &auth, None)
        .await
        .json();
    assert_eq!(found["total"], 1);
    assert_eq!(found["sessions"][0]["id"], "second");
    let unknown = call(
        &running,
        "GET",
        "/api/sessions/nobody/messages",
        &auth,
        None,
    )
    .await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body.contains("there is no session `nobody`"));
    let empty = change(
        &running,
        console.token(),
        "POST",
        "/api/sessions/s/prompt",
        json!({"text": "  "}),
    )
    .await;
    assert_eq!(empty.status, 422);
    let idle = change(
        &running,
        console.token(),
        "POST",
        "/api/sessions/first/interrupt",
        json!({}),
    )
    .await;
    assert_eq!(idle.status, 409);
}

#[tokio::test]
async fn a_call_waiting_is_listed_decided_once_and_its_turn_resumes() {
    let agent = agent(json!([
        {"tool_calls": [{"id": "c1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "Done: {{c1}}"}
    ]));
    let paused = agent.send("s", "Charge me").await.unwrap();
    assert_eq!(paused.status, TurnStatus::AwaitingApproval);
    let console = Console::new(&agent);
    let running = serve(&console).await;
    let bearer = format!("Bearer {}", console.token());
    let auth = [("authorization", bearer.as_str())];
    let listed = call(&running, "GET", "/api/approvals", &auth, None)
        .await
        .json();
    let waiting = &listed["approvals"][0];
    assert_eq!(waiting["tool"], "charge");
    assert_eq!(waiting["arguments"], json!({"cents": 500}));
    assert!(waiting["asked"].is_string());
    let id = waiting["id"].as_str().unwrap().to_owned();
    let path = format!("/api/approvals/{id}");
    let decided = change(
        &running,
        console.token(),
        "POST",
        &path,
        json!({"approve": true}),
    )
    .await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    assert_eq!(decided.json()["ready"], true);
    // The turn resumes here, and ends.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while agent.history("s").await.unwrap().last().unwrap().content != "Done: charged 500" {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = change(
        &running,
        console.token(),
        "POST",
        &path,
        json!({"approve": false, "reason": "late"}),
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.body);
    let unknown = change(
        &running,
        console.token(),
        "POST",
        "/api/approvals/nope",
        json!({"approve": true}),
    )
    .await;
    assert_eq!(unknown.status, 404);
    let none = call(&running, "GET", "/api/approvals", &auth, None)
        .await
        .json();
    assert_eq!(none["approvals"], json!([]));
}
