//! Handoffs: the model hands the conversation to another agent, which
//! goes on with its own instructions, tools and model; the handoff is
//! stored, so the next prompt, served by another process, runs the agent
//! that now owns the session; a cycle within one turn is refused.
//!
//! The test binary re-runs itself as the other process: with
//! `KESOKU_HANDOFF_DB` set, `other_process` serves that file until the
//! session's second prompt is answered.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kesoku::llm::{
    Agent, AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, Team, ToolDeclaration,
    TurnStatus,
};
use kesoku::store::SqliteStore;
use kesoku::{DynamicTool, Gateway, Message, MessageType, Role, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// The file the other process serves; unset in the tests themselves.
const DB: &str = "KESOKU_HANDOFF_DB";
/// What it prints once the second prompt is answered.
const SERVED: &str = "@served";

/// What a model was asked: the system prompt, the tools, the history.
type Asked = Arc<Mutex<Vec<(Option<String>, Vec<String>, Vec<Message>)>>>;

/// A scripted model that records what it is asked.
struct Recording(ScriptedLlm, Asked);

impl Llm for Recording {
    fn provider(&self) -> &'static str {
        "recording"
    }
    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        history: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        let names = tools.iter().map(|t| t.name.clone()).collect();
        self.1
            .lock()
            .unwrap()
            .push((options.system.clone(), names, history.to_vec()));
        self.0.complete(session_id, history, tools, options)
    }
}

fn script(turns: serde_json::Value) -> ScriptedLlm {
    ScriptedLlm::from_json(turns).unwrap().per_prompt()
}

fn invoices() -> ToolRegistry {
    let tool = DynamicTool::new(
        "invoice_status",
        "Says whether an invoice is paid.",
        json!({"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}),
        |args, _| async move { Ok(ToolOutput::new(json!(format!("invoice {} is paid", args["number"])))) },
    )
    .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(tool).unwrap();
    registry
}

/// Triage hands every first prompt to billing; billing can hand back.
fn team(gateway: &Gateway, asked: &Asked) -> (Agent, Agent) {
    let team = Team::new();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}
    ])))
    .name("triage")
    .system_prompt("You route questions.")
    .gateway(gateway.clone())
    .team(&team)
    .handoff_to("billing", "invoices and payments")
    .build()
    .unwrap();
    let billing = Agent::builder(Recording(
        script(json!([
            {"text": "Billing answers the next prompt."},
            {"tool_calls": [{"id": "b1", "name": "invoice_status", "arguments": {"number": 7}}]},
            {"text": "Billing: {{b1}}."}
        ])),
        Arc::clone(asked),
    ))
    .name("billing")
    .system_prompt("You handle invoices.")
    .gateway(gateway.clone())
    .registry(invoices())
    .team(&team)
    .handoff_to("triage", "anything but invoices")
    .build()
    .unwrap();
    (triage, billing)
}

/// The agent each message of a turn names.
fn agents(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m.metadata["agent"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_agent_handed_to_goes_on_with_its_instructions_tools_and_model() {
    let asked = Asked::default();
    let gateway = Gateway::in_memory();
    let (triage, _billing) = team(&gateway, &asked);
    let outcome = triage.send("s", "Is invoice 7 paid?").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Billing: invoice 7 is paid.")
    );
    let kinds: Vec<_> = outcome.messages.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MessageType::ToolCall,
            MessageType::ToolResult,
            MessageType::ToolCall,
            MessageType::ToolResult,
            MessageType::Text
        ]
    );
    // The handoff's result names the agent it goes to; the rest is
    // billing's.
    assert_eq!(
        agents(&outcome.messages),
        ["triage", "billing", "billing", "billing", "billing"]
    );
    let (system, tools, history) = asked.lock().unwrap()[0].clone();
    assert_eq!(system.as_deref(), Some("You handle invoices."));
    assert!(tools.contains(&"invoice_status".to_owned()), "{tools:?}");
    assert!(
        tools.contains(&"transfer_to_triage".to_owned()),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"transfer_to_billing".to_owned()),
        "{tools:?}"
    );
    // Billing sees the conversation, the handoff included.
    assert_eq!(history[0].content, "Is invoice 7 paid?");
    assert_eq!(
        history[2].content,
        "Transferred to `billing`, which answers from here."
    );
    let stored = triage.history("s").await.unwrap();
    assert_eq!(stored[0].status, Status::Processed);
}

#[tokio::test]
async fn handing_back_within_the_turn_is_refused_as_a_cycle() {
    let gateway = Gateway::in_memory();
    let team = Team::new();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}
    ])))
    .name("triage")
    .gateway(gateway.clone())
    .team(&team)
    .handoff_to("billing", "invoices")
    .build()
    .unwrap();
    let _billing = Agent::builder(script(json!([
        {"text": "unused"},
        {"tool_calls": [{"id": "h2", "name": "transfer_to_triage", "arguments": {}}]},
        {"text": "I will answer myself."}
    ])))
    .name("billing")
    .gateway(gateway.clone())
    .team(&team)
    .handoff_to("triage", "anything else")
    .build()
    .unwrap();
    let outcome = triage.send("s", "Help").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I will answer myself."));
    let refused = &outcome.messages[3];
    assert_eq!(refused.kind, MessageType::ToolResult);
    assert_eq!(
        refused.content,
        "Error: handing the conversation to `triage` again would go round in a cycle within this turn (triage > billing > triage); answer the user instead"
    );
}

#[test]
fn a_handoff_to_a_name_without_a_team_is_refused() {
    let err = Agent::builder(script(json!([])))
        .handoff_to("billing", "invoices")
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`handoff_to(\"billing\")` names an agent by its name within a team"),
        "{err}"
    );
}

/// The other process: serves the file until the session's second prompt
/// is answered; nothing unless re-run by the test below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_process() {
    let Ok(path) = std::env::var(DB) else {
        return;
    };
    let gateway = Gateway::new(SqliteStore::open(path).unwrap());
    let (triage, _billing) = team(&gateway, &Asked::default());
    let serving = tokio::spawn({
        let triage = triage.clone();
        async move { triage.serve().await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let history = triage.history("s").await.unwrap();
        let prompts: Vec<_> = history.iter().filter(|m| m.role == Role::User).collect();
        if prompts.len() == 2 && prompts[1].status == Status::Processed {
            break;
        }
        assert!(Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serving.abort();
    println!("{SERVED}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_prompt_served_by_another_process_runs_the_agent_handed_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handoff.db");
    let gateway = Gateway::new(SqliteStore::open(&path).unwrap());
    let (triage, _billing) = team(&gateway, &Asked::default());
    let first = triage.send("s", "Is invoice 7 paid?").await.unwrap();
    assert_eq!(first.answer.as_deref(), Some("Billing: invoice 7 is paid."));
    // The next prompt is only posted: the other process serves it.
    let next = Message::new("s", Role::User, MessageType::Text, "Anything else due?")
        .with_status(Status::PendingAgent);
    gateway.post(next).await.unwrap();
    let mut other = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "other_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Read to the end: the other process writes after the line too.
    let lines: Vec<String> = BufReader::new(other.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    let served = lines.iter().any(|line| line.contains(SERVED));
    assert!(other.wait().unwrap().success());
    assert!(served, "the other process did not answer the prompt");
    let history = triage.history("s").await.unwrap();
    let at = history.iter().rposition(|m| m.role == Role::User).unwrap();
    let turn = &history[at + 1..];
    // Billing answered, alone: triage made no call.
    assert_eq!(turn.len(), 1, "{turn:#?}");
    assert_eq!(turn[0].content, "Billing answers the next prompt.");
    assert_eq!(agents(turn), ["billing"]);
}
