//! Each rule of the turn, fed by hand: no store, no model, no runtime.

use kesoku_core::{Message, MessageType, OutputSchema, Role, Status, ToolRequest, keys};
use kesoku_llm::{AssistantTurn, LlmError, PROVIDER_KEY};
use serde_json::json;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::DateTime;

use super::{Decision, Finish, Machine, NUDGE, Next, Run, Setup};
use crate::agent::approval::{self, Approval, Verdict};
use crate::agent::clock::{Clock, Stamp};
use crate::agent::outcome::TurnStatus;
use crate::agent::typed;

/// The tests' setup: no prompt seq, no deadline, one retry for guardrails.
impl Setup {
    /// A turn stamped by `clock`, with no deadline for approvals.
    pub(crate) fn new(
        clock: Clock,
        answer_shape: Option<(OutputSchema, usize)>,
        max_steps: usize,
    ) -> Self {
        Setup {
            clock,
            answer_shape,
            max_steps,
            prompt_seq: 0,
            approval_wait: None,
            guard_retries: 1,
        }
    }
}

/// The `n`th stamp of a test clock: id `m<n>`, `n` seconds into 2027.
fn nth_stamp(n: i64) -> Stamp {
    Stamp {
        id: format!("m{n}"),
        at: DateTime::from_timestamp(1_800_000_000 + n, 0).expect("in range"),
    }
}

/// A test's clock: its ids are never given twice in the process.
pub(super) fn clock() -> Clock {
    static NEXT: AtomicI64 = AtomicI64::new(0);
    Clock::new(|| nth_stamp(NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// A clock of its own, counting from 0: two give the same stamps.
fn counting() -> Clock {
    let next = Arc::new(AtomicI64::new(0));
    Clock::new(move || nth_stamp(next.fetch_add(1, Ordering::Relaxed)))
}

/// No decisions: no call waits for a person.
pub(super) fn none() -> HashMap<&'static str, Verdict> {
    HashMap::new()
}

/// No tool has a use limit.
pub(super) fn no_limit(_: &str) -> Option<usize> {
    None
}

/// The policy that runs every call.
pub(super) fn allow(_: &ToolRequest) -> Approval {
    Approval::Allow
}

pub(super) fn prompt() -> Message {
    Message::new("s", Role::User, MessageType::Text, "Add 2 and 3")
        .with_sender("user")
        .with_status(Status::Processing)
}

pub(super) fn add(id: &str) -> ToolRequest {
    ToolRequest::new(id, "add", json!({"a": 2, "b": 3}))
}

pub(super) fn reply(text: &str, calls: &[&str]) -> AssistantTurn {
    AssistantTurn::new("s", "mock", text, calls.iter().map(|id| add(id)))
}

pub(super) fn result_of(call: &Message, text: &str) -> Message {
    Message::new("s", Role::Tool, MessageType::ToolResult, text)
        .with_status(Status::Responded)
        .with_parent(&call.id)
}

/// The model call asked for, after the posts.
pub(super) fn asking(d: Decision) -> (Vec<Message>, super::Ask) {
    match d.next {
        Next::Ask(ask) => (d.post, ask),
        other => panic!("expected to ask the model, got {other:?}"),
    }
}

pub(super) fn ran(d: Decision) -> (Vec<Message>, Run) {
    match d.next {
        Next::Run(run) => (d.post, run),
        other => panic!("expected to run calls, got {other:?}"),
    }
}

pub(super) fn finished(d: Decision) -> (Vec<Message>, Finish) {
    match d.next {
        Next::Finish(finish) => (d.post, finish),
        other => panic!("expected the end, got {other:?}"),
    }
}

pub(super) fn start(max_steps: usize) -> super::Ask {
    let p = prompt();
    let (post, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), max_steps),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    assert!(post.is_empty());
    ask
}

#[test]
fn a_new_prompt_asks_the_model_first() {
    let p = prompt();
    let (post, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    assert!(post.is_empty());
    assert_eq!(ask.step(), 1);
    assert_eq!(ask.0.prompt, p.id);
}

pub(super) fn prompt_id_of(ask: &super::Ask) -> String {
    ask.0.prompt.clone()
}

#[test]
fn an_answer_without_calls_completes_the_turn_and_is_posted_as_it_came() {
    let p = prompt();
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let mut turn = reply("5", &[]);
    let text = turn.text_message.as_mut().unwrap();
    text.metadata
        .insert(PROVIDER_KEY.into(), json!({"sig": "x"}));
    let id = text.id.clone();
    let (post, finish) = finished(ask.replied(turn, &allow, &no_limit));
    assert_eq!(
        finish,
        Finish::new(TurnStatus::Completed, Some("5".into()), Status::Processed)
    );
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].id, id, "the model's message, not a copy");
    assert_eq!(post[0].parent_id.as_deref(), Some(p.id.as_str()));
    assert_eq!(post[0].status, Status::Pending, "for the user to take");
    assert_eq!(post[0].metadata[PROVIDER_KEY], json!({"sig": "x"}));
}

#[test]
fn an_empty_reply_is_nudged_once_and_then_ends_the_turn_without_an_answer() {
    let ask = start(5);
    let prompt_id = prompt_id_of(&ask);
    let (post, ask) = asking(ask.replied(reply("", &[]), &allow, &no_limit));
    assert_eq!(post.len(), 1);
    let nudge = &post[0];
    assert_eq!((nudge.role, nudge.kind), (Role::System, MessageType::Text));
    assert_eq!(nudge.content, NUDGE);
    assert_eq!(nudge.status, Status::Responded);
    assert_eq!(nudge.parent_id.as_deref(), Some(prompt_id.as_str()));
    assert_eq!(ask.step(), 2, "the nudge costs a step");

    // Blank, not only empty, and not nudged twice.
    let (post, finish) = finished(ask.replied(reply(" \n", &[]), &allow, &no_limit));
    assert!(post.is_empty(), "{post:?}");
    assert_eq!(
        finish,
        Finish::new(TurnStatus::Completed, None, Status::Processed)
    );
}

#[test]
fn an_empty_reply_s_tokens_are_stored_with_its_nudge() {
    let empty = reply("", &[]).with_usage(kesoku_llm::Usage::new(900, 1));
    let (post, _) = asking(start(5).replied(empty, &allow, &no_limit));
    assert_eq!(
        kesoku_llm::Usage::of(&post[0]),
        Some(kesoku_llm::Usage::new(900, 1)),
        "the tokens it cost are counted"
    );
}

#[test]
fn a_nudge_answered_with_text_completes() {
    let (_, ask) = asking(start(5).replied(reply("", &[]), &allow, &no_limit));
    let (post, finish) = finished(ask.replied(reply("Here.", &[]), &allow, &no_limit));
    assert_eq!(post.len(), 1);
    assert_eq!(finish.answer.as_deref(), Some("Here."));
}

#[test]
fn a_reply_with_text_and_calls_posts_the_text_then_each_call_and_runs_them() {
    let ask = start(5);
    let prompt_id = prompt_id_of(&ask);
    let turn = reply("Let me add.", &["c1", "c2"]);
    let ids: Vec<String> = turn.messages().map(|m| m.id.clone()).collect();
    let (post, run) = ran(ask.replied(turn, &allow, &no_limit));
    assert_eq!(post.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(post[0].content, "Let me add.");
    for m in &post {
        assert_eq!(m.status, Status::Responded);
        assert_eq!(m.parent_id.as_deref(), Some(prompt_id.as_str()));
    }
    // Each call runs with the very message that was posted for it.
    let calls = run.calls();
    assert_eq!(calls.len(), 2);
    for ((request, message), posted) in calls.iter().zip(&post[1..]) {
        assert_eq!(message, posted);
        assert_eq!(message.meta_str(keys::CALL_ID), Some(request.id.as_str()));
    }
    assert_eq!(calls[0].0.id, "c1");
    assert_eq!(calls[1].0.id, "c2");
}

#[test]
fn empty_text_beside_calls_is_not_posted() {
    let mut turn = reply("", &["c1"]);
    // A provider that sent an empty text block along with its call.
    turn.text_message = Some(Box::new(
        Message::new("s", Role::Assistant, MessageType::Text, "").with_sender("mock"),
    ));
    let (post, run) = ran(start(5).replied(turn, &allow, &no_limit));
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].kind, MessageType::ToolCall);
    assert_eq!(run.calls().len(), 1);
}

#[test]
fn results_are_posted_in_call_order_then_the_model_is_asked_again() {
    let (_, run) = ran(start(5).replied(reply("", &["c1", "c2", "c3"]), &allow, &no_limit));
    let calls: Vec<Message> = run.calls().iter().map(|(_, m)| m.clone()).collect();
    let results: Vec<Message> = calls.iter().rev().map(|c| result_of(c, &c.id)).collect();
    let (post, ask) = asking(run.results(results));
    let answered: Vec<_> = post.iter().map(|r| r.parent_id.clone().unwrap()).collect();
    let called: Vec<_> = calls.iter().map(|c| c.id.clone()).collect();
    assert_eq!(answered, called);
    assert_eq!(ask.step(), 2);
}

#[test]
fn a_call_left_without_a_result_gets_an_error_result_and_a_stray_result_is_kept() {
    let (_, run) = ran(start(5).replied(reply("", &["c1", "c2"]), &allow, &no_limit));
    let c1 = run.calls()[0].1.clone();
    let c2 = run.calls()[1].1.clone();
    let stray = Message::new("s", Role::Tool, MessageType::ToolResult, "?").with_parent("other");
    let (post, _) = asking(run.results(vec![stray.clone(), result_of(&c1, "5")]));
    assert_eq!(post.len(), 3);
    assert_eq!(post[0].content, "5");
    assert_eq!(post[1].parent_id.as_deref(), Some(c2.id.as_str()));
    assert!(post[1].is_tool_error(), "{:?}", post[1]);
    assert_eq!(post[1].meta_str(keys::CALL_ID), Some("c2"));
    assert_eq!(post[2].id, stray.id);
}

#[test]
fn the_step_limit_ends_the_turn_after_max_steps_model_calls() {
    let mut ask = start(2);
    for step in 1..=2 {
        assert_eq!(ask.step(), step);
        let (_, run) = ran(ask.replied(reply("", &[&format!("c{step}")]), &allow, &no_limit));
        let result = result_of(&run.calls()[0].1, "5");
        let d = run.results(vec![result.clone()]);
        if step == 2 {
            let (post, finish) = finished(d);
            assert_eq!(
                finish,
                Finish::new(TurnStatus::StepLimit, None, Status::Processed)
            );
            assert_eq!(post.len(), 2, "the last results, then the note");
            assert_eq!(post[0].id, result.id);
            let note = &post[1];
            assert_eq!((note.role, note.status), (Role::Assistant, Status::Pending));
            assert_eq!(note.metadata["step_limit"], true);
            assert!(
                note.content.contains("after 2 model calls"),
                "{}",
                note.content
            );
            return;
        }
        ask = asking(d).1;
    }
    unreachable!("the second step ends the turn");
}

#[test]
fn a_nudge_at_the_last_step_reaches_the_step_limit() {
    let (post, finish) = finished(start(1).replied(reply("", &[]), &allow, &no_limit));
    assert_eq!(finish.status, TurnStatus::StepLimit);
    assert_eq!(post[0].content, NUDGE);
    assert!(post[1].metadata.contains_key("step_limit"));
}

#[test]
fn a_failed_model_call_fails_the_turn_with_a_note_naming_the_error() {
    let error = LlmError::Config {
        provider: "mock",
        message: "no key".into(),
    };
    let ask = start(5);
    let prompt_id = prompt_id_of(&ask);
    let (post, finish) = finished(ask.failed(&error));
    let mut failed = Finish::new(TurnStatus::Failed, None, Status::Error);
    failed.error = Some(error.clone());
    assert_eq!(finish, failed, "the typed cause is kept for the outcome");
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].role, Role::Assistant);
    assert_eq!(post[0].parent_id.as_deref(), Some(prompt_id.as_str()));
    assert!(post[0].content.contains("no key"), "{}", post[0].content);
    assert_eq!(post[0].metadata["error"], error.to_string());
}

#[test]
fn a_context_overflow_fails_the_turn_saying_what_to_change() {
    let error = LlmError::ContextOverflow {
        provider: "Claude",
        tokens: Some(209_353),
        limit: Some(200_000),
        message: "prompt is too long: 209353 tokens > 200000 maximum".into(),
    };
    let (post, finish) = finished(start(5).failed(&error));
    assert_eq!(finish.status, TurnStatus::Failed);
    assert_eq!(finish.error.as_ref(), Some(&error));
    let text = &post[0].content;
    assert!(
        text.contains("refused the request as longer than its context window"),
        "{text}"
    );
    assert!(
        text.contains("no more of the session could be left out"),
        "{text}"
    );
    assert!(
        text.contains("209353 tokens, over its limit of 200000"),
        "{text}"
    );
    assert!(text.contains("AgentBuilder::compaction"), "{text}");
    assert_eq!(post[0].metadata["error"], error.to_string());
}

#[test]
fn an_interruption_ends_the_turn_posting_nothing() {
    let (_, run) = ran(start(5).replied(reply("", &["c1"]), &allow, &no_limit));
    let result = result_of(&run.calls()[0].1, "5");
    let (_, ask) = asking(run.results(vec![result]));
    let (post, finish) = finished(ask.interrupted());
    assert!(post.is_empty());
    assert_eq!(
        finish,
        Finish::new(TurnStatus::Interrupted, None, Status::Interrupted)
    );
}

/// The prompt, and `after` it (each answering the prompt unless it has
/// a parent already).
pub(super) fn history(p: &Message, after: Vec<Message>) -> Vec<Message> {
    let mut h = vec![p.clone()];
    h.extend(after.into_iter().map(|m| {
        if m.parent_id.is_some() {
            m
        } else {
            m.with_parent(&p.id)
        }
    }));
    h
}

pub(super) fn assistant(text: &str) -> Message {
    Message::new("s", Role::Assistant, MessageType::Text, text)
}

#[test]
fn a_turn_found_answered_in_the_history_ends_as_it_had() {
    let p = prompt();
    let h = history(&p, vec![assistant("5")]);
    let (post, finish) = finished(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &none(),
    ));
    assert!(post.is_empty(), "nothing is posted again");
    assert_eq!(
        finish,
        Finish::new(TurnStatus::Completed, Some("5".into()), Status::Processed)
    );

    let mut failed = assistant("The model call failed");
    failed.metadata.insert("error".into(), "boom".into());
    let (_, finish) = finished(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &history(&p, vec![failed]),
        &none(),
    ));
    assert_eq!(finish, Finish::new(TurnStatus::Failed, None, Status::Error));

    let mut limit = assistant("I stopped");
    limit.metadata.insert("step_limit".into(), true.into());
    let (_, finish) = finished(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &history(&p, vec![limit]),
        &none(),
    ));
    assert_eq!(
        finish,
        Finish::new(TurnStatus::Completed, None, Status::Processed)
    );
}

#[test]
fn a_turn_whose_last_message_is_not_an_answer_goes_on() {
    let p = prompt();
    // Another prompt's answer, and this one's answered call: not an answer.
    let other = assistant("elsewhere").with_parent("another-prompt");
    let call = Message::tool_call("s", &add("c1"));
    let result = result_of(&call, "5");
    let h = history(&p, vec![other, call, result]);
    let (post, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &none(),
    ));
    assert!(post.is_empty());
    assert_eq!(ask.step(), 1);
}

#[test]
fn calls_the_history_holds_without_results_are_run_on_start() {
    let p = prompt();
    let answered = Message::tool_call("s", &add("c1")).with_parent(&p.id);
    let waiting = Message::tool_call("s", &add("c2")).with_parent(&p.id);
    let elsewhere = Message::tool_call("s", &add("c3")).with_parent("another-prompt");
    let h = history(
        &p,
        vec![
            answered.clone(),
            result_of(&answered, "5"),
            waiting.clone(),
            elsewhere,
        ],
    );
    let (post, run) = ran(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &none(),
    ));
    assert!(post.is_empty());
    assert_eq!(run.calls().len(), 1);
    let (request, message) = &run.calls()[0];
    assert_eq!(message.id, waiting.id);
    assert_eq!(*request, add("c2"), "rebuilt from the stored message");
    // Its result, then the model.
    let (post, ask) = asking(run.results(vec![result_of(&waiting, "5")]));
    assert_eq!(post.len(), 1);
    assert_eq!(ask.step(), 1);
}

#[test]
fn no_steps_at_all_is_the_step_limit_at_once() {
    let p = prompt();
    let (post, finish) = finished(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 0),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    assert_eq!(finish.status, TurnStatus::StepLimit);
    assert_eq!(post.len(), 1);
}

/// Asks for `delete`, refuses `wipe`, allows the rest.
fn careful(request: &ToolRequest) -> Approval {
    match request.name.as_str() {
        "delete" => Approval::Ask,
        "wipe" => Approval::Deny("never on Sundays".into()),
        _ => Approval::Allow,
    }
}

fn turn_with(calls: &[(&str, &str)]) -> AssistantTurn {
    AssistantTurn::new(
        "s",
        "mock",
        "",
        calls
            .iter()
            .map(|(id, name)| ToolRequest::new(*id, *name, json!({}))),
    )
}

#[test]
fn a_step_with_a_call_to_ask_about_runs_the_others_then_pauses() {
    let (post, run) = ran(start(5).replied(
        turn_with(&[("c1", "add"), ("c2", "delete"), ("c3", "wipe")]),
        &careful,
        &no_limit,
    ));
    // Every call is stored; only the one asked about is marked.
    assert_eq!(post.len(), 3);
    let marked: Vec<bool> = post.iter().map(approval::is_held).collect();
    assert_eq!(marked, [false, true, false]);
    // Only the allowed call runs.
    let names: Vec<&str> = run.calls().iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(names, ["add"]);
    let (post2, finish) = finished(run.results(vec![result_of(&post[0], "5")]));
    assert_eq!(finish.status, TurnStatus::AwaitingApproval);
    assert_eq!(finish.settle, Status::AwaitingApproval);
    // The refused call's result carries the policy's reason; the waiting
    // call has none.
    assert_eq!(post2.len(), 2);
    assert_eq!(post2[0].parent_id.as_deref(), Some(post[2].id.as_str()));
    assert!(
        post2[0].content.contains("never on Sundays"),
        "{}",
        post2[0].content
    );
    assert_eq!(post2[1].parent_id.as_deref(), Some(post[0].id.as_str()));
}

#[test]
fn a_refused_call_is_answered_and_the_turn_goes_on() {
    let (post, run) = ran(start(5).replied(turn_with(&[("c1", "wipe")]), &careful, &no_limit));
    assert!(run.calls().is_empty());
    let (post2, ask) = asking(run.results(Vec::new()));
    assert_eq!(post2.len(), 1);
    assert_eq!(post2[0].parent_id.as_deref(), Some(post[0].id.as_str()));
    assert_eq!(post2[0].metadata[keys::ERROR_KIND], "denied");
    assert_eq!(ask.step(), 2);
}

fn held_call(p: &Message, id: &str) -> Message {
    let mut m = Message::tool_call("s", &ToolRequest::new(id, "delete", json!({"n": 1})))
        .with_parent(&p.id);
    m.metadata.insert(approval::HELD.into(), "asked".into());
    m
}

#[test]
fn a_turn_taken_before_its_calls_are_decided_pauses_again() {
    let p = prompt();
    let (c1, c2) = (held_call(&p, "c1"), held_call(&p, "c2"));
    let h = history(&p, vec![c1.clone(), c2]);
    let decided = HashMap::from([(c1.id.as_str(), Verdict::Approve)]);
    let (post, finish) = finished(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &decided,
    ));
    assert!(post.is_empty());
    assert_eq!(finish.status, TurnStatus::AwaitingApproval);
}

#[test]
fn a_resumed_turn_runs_the_approved_calls_and_answers_the_denied_ones() {
    let p = prompt();
    let (c1, c2) = (held_call(&p, "c1"), held_call(&p, "c2"));
    let h = history(&p, vec![c1.clone(), c2.clone()]);
    let decided = HashMap::from([
        (c1.id.as_str(), Verdict::Approve),
        (c2.id.as_str(), Verdict::Deny(Some("keep it".into()))),
    ]);
    let (post, run) = ran(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &decided,
    ));
    assert!(post.is_empty());
    assert_eq!(run.calls().len(), 1);
    assert_eq!(run.calls()[0].1.id, c1.id);
    assert_eq!(run.calls()[0].0.arguments, json!({"n": 1}));
    let (post, ask) = asking(run.results(vec![result_of(&c1, "deleted")]));
    let parents: Vec<&str> = post.iter().filter_map(|m| m.parent_id.as_deref()).collect();
    assert_eq!(parents, [c2.id.as_str(), c1.id.as_str()]);
    assert!(
        post[0].content.contains("not approved: keep it"),
        "{}",
        post[0].content
    );
    assert_eq!(ask.step(), 1);
}

#[test]
fn a_call_past_its_tools_use_limit_is_answered_with_the_limit() {
    let two = |name: &str| (name == "add").then_some(2);
    let (post, run) = ran(start(5).replied(reply("", &["c1", "c2", "c3"]), &allow, &two));
    assert_eq!(post.len(), 3, "every call is stored");
    assert_eq!(run.calls().len(), 2);
    let results: Vec<Message> = run.calls().iter().map(|(_, m)| result_of(m, "5")).collect();
    let (post2, ask) = asking(run.results(results));
    assert_eq!(post2.len(), 3);
    assert_eq!(post2[0].parent_id.as_deref(), Some(post[2].id.as_str()));
    assert_eq!(post2[0].metadata[keys::ERROR_KIND], "limit");
    assert!(
        post2[0].content.contains("at most 2 times in one turn"),
        "{}",
        post2[0].content
    );
    // The next step counts the first's calls.
    let (_, run) = ran(ask.replied(reply("", &["c4"]), &allow, &two));
    assert!(run.calls().is_empty());
}

#[test]
fn an_approved_call_a_dead_worker_began_is_not_run_again() {
    let p = prompt();
    let mut begun = held_call(&p, "c1");
    begun.status = Status::Processing;
    let h = history(&p, vec![begun.clone()]);
    let decided = HashMap::from([(begun.id.as_str(), Verdict::Approve)]);
    let (_, run) = ran(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &decided,
    ));
    assert!(run.calls().is_empty());
    let (post, _) = asking(run.results(Vec::new()));
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].parent_id.as_deref(), Some(begun.id.as_str()));
    assert_eq!(post[0].metadata[keys::ERROR_KIND], "interrupted");
}

/// Fed the same inputs, a turn makes the same messages, byte for byte:
/// their ids and times are its clock's, not read by the machine. The
/// turn makes each kind of message of its own: a denied call's result,
/// the nudge, a call refused by the policy, a call healed after it was
/// left without a result, the step limit's note.
#[test]
fn the_same_turn_fed_the_same_makes_the_same_messages() {
    let p = prompt();
    let denied = held_call(&p, "c1");
    let h = history(&p, vec![denied.clone()]);
    let decided = HashMap::from([(denied.id.as_str(), Verdict::Deny(Some("no".into())))]);
    let (empty, calls) = (reply("", &[]), reply("", &["c2", "c3"]));
    let policy = |r: &ToolRequest| {
        if r.id == "c3" {
            Approval::Deny("not now".into())
        } else {
            Approval::Allow
        }
    };
    let turn = || {
        let mut posts = Vec::new();
        let (post, run) = ran(Machine::start(
            Setup::new(counting(), None, 2),
            &p,
            &h,
            &decided,
        ));
        posts.extend(post);
        let (post, ask) = asking(run.results(Vec::new()));
        posts.extend(post);
        let (post, ask) = asking(ask.replied(empty.clone(), &allow, &no_limit));
        posts.extend(post);
        let (post, run) = ran(ask.replied(calls.clone(), &policy, &no_limit));
        posts.extend(post);
        let (post, finish) = finished(run.results(Vec::new()));
        posts.extend(post);
        assert_eq!(finish.status, TurnStatus::StepLimit);
        posts
            .iter()
            .map(|m| serde_json::to_string(m).expect("a message serializes"))
            .collect::<Vec<_>>()
    };
    let (first, second) = (turn(), turn());
    // c1's result, the nudge, the calls, c3's and c2's results, the note.
    assert_eq!(first.len(), 7, "{first:#?}");
    assert_eq!(first, second);
    assert!(
        first.iter().any(|m| m.contains(r#""id":"m0""#)),
        "{first:#?}"
    );
}
