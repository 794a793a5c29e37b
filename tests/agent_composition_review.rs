//! A hostile review of agent composition (issue 44): each test failed
//! before its fix.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm, Team, TurnStatus};
use kesoku::{DynamicTool, Gateway, MessageType, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// A tool that needs approval, counting its runs.
fn charge(runs: &Arc<AtomicUsize>) -> ToolRegistry {
    let runs = Arc::clone(runs);
    let tool = DynamicTool::new(
        "charge",
        "Charges a card.",
        json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
        move |args, _| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::new(json!(format!("charged {}", args["cents"]))))
            }
        },
    )
    .unwrap()
    .needs_approval();
    let mut registry = ToolRegistry::new();
    registry.register(tool).unwrap();
    registry
}

fn script(turns: serde_json::Value) -> ScriptedLlm {
    ScriptedLlm::from_json(turns).unwrap().per_prompt()
}

/// Triage hands to billing (a member of its team, by name); billing
/// calls the charger as a tool, whose charge needs a person. Served by
/// triage, the charger's turn, put back by the decision, must run with
/// the charger: triage knows billing by its team, and billing's agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_a_team_member_runs_the_agents_another_member_calls() {
    let runs = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let team = Team::new();
    let charger = Agent::builder(script(json!([
        {"tool_calls": [{"id": "k1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "Charged: {{k1}}."}
    ])))
    .name("charger")
    .gateway(gateway.clone())
    .registry(charge(&runs))
    .build()
    .unwrap();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}
    ])))
    .name("triage")
    .gateway(gateway.clone())
    .team(&team)
    .handoff_to("billing", "payments")
    .build()
    .unwrap();
    // A per-prompt script counts triage's step (the handoff) too.
    let _billing = Agent::builder(script(json!([
        {"text": "(triage's step)"},
        {"tool_calls": [{"id": "c1", "name": "bill", "arguments": {"prompt": "Charge 5 dollars"}}]},
        {"text": "Billing: {{c1}}"}
    ])))
    .name("billing")
    .gateway(gateway.clone())
    .team(&team)
    .sub_agent(charger.as_tool("bill", "Bills the customer."))
    .build()
    .unwrap();
    let paused = triage.send("s", "Charge me").await.unwrap();
    assert_eq!(paused.status, TurnStatus::AwaitingApproval, "{paused:#?}");
    let pending = triage.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    triage.approve(&pending[0].id).await.unwrap();
    let serving = tokio::spawn({
        let triage = triage.clone();
        async move { triage.serve().await }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let top = loop {
        let history = triage.history("s").await.unwrap();
        if matches!(history[0].status, Status::Processed | Status::Error) {
            break history;
        }
        assert!(Instant::now() < deadline, "{history:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    serving.abort();
    let child = triage.history(&pending[0].session_id).await.unwrap();
    assert_eq!(child[0].status, Status::Processed, "{child:#?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let last = top.last().unwrap();
    assert_eq!(last.content, "Billing: Charged: charged 500.", "{top:#?}");
}

/// A handoff in a step with a call held for a person: the turn pauses,
/// and the agent that asked for the call runs it once approved; the
/// handoff must not take the paused turn to an agent without that tool.
#[tokio::test]
async fn a_handoff_beside_a_held_call_does_not_take_the_paused_turn_away() {
    let runs = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let billing = Agent::builder(script(json!([{"text": "Billing here."}])))
        .name("billing")
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [
            {"id": "k1", "name": "charge", "arguments": {"cents": 500}},
            {"id": "h1", "name": "transfer_to_billing", "arguments": {}}
        ]},
        {"text": "Triage: {{k1}}"}
    ])))
    .name("triage")
    .gateway(gateway.clone())
    .registry(charge(&runs))
    .handoff(&billing, "payments")
    .build()
    .unwrap();
    let paused = triage.send("s", "Charge me").await.unwrap();
    assert_eq!(paused.status, TurnStatus::AwaitingApproval);
    let pending = triage.pending_approvals("s").await.unwrap();
    triage.approve(&pending[0].id).await.unwrap();
    let prompt = triage.history("s").await.unwrap()[0].id.clone();
    let resumed = triage.resume(&prompt).await.unwrap();
    let history = triage.history("s").await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{history:#?}");
    let charged = history
        .iter()
        .find(|m| m.kind == MessageType::ToolResult && m.content.contains("charged 500"));
    assert!(charged.is_some(), "{history:#?}");
    assert_eq!(resumed.status, TurnStatus::Completed, "{history:#?}");
}

/// Two handoffs in one step: the first is made; the second's result must
/// not tell the model it was.
#[tokio::test]
async fn of_two_handoffs_in_a_step_only_the_one_made_says_so() {
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let billing = Agent::builder(script(json!([{"text": "-"}, {"text": "Billing here."}])))
        .name("billing")
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let support = Agent::builder(script(json!([{"text": "-"}, {"text": "Support here."}])))
        .name("support")
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [
            {"id": "h1", "name": "transfer_to_billing", "arguments": {}},
            {"id": "h2", "name": "transfer_to_support", "arguments": {}}
        ]}
    ])))
    .name("triage")
    .gateway(gateway.clone())
    .handoff(&billing, "payments")
    .handoff(&support, "anything else")
    .build()
    .unwrap();
    let outcome = triage.send("s", "Help").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Billing here."));
    let history = triage.history("s").await.unwrap();
    let transferred: Vec<_> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult && m.content.starts_with("Transferred"))
        .collect();
    assert_eq!(transferred.len(), 1, "{history:#?}");
}

/// A call of an agent whose turn waits for a turn permit (the child's
/// `max_concurrent_turns`) when the parent is interrupted: its turn,
/// which has not begun, must not run afterwards.
#[tokio::test]
async fn interrupting_the_parent_stops_a_child_turn_not_yet_begun() {
    let child = Agent::builder(
        script(json!([{"text": "child answer"}])).with_latency(Duration::from_millis(400)),
    )
    .name("child")
    .max_concurrent_turns(1)
    .build()
    .unwrap();
    let parent = Agent::builder(script(json!([
        {"tool_calls": [
            {"id": "c1", "name": "ask", "arguments": {"prompt": "one"}},
            {"id": "c2", "name": "ask", "arguments": {"prompt": "two"}}
        ]},
        {"text": "unreachable"}
    ])))
    .name("parent")
    .sub_agent(child.as_tool("ask", "Asks the child."))
    .build()
    .unwrap();
    let turn = tokio::spawn({
        let parent = parent.clone();
        async move { parent.send("s", "Ask twice").await }
    });
    // The first child's model call is under way; the second waits.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(parent.interrupt("s"));
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.status, TurnStatus::Interrupted);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let calls: Vec<_> = outcome
        .messages
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall)
        .collect();
    assert_eq!(calls.len(), 2);
    for call in calls {
        let session = format!("s/ask/{}", call.id);
        let history = child.history(&session).await.unwrap();
        if let Some(prompt) = history.first() {
            assert_ne!(prompt.status, Status::Processed, "{history:#?}");
        }
    }
}

/// A handoff in the step that reaches the step limit: the turn ends
/// there, with the agent that made it, so the handoff's result must not
/// say the conversation was handed on.
#[tokio::test]
async fn a_handoff_at_the_step_limit_is_not_answered_as_made() {
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let billing = Agent::builder(script(json!([{"text": "-"}, {"text": "Billing here."}])))
        .name("billing")
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let triage = Agent::builder(script(json!([
        {"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}
    ])))
    .name("triage")
    .gateway(gateway.clone())
    .max_steps(1)
    .handoff(&billing, "payments")
    .build()
    .unwrap();
    let outcome = triage.send("s", "Help").await.unwrap();
    let history = triage.history("s").await.unwrap();
    if outcome.status == TurnStatus::StepLimit {
        let result = history
            .iter()
            .find(|m| m.kind == MessageType::ToolResult)
            .unwrap();
        assert!(!result.content.starts_with("Transferred"), "{history:#?}");
    } else {
        // Or the agent handed to answers.
        assert_eq!(
            outcome.answer.as_deref(),
            Some("Billing here."),
            "{history:#?}"
        );
    }
}

/// The user moves on from a turn paused on an approval inside a child:
/// as for a call held in the session itself, the old turn is over
/// (interrupted), not left paused for a sweep to put back and run again
/// after the newer prompt, and its child's turn is over too.
#[tokio::test]
async fn moving_on_from_a_turn_paused_inside_a_child_ends_both() {
    let runs = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let charger = Agent::builder(script(json!([
        {"tool_calls": [{"id": "k1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "Charged: {{k1}}."}
    ])))
    .name("charger")
    .gateway(gateway.clone())
    .registry(charge(&runs))
    .build()
    .unwrap();
    // In order, whatever the prompt: the second answers the new prompt.
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "bill", "arguments": {"prompt": "Charge 5 dollars"}}]},
        {"text": "As you wish."}
    ]))
    .unwrap();
    let parent = Agent::builder(model)
        .name("parent")
        .gateway(gateway.clone())
        .sub_agent(charger.as_tool("bill", "Bills the customer."))
        .build()
        .unwrap();
    let paused = parent.send("s", "Charge me").await.unwrap();
    assert_eq!(paused.status, TurnStatus::AwaitingApproval);
    let pending = parent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1);
    // The user moves on (the scripts answer the new prompt at once).
    let next = parent.send("s", "Never mind").await.unwrap();
    assert_eq!(next.status, TurnStatus::Completed, "{next:#?}");
    parent.expire_approvals().await.unwrap();
    let history = parent.history("s").await.unwrap();
    assert_eq!(history[0].status, Status::Interrupted, "{history:#?}");
    assert!(parent.pending_approvals("s").await.unwrap().is_empty());
    let child = parent.history(&pending[0].session_id).await.unwrap();
    assert_ne!(child[0].status, Status::AwaitingApproval, "{child:#?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Two members of a team each calling an agent of one name (the default
/// `kesoku`, say): a member serving could not tell their nested prompts
/// apart, and would run one's with the other, so building is refused.
#[test]
fn two_members_calling_agents_of_one_name_are_refused() {
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let team = Team::new();
    let helper = |text: &str| {
        Agent::builder(script(json!([{ "text": text }])))
            .gateway(gateway.clone())
            .build()
            .unwrap()
    };
    let _triage = Agent::builder(script(json!([{"text": "-"}])))
        .name("triage")
        .gateway(gateway.clone())
        .team(&team)
        .sub_agent(helper("one").as_tool("ask", "Asks."))
        .build()
        .unwrap();
    let billing = Agent::builder(script(json!([{"text": "-"}])))
        .name("billing")
        .gateway(gateway.clone())
        .team(&team)
        .sub_agent(helper("two").as_tool("ask", "Asks."))
        .build();
    let Err(error) = billing else {
        panic!("two agents named `kesoku` were let in");
    };
    let error = error.to_string();
    assert!(error.contains("two agents are named `kesoku`"), "{error}");
}

/// A front end acting for a session decides its calls with `decide_in`:
/// `pending_approvals` lists a call inside an agent the session's turn
/// called, so `decide_in` with that session must take it; another
/// session's must not.
#[tokio::test]
async fn decide_in_takes_a_call_inside_an_agent_the_session_called() {
    let runs = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let charger = Agent::builder(script(json!([
        {"tool_calls": [{"id": "k1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "Charged: {{k1}}."}
    ])))
    .name("charger")
    .gateway(gateway.clone())
    .registry(charge(&runs))
    .build()
    .unwrap();
    let parent = Agent::builder(script(json!([
        {"tool_calls": [{"id": "c1", "name": "bill", "arguments": {"prompt": "Charge 5 dollars"}}]},
        {"text": "Done: {{c1}}"}
    ])))
    .name("parent")
    .gateway(gateway.clone())
    .sub_agent(charger.as_tool("bill", "Bills the customer."))
    .build()
    .unwrap();
    parent.send("s", "Charge me").await.unwrap();
    let pending = parent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1);
    let other = parent
        .decide_in("other", &pending[0].id, kesoku::llm::Verdict::Approve)
        .await;
    assert!(other.is_err(), "{other:?}");
    let decided = parent
        .decide_in("s", &pending[0].id, kesoku::llm::Verdict::Approve)
        .await
        .unwrap();
    let top = parent.history("s").await.unwrap()[0].id.clone();
    assert_eq!(
        decided,
        kesoku::llm::Decided::Ready {
            prompt_id: top.clone()
        }
    );
    let resumed = parent.resume_in("s", &top).await.unwrap();
    assert_eq!(
        resumed.answer.as_deref(),
        Some("Done: Charged: charged 500.")
    );
}

#[derive(Debug, PartialEq, serde::Deserialize, kesoku::ToolArg)]
struct Count {
    /// A number.
    n: i64,
}

/// An agent called as a tool hands its session off: the agent handed to
/// answers the call; and a typed answer (`send_as`) asked of a turn that
/// is handed off is the answer of the agent handed to.
#[tokio::test]
async fn a_handoff_inside_a_child_and_under_send_as_answers_as_asked() {
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let expert = Agent::builder(script(json!([{"text": "-"}, {"text": "{\"n\": 7}"}])))
        .name("expert")
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let router = Agent::builder(script(json!([
        {"tool_calls": [{"id": "h1", "name": "transfer_to_expert", "arguments": {}}]}
    ])))
    .name("router")
    .gateway(gateway.clone())
    .handoff(&expert, "knows numbers")
    .build()
    .unwrap();
    let parent = Agent::builder(script(json!([
        {"tool_calls": [{"id": "c1", "name": "route", "arguments": {"prompt": "a number"}}]},
        {"text": "Got {{c1}}"}
    ])))
    .name("parent")
    .gateway(gateway.clone())
    .sub_agent(router.as_tool("route", "Routes.").output::<Count>())
    .build()
    .unwrap();
    let outcome = parent.send("s", "Give me a number").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed, "{outcome:#?}");
    assert!(outcome.messages[1].content.contains('7'), "{outcome:#?}");
    let typed = router.send_as::<Count>("t", "a number").await.unwrap();
    assert_eq!(typed.value, Count { n: 7 });
}

/// Known, not fixed: an agent with one turn permit reached twice down one
/// chain of calls (A calls B, which hands its session to A, which calls
/// B again) waits for its own permit, held up the chain, until the call
/// times out (30 minutes by default; 3 s here).
#[tokio::test]
#[ignore = "known deadlock: a recursive agent call waits for a permit held up its chain"]
async fn recursion_through_a_handoff_with_one_permit_does_not_wait_for_itself() {
    let gateway = Gateway::new(kesoku::store::MemoryStore::new());
    let team = Team::new();
    let b = Agent::builder(
        ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "h1", "name": "transfer_to_a", "arguments": {}}]},
            {"text": "b inner"}
        ]))
        .unwrap(),
    )
    .name("b")
    .gateway(gateway.clone())
    .team(&team)
    .max_concurrent_turns(1)
    .handoff_to("a", "a")
    .build()
    .unwrap();
    let a = Agent::builder(
        ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "c1", "name": "ask_b", "arguments": {"prompt": "x"}}]},
            {"tool_calls": [{"id": "c2", "name": "ask_b", "arguments": {"prompt": "y"}}]},
            {"text": "a inner"},
            {"text": "a outer"}
        ]))
        .unwrap(),
    )
    .name("a")
    .gateway(gateway.clone())
    .team(&team)
    .sub_agent(b.as_tool("ask_b", "B.").timeout(Duration::from_secs(3)))
    .build()
    .unwrap();
    let started = Instant::now();
    let outcome = a.send("s", "go").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "{outcome:#?}");
}
