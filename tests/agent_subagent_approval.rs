//! A call that needs a person's approval inside an agent called as a
//! tool pauses the child and the parent; the parent's pending approvals
//! list it with its path; deciding it resumes the child, then the parent.
//! Two children paused at once, decided in the opposite order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kesoku::llm::{Agent, Decided, ScriptedLlm, TurnStatus};
use kesoku::{DynamicTool, MessageType, Status, ToolOutput, ToolRegistry};
use serde_json::json;

/// A tool that needs approval, counting its runs.
fn charge(runs: Arc<AtomicUsize>) -> ToolRegistry {
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

fn billing(runs: Arc<AtomicUsize>) -> Agent {
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "k1", "name": "charge", "arguments": {"cents": 500}}]},
        {"text": "Charged: {{k1}}."}
    ]))
    .unwrap();
    Agent::builder(model)
        .name("billing")
        .registry(charge(runs))
        .build()
        .unwrap()
}

#[tokio::test]
async fn an_approval_inside_a_child_pauses_both_and_its_decision_resumes_both() {
    let runs = Arc::new(AtomicUsize::new(0));
    let child = billing(Arc::clone(&runs));
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "bill", "arguments": {"prompt": "Charge 5 dollars"}}]},
        {"text": "Done: {{c1}}"}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .sub_agent(child.as_tool("bill", "Bills the customer."))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Bill me").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
    // The parent's call stays open: no result was stored for it.
    let history = agent.history("s").await.unwrap();
    assert!(history.iter().all(|m| m.kind != MessageType::ToolResult));
    assert_eq!(history[0].status, Status::AwaitingApproval);
    let pending = agent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    let call = &pending[0];
    assert_eq!(call.tool, "charge");
    assert_eq!(call.path.len(), 1);
    assert_eq!(call.path[0].tool, "bill");
    assert_eq!(call.path[0].call_id, history[1].id);
    assert_eq!(call.session_id, call.path[0].session_id);
    // The parent's outcome lists it too, as `send` returned it.
    assert_eq!(outcome.pending_approvals(), pending);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let decided = agent.approve(&call.id).await.unwrap();
    // The top prompt is what resumes them all.
    assert_eq!(
        decided,
        Decided::Ready {
            prompt_id: history[0].id.clone()
        }
    );
    let resumed = agent.resume(&history[0].id).await.unwrap();
    assert_eq!(resumed.status, TurnStatus::Completed);
    assert_eq!(
        resumed.answer.as_deref(),
        Some("Done: Charged: charged 500.")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(agent.pending_approvals("s").await.unwrap().is_empty());
    // One result answers the parent's call.
    let history = agent.history("s").await.unwrap();
    let results: Vec<_> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].parent_id.as_deref(),
        Some(history[1].id.as_str())
    );
}

#[tokio::test]
async fn two_children_paused_at_once_are_decided_in_the_opposite_order() {
    let runs = Arc::new(AtomicUsize::new(0));
    let child = billing(Arc::clone(&runs));
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [
            {"id": "c1", "name": "bill", "arguments": {"prompt": "Charge Ann"}},
            {"id": "c2", "name": "bill", "arguments": {"prompt": "Charge Bob"}}
        ]},
        {"text": "Ann: {{c1}} Bob: {{c2}}"}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .sub_agent(child.as_tool("bill", "Bills a customer."))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Bill both").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
    let prompt = agent.history("s").await.unwrap()[0].id.clone();
    let pending = agent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 2, "{pending:#?}");
    assert_ne!(pending[0].path[0].session_id, pending[1].path[0].session_id);
    // The second first: the top turn still waits for the first.
    let decided = agent.approve(&pending[1].id).await.unwrap();
    assert_eq!(
        decided,
        Decided::Waiting {
            prompt_id: prompt.clone(),
            undecided: 1
        }
    );
    let left = agent.pending_approvals("s").await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].id, pending[0].id);
    let decided = agent.deny(&pending[0].id, Some("not Ann")).await.unwrap();
    assert_eq!(
        decided,
        Decided::Ready {
            prompt_id: prompt.clone()
        }
    );
    let resumed = agent.resume(&prompt).await.unwrap();
    assert_eq!(resumed.status, TurnStatus::Completed);
    // Bob's charge ran once; Ann's was denied, and her child says so.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let answer = resumed.answer.unwrap();
    assert!(answer.contains("Bob: Charged: charged 500."), "{answer}");
    assert!(answer.contains("not Ann"), "{answer}");
}
