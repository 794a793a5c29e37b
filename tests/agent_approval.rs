//! A person in the loop, on a `SQLite` file: a turn pauses on a call that
//! needs approval, the process that asked goes away, and another one
//! decides and resumes it; a denial's reason reaches the model; a second
//! decision, an unknown id and a newer prompt are each handled once.

#[path = "support/recorder.rs"]
mod recorder;
use recorder::{Recorder, Seen};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

// Beside `Agent` in `kesoku::llm`, as users' code names them.
use kesoku::llm::{
    Agent, AgentBuilder, Approval, ApprovalError, Decided, ResumeError, ScriptedLlm, TurnStatus,
    Verdict,
};
use kesoku::store::{MessageLog, SqliteStore, Store};
use kesoku::{DynamicTool, Message, MessageType, Status, ToolOutput, ToolRegistry, keys};
use serde_json::json;

/// `delete_note`, which needs a person's yes, counting its runs; `list`,
/// which does not.
fn registry(runs: &Arc<AtomicUsize>) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    let counter = Arc::clone(runs);
    let delete = DynamicTool::new(
        "delete_note",
        "Deletes a note.",
        json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        move |args, _| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::new(json!(format!("deleted {}", args["title"].as_str().unwrap()))))
            }
        },
    )
    .unwrap()
    .needs_approval();
    tools.register(delete).unwrap();
    let list = DynamicTool::new(
        "list",
        "Lists the notes.",
        json!({"type": "object", "properties": {}}),
        |_, _| async move { Ok(ToolOutput::new(json!(["a", "b"]))) },
    )
    .unwrap();
    tools.register(list).unwrap();
    tools
}

/// An agent on `store` with `script`; what its model was sent.
fn agent(
    store: &Arc<dyn Store>,
    runs: &Arc<AtomicUsize>,
    script: serde_json::Value,
) -> (Agent, Seen) {
    agent_with(store, runs, script, |b| b)
}

/// [`agent`], its builder changed by `tweak`.
fn agent_with(
    store: &Arc<dyn Store>,
    runs: &Arc<AtomicUsize>,
    script: serde_json::Value,
    tweak: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> (Agent, Seen) {
    let seen = Arc::default();
    let model = Recorder::new(ScriptedLlm::from_json(script).unwrap(), &seen, |m| {
        m.content.clone()
    });
    let builder = Agent::builder(model)
        .registry(registry(runs))
        .store(Arc::clone(store));
    (tweak(builder).build().unwrap(), seen)
}

fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(dir.path().join("approval.sqlite")).unwrap())
}

/// The model's first reply: list the notes and delete one.
fn asks_to_delete() -> serde_json::Value {
    json!({"tool_calls": [
        {"id": "c1", "name": "list", "arguments": {}},
        {"id": "c2", "name": "delete_note", "arguments": {"title": "groceries"}}
    ]})
}

#[tokio::test]
async fn a_paused_turn_is_approved_and_resumed_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let prompt_id;
    let waiting_id;
    {
        let store = open(&dir);
        let (agent, _) = agent(&store, &runs, json!([asks_to_delete()]));
        let outcome = agent.send("s", "Delete my groceries note").await.unwrap();
        assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
        let pending = outcome.pending_approvals();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].tool, "delete_note");
        assert_eq!(pending[0].call_id, "c2");
        assert_eq!(pending[0].arguments, json!({"title": "groceries"}));
        // The call that needs no yes ran; the other did not.
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        let listed = outcome
            .messages
            .iter()
            .filter(|m| m.kind == MessageType::ToolResult)
            .count();
        assert_eq!(listed, 1, "the list call's result only");
        prompt_id = pending[0].prompt_id.clone();
        waiting_id = pending[0].id.clone();
        let prompt = store.get(&prompt_id).await.unwrap().unwrap();
        assert_eq!(prompt.status, Status::AwaitingApproval);
        // The session's lease is free: another worker may take the session.
        assert!(
            store
                .lease("s", "someone-else", std::time::Duration::from_secs(1))
                .await
                .unwrap()
        );
        assert!(store.release("s", "someone-else").await.unwrap());
    }
    // A new process: the same waiting call, approved, and the turn resumed.
    let store = open(&dir);
    let (agent, seen) = agent(&store, &runs, json!([{"text": "Done: {{c2}}"}]));
    let pending = agent.pending_approvals("s").await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, waiting_id);
    assert!(
        agent.approve(&waiting_id).await.unwrap().is_ready(),
        "the last decision puts it back"
    );
    let outcome = agent.resume(&prompt_id).await.expect("the turn ran here");
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Done: deleted groceries"));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the approved call ran once");
    // The model saw each call answered, and no decision message.
    let sent = seen.lock().unwrap().concat();
    assert!(
        sent.iter().any(|t| t.contains("deleted groceries")),
        "{sent:?}"
    );
    assert!(!sent.iter().any(|t| t == "approved"), "{sent:?}");
    assert_eq!(
        store.get(&prompt_id).await.unwrap().unwrap().status,
        Status::Processed
    );
    assert!(agent.pending_approvals("s").await.unwrap().is_empty());
    // Deciding again: answered already.
    assert!(matches!(
        agent.approve(&waiting_id).await,
        Err(ApprovalError::AlreadyDecided { approved: true, .. })
    ));
}

#[tokio::test]
async fn a_denial_reason_reaches_the_model_and_the_tool_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, seen) = agent(
        &store,
        &runs,
        json!([asks_to_delete(), {"text": "Kept it."}]),
    );
    let outcome = agent.send("s", "Delete my groceries note").await.unwrap();
    let pending = outcome.pending_approvals();
    assert!(
        agent
            .deny(&pending[0].id, Some("I still need that list"))
            .await
            .unwrap()
            .is_ready()
    );
    // A second decision, an unknown id and a message that is no waiting
    // call are refused, and change nothing.
    assert!(matches!(
        agent.approve(&pending[0].id).await,
        Err(ApprovalError::AlreadyDecided {
            approved: false,
            ..
        })
    ));
    assert!(matches!(
        agent.approve("no-such-id").await,
        Err(ApprovalError::Unknown { .. })
    ));
    let err = agent.approve(&pending[0].prompt_id).await.unwrap_err();
    assert!(matches!(err, ApprovalError::NotWaiting { .. }), "{err}");
    assert!(err.to_string().contains(&pending[0].prompt_id));
    let outcome = agent.resume(&pending[0].prompt_id).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Kept it."));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let last_request = seen.lock().unwrap().last().unwrap().clone();
    assert!(
        last_request
            .iter()
            .any(|t| t.contains("not approved: I still need that list")),
        "{last_request:?}"
    );
    // The call has exactly one result.
    let history = store.history("s").await.unwrap();
    let results = history
        .iter()
        .filter(|m| m.parent_id.as_deref() == Some(pending[0].id.as_str()))
        .filter(|m| m.kind == MessageType::ToolResult)
        .count();
    assert_eq!(results, 1);
}

#[tokio::test]
async fn a_newer_prompt_answers_the_waiting_calls_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, seen) = agent(
        &store,
        &runs,
        json!([asks_to_delete(), {"text": "Sure, what next?"}]),
    );
    let first = agent.send("s", "Delete my groceries note").await.unwrap();
    let pending = first.pending_approvals();
    let outcome = agent.send("s", "Never mind, something else").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let sent = seen.lock().unwrap().last().unwrap().clone();
    assert!(
        sent.iter().any(|t| t.contains("the user moved on")),
        "{sent:?}"
    );
    let old = store.get(&pending[0].prompt_id).await.unwrap().unwrap();
    assert_eq!(old.status, Status::Interrupted);
    // Too late to decide: the call is answered.
    let err = agent.approve(&pending[0].id).await.unwrap_err();
    assert!(matches!(err, ApprovalError::Answered { .. }), "{err}");
    assert!(agent.pending_approvals("s").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_policy_asks_for_destructive_tools_and_refuses_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut tools = ToolRegistry::new();
    let drop_table = DynamicTool::new(
        "drop_table",
        "Drops a table.",
        json!({"type": "object", "properties": {}}),
        |_, _| async move { Ok(ToolOutput::new(json!("dropped"))) },
    )
    .unwrap()
    .with_hints(kesoku::ToolHints::new().with_destructive(true));
    tools.register(drop_table).unwrap();
    let model = || {
        ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "c1", "name": "drop_table", "arguments": {}}]},
            {"tool_calls": [{"id": "c2", "name": "drop_table", "arguments": {}}]},
            {"text": "Could not."}
        ]))
        .unwrap()
    };
    let asking = Agent::builder(model())
        .registry(tools.clone())
        .store(Arc::clone(&store))
        .approval(|check| {
            if check.hints.destructive == Some(true) {
                Approval::Ask
            } else {
                Approval::Allow
            }
        })
        .build()
        .unwrap();
    let outcome = asking.send("a", "Drop it").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::AwaitingApproval);
    assert_eq!(outcome.pending_approvals()[0].tool, "drop_table");
    let refusing = Agent::builder(model())
        .registry(tools)
        .store(store)
        .approval(|check| {
            if check.request.name == "drop_table" {
                Approval::Deny("tables are never dropped here".into())
            } else {
                Approval::Allow
            }
        })
        .build()
        .unwrap();
    let outcome = refusing.send("b", "Drop it").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let refused: Vec<&Message> = outcome
        .messages
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .collect();
    assert_eq!(refused.len(), 2);
    assert!(refused[0].content.contains("tables are never dropped here"));
    assert_eq!(refused[0].metadata[keys::ERROR_KIND], "denied");
}

#[tokio::test]
async fn a_call_past_its_deadline_is_denied_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, seen) = agent_with(
        &store,
        &runs,
        json!([asks_to_delete(), {"text": "Nobody answered."}, asks_to_delete(), {"text": "Late."}]),
        |b| b.approval_deadline(std::time::Duration::from_millis(50)),
    );
    let first = agent.send("a", "Delete my groceries note").await.unwrap();
    let second = agent.send("b", "Delete my groceries note").await.unwrap();
    assert_eq!(agent.expire_approvals().await.unwrap(), 0, "not yet");
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    // A decision after the deadline is refused: the call is denied.
    let late = &second.pending_approvals()[0];
    assert!(matches!(
        agent.approve(&late.id).await,
        Err(ApprovalError::Expired { .. })
    ));
    // The other, by the sweep.
    assert_eq!(agent.expire_approvals().await.unwrap(), 1);
    assert_eq!(agent.expire_approvals().await.unwrap(), 0, "once");
    let prompt = &first.pending_approvals()[0].prompt_id;
    let outcome = agent.resume(prompt).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let sent = seen.lock().unwrap().last().unwrap().clone();
    assert!(
        sent.iter().any(|t| t.contains("approval deadline")),
        "{sent:?}"
    );
    let outcome = agent.resume(&late.prompt_id).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran unapproved");
}

#[tokio::test]
async fn a_serving_worker_resumes_a_turn_another_process_decided() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (front, _) = agent(&store, &runs, json!([asks_to_delete()]));
    let outcome = front.send("s", "Delete my groceries note").await.unwrap();
    let waiting = outcome.pending_approvals().remove(0);
    // A worker in another process (its own store handle on the file).
    let other = open(&dir);
    let (worker, _) = agent_with(&other, &runs, json!([{"text": "Done: {{c2}}"}]), |b| {
        b.lease(std::time::Duration::from_millis(500))
    });
    let serving = tokio::spawn(async move { worker.serve().await });
    assert!(front.approve(&waiting.id).await.unwrap().is_ready());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let prompt = store.get(&waiting.prompt_id).await.unwrap().unwrap();
        if prompt.status == Status::Processed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {:?}",
            prompt.status
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    serving.abort();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let history = store.history("s").await.unwrap();
    assert_eq!(history.last().unwrap().content, "Done: deleted groceries");
}

/// A worker that began an approved call and died left it `processing`:
/// the turn resumed elsewhere answers it as interrupted, and never runs it
/// a second time.
#[tokio::test]
async fn an_approved_call_begun_by_a_dead_worker_is_not_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, seen) = agent(
        &store,
        &runs,
        json!([asks_to_delete(), {"text": "Maybe: {{c2}}"}]),
    );
    let outcome = agent.send("s", "Delete my groceries note").await.unwrap();
    let waiting = outcome.pending_approvals().remove(0);
    assert!(agent.approve(&waiting.id).await.unwrap().is_ready());
    // As the dying worker's mark: the call begun, no result.
    assert!(
        store
            .transition(&waiting.id, &[Status::Responded], Status::Processing)
            .await
            .unwrap()
    );
    // Start-up recovery puts prompts back, not this mark.
    agent.recover().await.unwrap();
    let call = store.get(&waiting.id).await.unwrap().unwrap();
    assert_eq!(call.status, Status::Processing);
    let outcome = agent.resume(&waiting.prompt_id).await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "run again");
    let answer = outcome.answer.unwrap();
    assert!(answer.contains("interrupted"), "{answer}");
    drop(seen);
}

/// An approved call is marked begun in the store before it runs (the
/// tool itself reads the mark), and settled once its result is stored.
#[tokio::test]
async fn an_approved_call_is_marked_begun_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let seen_status = Arc::new(Mutex::new(None));
    let (reader, seen) = (Arc::clone(&store), Arc::clone(&seen_status));
    let mut tools = ToolRegistry::new();
    let delete = DynamicTool::new(
        "delete_note",
        "Deletes a note.",
        json!({"type": "object", "properties": {"title": {"type": "string"}}}),
        move |_, _| {
            let (reader, seen) = (Arc::clone(&reader), Arc::clone(&seen));
            async move {
                let history = reader.history("s").await.unwrap();
                let call = history
                    .iter()
                    .find(|m| m.kind == MessageType::ToolCall)
                    .unwrap();
                *seen.lock().unwrap() = Some(call.status);
                Ok(ToolOutput::new(json!("deleted")))
            }
        },
    )
    .unwrap()
    .needs_approval();
    tools.register(delete).unwrap();
    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "delete_note", "arguments": {"title": "x"}}]},
        {"text": "{{c1}}"}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .registry(tools)
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Delete x").await.unwrap();
    let waiting = outcome.pending_approvals().remove(0);
    // A front end showed it: marked `delivered`, as the demo does.
    assert!(
        store
            .transition(&waiting.id, &[Status::Responded], Status::Delivered)
            .await
            .unwrap()
    );
    agent.approve(&waiting.id).await.unwrap();
    let outcome = agent.resume(&waiting.prompt_id).await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("deleted"));
    assert_eq!(
        *seen_status.lock().unwrap(),
        Some(Status::Processing),
        "marked before it ran"
    );
    let call = store.get(&waiting.id).await.unwrap().unwrap();
    assert_eq!(call.status, Status::Responded, "settled with its result");
}

/// A decision stored while putting its turn back failed (the store went
/// away between the two writes): the next sweep of any serving agent puts
/// it back.
#[tokio::test]
async fn a_sweep_puts_back_a_turn_whose_decider_could_not() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, _) = agent(&store, &runs, json!([asks_to_delete(), {"text": "{{c2}}"}]));
    let outcome = agent.send("s", "Delete my groceries note").await.unwrap();
    let waiting = outcome.pending_approvals().remove(0);
    assert!(agent.approve(&waiting.id).await.unwrap().is_ready());
    // As if the put-back had not happened.
    assert!(
        store
            .transition(
                &waiting.prompt_id,
                &[Status::PendingAgent],
                Status::AwaitingApproval
            )
            .await
            .unwrap()
    );
    assert_eq!(agent.expire_approvals().await.unwrap(), 0, "nothing denied");
    assert_eq!(
        store.get(&waiting.prompt_id).await.unwrap().unwrap().status,
        Status::PendingAgent,
        "the sweep put it back"
    );
    let outcome = agent.resume(&waiting.prompt_id).await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("deleted groceries"));
}

/// Item 1 of issue 42: a pause decided, then a newer prompt before any
/// resume. The newer turn answers the call as decided, and the old turn
/// never runs (no late answer after the newer one).
#[tokio::test]
async fn a_decided_pause_is_not_resumed_after_a_newer_prompt() {
    for (verdict, expected) in [
        (
            Verdict::Approve,
            "was approved, but did not run: the user moved on",
        ),
        (
            Verdict::Deny(Some("I still need it".into())),
            "not approved: I still need it",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let store = open(&dir);
        let (agent, seen) = agent(
            &store,
            &runs,
            json!([asks_to_delete(), {"text": "Sure, what next?"}, {"text": "A late answer."}]),
        );
        let first = agent.send("s", "Delete my groceries note").await.unwrap();
        let waiting = first.pending_approvals().remove(0);
        let decided = agent
            .decide_in("s", &waiting.id, verdict.clone())
            .await
            .unwrap();
        assert_eq!(
            decided,
            Decided::Ready {
                prompt_id: waiting.prompt_id.clone()
            }
        );
        let newer = agent.send("s", "Never mind, something else").await.unwrap();
        assert_eq!(newer.answer.as_deref(), Some("Sure, what next?"));
        let sent = seen.lock().unwrap().last().unwrap().clone();
        assert!(sent.iter().any(|t| t.contains(expected)), "{sent:?}");
        let old = store.get(&waiting.prompt_id).await.unwrap().unwrap();
        assert_eq!(old.status, Status::Interrupted, "{verdict:?}");
        let err = agent.resume(&waiting.prompt_id).await.unwrap_err();
        assert_eq!(
            err,
            ResumeError::NotWaiting {
                prompt: waiting.prompt_id.clone(),
                status: Status::Interrupted
            }
        );
        assert_eq!(seen.lock().unwrap().len(), 2, "the old turn never ran");
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        let history = store.history("s").await.unwrap();
        let results = history
            .iter()
            .filter(|m| m.kind == MessageType::ToolResult)
            .filter(|m| m.parent_id.as_deref() == Some(waiting.id.as_str()))
            .count();
        assert_eq!(results, 1, "one result for the call");
        assert_eq!(
            history.last().unwrap().content,
            "Sure, what next?",
            "nothing after the newer answer"
        );
    }
}

/// Item 2 of issue 42: each answer says what it means.
#[tokio::test]
async fn decisions_and_resumes_say_what_they_mean() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let two = json!({"tool_calls": [
        {"id": "c1", "name": "delete_note", "arguments": {"title": "a"}},
        {"id": "c2", "name": "delete_note", "arguments": {"title": "b"}}
    ]});
    let (agent, _) = agent_with(&store, &runs, json!([two, {"text": "Done."}]), |b| {
        b.approval_deadline(std::time::Duration::from_secs(3600))
    });
    let outcome = agent.send("s", "Delete a and b").await.unwrap();
    let pending = agent.pending_approvals("s").await.unwrap();
    assert_eq!(pending, outcome.pending_approvals());
    assert_eq!(pending.len(), 2);
    let deadline = pending[0].deadline.expect("a deadline");
    assert!(deadline > chrono::Utc::now() + chrono::Duration::minutes(59));
    let prompt = pending[0].prompt_id.clone();

    // Another session's call is refused as an unknown one is, and
    // nothing is stored.
    let foreign = agent.approve_in("other", &pending[0].id).await.unwrap_err();
    assert_eq!(
        foreign.to_string(),
        format!("session `other` has no tool call `{}`", pending[0].id)
    );
    let unknown = agent.approve_in("other", "nope").await.unwrap_err();
    assert!(matches!(unknown, ApprovalError::NotInSession { .. }));
    assert_eq!(agent.pending_approvals("s").await.unwrap().len(), 2);

    // Resuming: an unknown prompt, one still undecided.
    assert!(matches!(
        agent.resume("no-such-prompt").await,
        Err(ResumeError::Unknown { .. })
    ));
    assert!(matches!(
        agent.resume_in("other", &prompt).await,
        Err(ResumeError::Unknown { .. })
    ));
    assert_eq!(
        agent.resume(&prompt).await.unwrap_err(),
        ResumeError::Undecided {
            prompt: prompt.clone(),
            undecided: 2
        }
    );

    // The first decision leaves one waiting; the second makes it ready.
    assert_eq!(
        agent.approve_in("s", &pending[0].id).await.unwrap(),
        Decided::Waiting {
            prompt_id: prompt.clone(),
            undecided: 1
        }
    );
    let decided = agent
        .deny_in("s", &pending[1].id, Some("keep b"))
        .await
        .unwrap();
    assert!(decided.is_ready());
    assert_eq!(decided.prompt_id(), prompt);
    let done = agent.resume_in("s", &prompt).await.unwrap();
    assert_eq!(done.answer.as_deref(), Some("Done."));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Done: not waiting any more.
    assert_eq!(
        agent.resume(&prompt).await.unwrap_err(),
        ResumeError::NotWaiting {
            prompt,
            status: Status::Processed
        }
    );
}

/// Item 2 of issue 42: a call past its deadline is no longer listed as
/// waiting (it cannot be approved), even before a sweep.
#[tokio::test]
async fn a_call_past_its_deadline_is_not_listed_as_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let store = open(&dir);
    let (agent, _) = agent_with(&store, &runs, json!([asks_to_delete()]), |b| {
        b.approval_deadline(std::time::Duration::from_millis(1))
    });
    let outcome = agent.send("s", "Delete my groceries note").await.unwrap();
    assert_eq!(outcome.pending_approvals().len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(agent.pending_approvals("s").await.unwrap().is_empty());
    assert_eq!(agent.expire_approvals().await.unwrap(), 1);
}
