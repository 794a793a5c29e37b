//! An agent offered to another as a tool: its answer is the call's
//! result; it runs in a session of its own, named after the call and
//! linked back to it; what it does reaches the parent's listeners while
//! it runs, tagged with its path; interrupting the parent interrupts it;
//! nesting past the limit is refused; typed input and output.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku::llm::{
    Agent, AgentError, AssistantTurn, EventStream, Llm, LlmError, LlmFuture, LlmOptions,
    ScriptedLlm, StreamEvent, ToolDeclaration, TurnStatus,
};
use kesoku::{
    DeltaKind, DynamicTool, Message, MessageType, Role, Status, ToolArg, ToolOutput, ToolRegistry,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A scripted model that streams each text reply in two pieces.
struct Streamed(ScriptedLlm);

impl Llm for Streamed {
    fn provider(&self) -> &'static str {
        "streamed"
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
                let mut events = Vec::new();
                if !turn.text.is_empty() {
                    let half = turn.text.len() / 2;
                    let half = (0..=half)
                        .rev()
                        .find(|i| turn.text.is_char_boundary(*i))
                        .unwrap_or(0);
                    events.push(Ok(StreamEvent::Text(turn.text[..half].to_owned())));
                    events.push(Ok(StreamEvent::Text(turn.text[half..].to_owned())));
                }
                events.push(Ok(StreamEvent::Done(turn)));
                events
            })
            .flat_map(futures_util::stream::iter),
        )
    }
    fn streams(&self) -> bool {
        true
    }
}

fn script(turns: Value) -> ScriptedLlm {
    ScriptedLlm::from_json(turns).unwrap()
}

/// A tool that posts a progress note, then waits for `release`.
fn lookup(release: Arc<Notify>) -> ToolRegistry {
    let tool = DynamicTool::new(
        "lookup",
        "Looks a city up.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |args, ctx| {
            let release = Arc::clone(&release);
            async move {
                ctx.post("searching the census").await.unwrap();
                release.notified().await;
                Ok(ToolOutput::new(json!(format!(
                    "{} has 522,250 people",
                    args["city"]
                ))))
            }
        },
    )
    .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(tool).unwrap();
    registry
}

fn researcher(release: Arc<Notify>) -> Agent {
    let model = script(json!([
        {"tool_calls": [{"id": "k1", "name": "lookup", "arguments": {"city": "Lyon"}}]},
        {"text": "Lyon has 522,250 people."}
    ]));
    Agent::builder(Streamed(model))
        .name("researcher")
        .streaming(true)
        .registry(lookup(release))
        .build()
        .unwrap()
}

fn parent(child: &Agent, streamed: bool) -> Agent {
    let model = script(json!([
        {"tool_calls": [{"id": "c1", "name": "research", "arguments": {"prompt": "How many people live in Lyon?"}}]},
        {"text": "About half a million."}
    ]));
    let builder = if streamed {
        Agent::builder(Streamed(model)).streaming(true)
    } else {
        Agent::builder(model)
    };
    builder
        .sub_agent(child.as_tool("research", "Finds facts."))
        .build()
        .unwrap()
}

/// What a nested delta shows, in a line: its kind and what it carries.
fn shown(kind: &DeltaKind) -> String {
    match kind {
        DeltaKind::Text(t) => format!("text {t}"),
        DeltaKind::Message(m) => format!("{:?} {:?} {}", m.role, m.kind, m.content),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_childs_events_reach_the_parents_listeners_in_order_while_it_runs() {
    let release = Arc::new(Notify::new());
    let child = researcher(Arc::clone(&release));
    let agent = parent(&child, false);
    let mut deltas = agent.gateway().deltas(Some("s"));
    let turn = tokio::spawn({
        let agent = agent.clone();
        async move { agent.send("s", "How big is Lyon?").await }
    });
    // Everything up to the child's progress note arrives while its tool
    // still waits: the turn is not over.
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|s: &String| s.contains("searching the census"))
    {
        let delta = tokio::time::timeout(Duration::from_secs(10), deltas.next())
            .await
            .expect("the child's events come while it runs")
            .unwrap();
        assert_eq!(delta.session_id, "s");
        assert_eq!(delta.path.len(), 1, "{delta:?}");
        assert_eq!(delta.path[0].tool, "research");
        seen.push(shown(&delta.kind));
    }
    assert!(!turn.is_finished());
    release.notify_one();
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("About half a million."));
    while let Ok(Some(delta)) =
        tokio::time::timeout(Duration::from_millis(200), deltas.next()).await
    {
        if !delta.path.is_empty() {
            seen.push(shown(&delta.kind));
        }
    }
    assert_eq!(
        seen,
        [
            "Assistant ToolCall lookup({\"city\":\"Lyon\"})".to_owned(),
            "Assistant Text searching the census".into(),
            "Tool ToolResult \"Lyon\" has 522,250 people".into(),
            "text Lyon has 522".into(),
            "text ,250 people.".into(),
            "Assistant Text Lyon has 522,250 people.".into(),
        ]
    );
    // The child's answer is the parent's call's result.
    let result = outcome
        .messages
        .iter()
        .find(|m| m.kind == MessageType::ToolResult)
        .unwrap();
    assert_eq!(result.content, "Lyon has 522,250 people.");
}

#[tokio::test]
async fn a_child_runs_in_a_session_named_after_the_call_and_linked_back() {
    let release = Arc::new(Notify::new());
    release.notify_one();
    let child = researcher(release);
    let agent = parent(&child, true);
    let outcome = agent.send("s", "How big is Lyon?").await.unwrap();
    let call = &outcome.messages[0];
    assert_eq!(call.kind, MessageType::ToolCall);
    let session = format!("s/research/{}", call.id);
    let history = child.history(&session).await.unwrap();
    let prompt = &history[0];
    assert_eq!(prompt.role, Role::User);
    assert_eq!(prompt.content, "How many people live in Lyon?");
    assert_eq!(prompt.status, Status::Processed);
    let nested = &prompt.metadata["nested"];
    assert_eq!(nested["parent_session"], "s");
    assert_eq!(nested["agent"], "researcher");
    assert_eq!(nested["path"][0]["call_id"], call.id.as_str());
    assert_eq!(nested["path"][0]["session_id"], session.as_str());
    // One store holds both sessions (the parent took the child's
    // gateway), and the parent's session holds only its own turn.
    assert_eq!(agent.history(&session).await.unwrap(), history);
    let own = agent.history("s").await.unwrap();
    assert!(own.iter().all(|m| m.session_id == "s"));
    assert_eq!(history.last().unwrap().content, "Lyon has 522,250 people.");
}

#[tokio::test]
async fn interrupting_the_parent_interrupts_the_child() {
    let never = Arc::new(Notify::new());
    let child = researcher(Arc::clone(&never));
    let agent = parent(&child, false);
    let mut deltas = agent.gateway().deltas(Some("s"));
    let turn = tokio::spawn({
        let agent = agent.clone();
        async move { agent.send("s", "How big is Lyon?").await }
    });
    // The child's tool has begun when its note is shown.
    loop {
        let delta = deltas.next().await.unwrap();
        if shown(&delta.kind).contains("searching") {
            break;
        }
    }
    assert!(agent.interrupt("s"));
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.status, TurnStatus::Interrupted);
    let call = &outcome.messages[0];
    let session = format!("s/research/{}", call.id);
    // The child's turn ends interrupted too (in its own task, soon).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let history = child.history(&session).await.unwrap();
        if history[0].status == Status::Interrupted {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn nesting_past_the_limit_is_an_error_the_model_reads() {
    let inner = Agent::builder(script(json!([{"text": "unreachable"}])))
        .name("inner")
        .build()
        .unwrap();
    let middle = Agent::builder(script(json!([
        {"tool_calls": [{"id": "m1", "name": "ask_inner", "arguments": {"prompt": "deeper"}}]},
        {"text": "I could not go deeper."}
    ])))
    .name("middle")
    .sub_agent(inner.as_tool("ask_inner", "Goes deeper.").max_depth(1))
    .build()
    .unwrap();
    let model = script(json!([
        {"tool_calls": [{"id": "c1", "name": "ask_middle", "arguments": {"prompt": "go"}}]},
        {"text": "Done."}
    ]));
    let agent = Agent::builder(model)
        .sub_agent(middle.as_tool("ask_middle", "Asks the middle agent."))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Go deep").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.messages[1].content, "I could not go deeper.");
    let session = format!("s/ask_middle/{}", outcome.messages[0].id);
    let refused = middle
        .history(&session)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.kind == MessageType::ToolResult)
        .unwrap();
    assert_eq!(
        refused.content,
        "Error: the agent tool `ask_inner` would nest 2 agents deep (ask_middle > ask_inner), past its limit of 1: answer without it"
    );
    // The inner agent never ran.
    assert!(
        inner
            .history(&format!("{session}/ask_inner/x"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// What the child is asked, typed (its schema is the tool's).
#[derive(Debug, Deserialize, ToolArg)]
#[expect(dead_code, reason = "only its schema is used")]
struct CityQuery {
    /// The city.
    city: String,
    /// The year of the census.
    year: u32,
}

/// What it answers, typed (its schema is asked for).
#[derive(Debug, Deserialize, ToolArg)]
#[expect(dead_code, reason = "only its schema is used")]
struct Census {
    /// How many people.
    population: u64,
}

#[tokio::test]
async fn typed_input_and_a_typed_answer() {
    let child = Agent::builder(script(json!([{"text": "{\"population\": 522250}"}])))
        .name("census")
        .build()
        .unwrap();
    let tool = child
        .as_tool("census", "Reads the census.")
        .input::<CityQuery>()
        .output::<Census>();
    let model = script(json!([
        {"tool_calls": [{"id": "c1", "name": "census", "arguments": {"city": "Lyon", "year": 2021}}]},
        {"text": "522,250."}
    ]));
    let agent = Agent::builder(model).sub_agent(tool).build().unwrap();
    let outcome = agent.send("s", "Lyon in 2021?").await.unwrap();
    let result = &outcome.messages[1];
    assert_eq!(
        result.metadata["tool_result"],
        json!({"population": 522_250})
    );
    let session = format!("s/census/{}", outcome.messages[0].id);
    let prompt = &child.history(&session).await.unwrap()[0];
    let asked: Value = serde_json::from_str(&prompt.content).unwrap();
    assert_eq!(asked, json!({"city": "Lyon", "year": 2021}));
    assert_eq!(prompt.metadata["output"]["name"], "Census");
}

#[tokio::test]
async fn two_agents_with_one_name_are_refused() {
    let child = Agent::builder(script(json!([]))).build().unwrap();
    let err = Agent::builder(script(json!([])))
        .sub_agent(child.as_tool("helper", "Helps."))
        .build()
        .unwrap_err();
    assert!(matches!(err, AgentError::Config(_)));
    assert_eq!(
        err.to_string(),
        "invalid agent configuration: two agents are named `kesoku` here (this one, or one it offers as a tool or hands sessions to): give each its own with `AgentBuilder::name`, so `serve` can tell their turns apart"
    );
}

#[tokio::test]
async fn a_child_over_another_store_is_refused() {
    let child = Agent::builder(script(json!([])))
        .name("elsewhere")
        .build()
        .unwrap();
    let err = Agent::builder(script(json!([])))
        .gateway(kesoku::Gateway::in_memory())
        .sub_agent(child.as_tool("helper", "Helps."))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the agent `helper` keeps its sessions in another store"),
        "{err}"
    );
}
