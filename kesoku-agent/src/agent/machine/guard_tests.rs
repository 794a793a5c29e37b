//! The machine's rules for guardrails' verdicts, fed by hand: an input
//! trip, an answer sent back while tries last (counted from the store),
//! and a tripped turn found in the history on a restart.

use kesoku_core::{Role, Status, keys};

use super::tests::{allow, asking, clock, finished, history, no_limit, none, prompt, reply};
use super::{Machine, Setup};
use crate::agent::guardrails::GuardVerdict;
use crate::agent::outcome::{GUARDRAIL, Tripped, TurnStatus};

fn retry() -> GuardVerdict {
    GuardVerdict::Retry("it is a draft".into())
}

#[test]
fn an_input_trip_stores_only_its_verdict() {
    let p = prompt();
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, finish) = finished(ask.tripped("no_bombs", "it mentions bombs"));
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].role, Role::Assistant);
    assert_eq!(post[0].parent_id.as_deref(), Some(p.id.as_str()));
    assert_eq!(finish.status, TurnStatus::Tripped);
    assert_eq!(finish.settle, Status::Processed);
    assert_eq!(
        finish.tripped,
        Some(Tripped::new("no_bombs", "it mentions bombs"))
    );
    assert_eq!(Tripped::of(&post[0]), finish.tripped, "read back the same");
}

#[test]
fn an_answer_is_sent_back_while_tries_last_counted_from_the_store() {
    let p = prompt();
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, ask) = asking(ask.checked("g", retry()).replied(
        reply("draft", &[]),
        &allow,
        &no_limit,
    ));
    assert_eq!(post.len(), 2);
    assert_eq!(post[0].status, Status::Responded);
    assert_eq!(post[0].metadata[GUARDRAIL], "g");
    assert!(post[1].metadata.contains_key(keys::FEEDBACK));
    // The one try is spent: the next is a trip, the answer kept.
    let (last, finish) = finished(ask.checked("g", retry()).replied(
        reply("draft 2", &[]),
        &allow,
        &no_limit,
    ));
    assert_eq!(finish.status, TurnStatus::Tripped);
    assert_eq!((last[0].content.as_str(), last.len()), ("draft 2", 2));

    // A worker that resumes after the first was sent back has no try left.
    let h = history(&p, post);
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        &h,
        &none(),
    ));
    let (_, finish) = finished(ask.checked("g", retry()).replied(
        reply("draft 2", &[]),
        &allow,
        &no_limit,
    ));
    assert_eq!(finish.status, TurnStatus::Tripped);
}

#[test]
fn a_tripped_turn_found_in_the_history_ends_as_it_had() {
    let p = prompt();
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, _) = finished(ask.checked("g", GuardVerdict::Trip("no".into())).replied(
        reply("answer", &[]),
        &allow,
        &no_limit,
    ));
    let h = history(&p, post);
    let (post, finish) = finished(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        &h,
        &none(),
    ));
    assert!(post.is_empty());
    assert_eq!(finish.status, TurnStatus::Tripped);
    assert_eq!(finish.tripped, Some(Tripped::new("g", "no")));
    // A pass changes nothing.
    let (_, ask) = asking(Machine::start(
        Setup::new(clock(), None, 5),
        &p,
        std::slice::from_ref(&p),
        &none(),
    ));
    let (post, finish) = finished(ask.checked("g", GuardVerdict::Pass).replied(
        reply("fine", &[]),
        &allow,
        &no_limit,
    ));
    assert_eq!(finish.status, TurnStatus::Completed);
    assert_eq!(finish.answer.as_deref(), Some("fine"));
    assert_eq!(post.len(), 1);
}
