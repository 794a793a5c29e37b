//! The machine's rules for a typed prompt's answer: kept and repaired
//! while tries and steps last, counted from the history.

use kesoku_core::{Message, MessageType, Role, Status, keys};
use serde_json::json;

use super::tests::{
    allow, asking, assistant, clock, finished, history, no_limit, none, prompt, reply,
};
use super::{Finish, Machine, Setup};
use crate::agent::outcome::TurnStatus;
use crate::agent::typed;

/// A prompt asking for `{"total": <integer>}`, with `repairs` more tries.
fn typed_prompt(repairs: usize) -> Message {
    let output = kesoku_core::OutputSchema::new(
        "Sum",
        json!({"type": "object", "properties": {"total": {"type": "integer", "description": "The sum."}},
               "required": ["total"], "additionalProperties": false}),
    )
    .unwrap();
    let mut p = prompt();
    crate::agent::typed::ask_for(&mut p, &output, repairs);
    p
}

#[test]
fn a_typed_answer_that_does_not_fit_is_kept_and_the_model_told_why_while_tries_last() {
    let p = typed_prompt(1);
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, ask) = asking(ask.replied(reply(r#"{"total": "five"}"#, &[]), &allow, &no_limit));
    assert_eq!(ask.step(), 2);
    assert_eq!(post.len(), 2);
    // The model's answer is kept, answered (not left for the user), and
    // marked as sent back.
    assert_eq!(post[0].content, r#"{"total": "five"}"#);
    assert_eq!(post[0].status, Status::Responded);
    assert!(post[0].metadata.contains_key(crate::agent::typed::REJECTED));
    // The feedback names the path, and reads as the user's turn.
    assert_eq!(
        (post[1].role, post[1].kind),
        (Role::System, MessageType::Text)
    );
    assert!(post[1].metadata.contains_key(keys::FEEDBACK));
    assert!(post[1].content.contains("`total`"), "{}", post[1].content);
    assert_eq!(post[1].parent_id.as_deref(), Some(p.id.as_str()));

    // No tries left: the next answer ends the turn whatever it is.
    let (post, finish) = finished(ask.replied(reply("still wrong", &[]), &allow, &no_limit));
    assert_eq!(post[0].status, Status::Pending);
    assert_eq!(
        finish,
        Finish::new(
            TurnStatus::Completed,
            Some("still wrong".into()),
            Status::Processed
        )
    );
}

#[test]
fn a_typed_answer_that_fits_ends_the_turn() {
    let p = typed_prompt(1);
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, finish) = finished(ask.replied(reply(r#"{"total": 5}"#, &[]), &allow, &no_limit));
    assert_eq!(post.len(), 1);
    assert_eq!(finish.answer.as_deref(), Some(r#"{"total": 5}"#));
}

#[test]
fn tries_already_used_are_counted_from_the_history_on_a_restart() {
    let p = typed_prompt(1);
    // Another worker got a wrong answer and gave feedback, then stopped.
    let mut note = Message::new("s", Role::System, MessageType::Text, "`total` is required")
        .with_status(Status::Responded);
    note.metadata.insert(keys::FEEDBACK.into(), true.into());
    let h = history(
        &p,
        vec![assistant("{}").with_status(Status::Responded), note],
    );
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &none(),
    ));
    let (_, finish) = finished(ask.replied(reply("{}", &[]), &allow, &no_limit));
    assert_eq!(finish.status, TurnStatus::Completed);
}

#[test]
fn a_rejected_answer_left_without_its_feedback_is_not_the_answer() {
    let p = typed_prompt(1);
    // The worker stored the rejected answer and stopped before the note.
    let mut rejected = assistant(r#"{"total": "five"}"#).with_status(Status::Responded);
    rejected
        .metadata
        .insert(crate::agent::typed::REJECTED.into(), true.into());
    let h = history(&p, vec![rejected]);
    let (post, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        &h,
        &none(),
    ));
    assert_eq!(post.len(), 1);
    assert!(post[0].metadata.contains_key(keys::FEEDBACK));
    assert!(post[0].content.contains("`total`"), "{}", post[0].content);
    // That was the one try: the next answer stands.
    let (_, finish) = finished(ask.replied(reply("{}", &[]), &allow, &no_limit));
    assert_eq!(finish.answer.as_deref(), Some("{}"));
}

#[test]
fn at_the_last_step_an_answer_that_does_not_fit_stands() {
    let p = typed_prompt(3);
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 1),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, finish) = finished(ask.replied(reply("{}", &[]), &allow, &no_limit));
    assert_eq!(post.len(), 1, "no feedback left behind");
    assert_eq!(finish.status, TurnStatus::Completed);
    assert_eq!(finish.answer.as_deref(), Some("{}"));
}

#[test]
fn a_refusal_is_not_repaired() {
    let p = typed_prompt(2);
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), typed::answer_shape(&p), 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let refusal =
        reply("I can't help with that.", &[]).with_stop_reason(kesoku_llm::StopReason::Refusal);
    let (post, finish) = finished(ask.replied(refusal, &allow, &no_limit));
    assert_eq!(post.len(), 1);
    assert_eq!(finish.answer.as_deref(), Some("I can't help with that."));
}
