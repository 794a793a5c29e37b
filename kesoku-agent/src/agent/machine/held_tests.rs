//! The rules around calls that wait for a person, and calls a history
//! left without results, fed by hand: what a held call is stamped with, a
//! call found begun elsewhere, and what heals the calls a crash or a user
//! who moved on left behind (`heal.rs`).

use std::collections::HashMap;
use std::time::Duration;

use kesoku_core::{Message, ToolRequest, keys};
use serde_json::json;

use super::tests::{asking, finished, history, no_limit, prompt, ran, result_of};
use super::{Machine, Setup};
use crate::agent::approval::{self, Approval, Verdict};
use crate::agent::clock::{Clock, Stamp};
use crate::agent::heal::heal;
use crate::agent::outcome::TurnStatus;
use kesoku_llm::AssistantTurn;

/// A clock standing still at `at` seconds, counting ids from 0.
fn still(at: i64) -> Clock {
    let next = std::sync::atomic::AtomicI64::new(0);
    Clock::new(move || Stamp {
        id: format!(
            "h{}",
            next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
        at: chrono::DateTime::from_timestamp(at, 0).expect("in range"),
    })
}

fn ask_about_all(_: &ToolRequest) -> Approval {
    Approval::Ask
}

/// A turn of prompt `p`, stored at seq 41, asked one call held for a
/// person: the call as posted.
fn held_with(wait: Option<Duration>) -> Message {
    let p = prompt();
    let mut setup = Setup::new(still(1_800_000_000), None, 5);
    setup.prompt_seq = 41;
    setup.approval_wait = wait;
    let (post, ask) = asking(Machine::start(
        setup,
        &p,
        std::slice::from_ref(&p),
        &HashMap::new(),
    ));
    assert!(post.is_empty());
    let turn = AssistantTurn::new(
        "s",
        "mock",
        "",
        [ToolRequest::new("c1", "delete", json!({}))],
    );
    let (post, run) = ran(ask.replied(turn, &ask_about_all, &no_limit));
    assert!(run.calls().is_empty());
    let (_, finish) = finished(run.results(Vec::new()));
    assert_eq!(finish.status, TurnStatus::AwaitingApproval);
    assert_eq!(post.len(), 1);
    post.into_iter().next().expect("one call")
}

#[test]
fn a_held_call_is_stamped_with_its_prompts_place_and_the_deadline_from_the_clock() {
    let call = held_with(Some(Duration::from_millis(90_500)));
    assert!(approval::is_held(&call));
    assert_eq!(approval::after(&call), 41);
    // The clock's time (not the wall's) plus the wait, to the millisecond.
    assert_eq!(
        call.metadata[approval::DEADLINE],
        json!("2027-01-15T08:01:30.500Z")
    );
    let (a, b) = (
        held_with(Some(Duration::from_secs(60))),
        held_with(Some(Duration::from_secs(60))),
    );
    // The call itself is the model's (its id and time are the backend's).
    assert_eq!(
        a.metadata, b.metadata,
        "fed the same, a pause stamps the same"
    );
}

#[test]
fn without_a_deadline_or_past_what_a_date_holds_a_held_call_has_none() {
    for wait in [
        None,
        Some(Duration::MAX),
        Some(Duration::from_secs(1_000_000_000_000_000)),
    ] {
        let call = held_with(wait);
        assert_eq!(approval::after(&call), 41);
        assert!(approval::deadline(&call).is_none(), "{wait:?}");
        assert!(!call.metadata.contains_key(approval::DEADLINE), "{wait:?}");
    }
}

#[test]
fn an_approved_call_begun_elsewhere_does_not_run_and_says_so() {
    let p = prompt();
    let held = |id: &str| {
        let mut m = Message::tool_call("s", &ToolRequest::new(id, "delete", json!({"n": 1})))
            .with_parent(&p.id);
        m.metadata.insert(approval::HELD.into(), "asked".into());
        m
    };
    let (c1, c2) = (held("c1"), held("c2"));
    let h = history(&p, vec![c1.clone(), c2.clone()]);
    let decided = HashMap::from([
        (c1.id.as_str(), Verdict::Approve),
        (c2.id.as_str(), Verdict::Approve),
    ]);
    let (_, mut run) = ran(Machine::start(
        Setup::new(still(1_800_000_000), None, 5),
        &p,
        &h,
        &decided,
    ));
    let approved: Vec<&str> = run.approved().map(|m| m.id.as_str()).collect();
    assert_eq!(approved, [c1.id.as_str(), c2.id.as_str()]);
    run.begun_elsewhere(&c2.id);
    run.begun_elsewhere("no-such-call");
    assert_eq!(run.calls().len(), 1);
    assert_eq!(run.calls()[0].1.id, c1.id);
    let (post, ask) = asking(run.results(vec![result_of(&c1, "deleted")]));
    let parents: Vec<&str> = post.iter().filter_map(|m| m.parent_id.as_deref()).collect();
    assert_eq!(parents, [c2.id.as_str(), c1.id.as_str()]);
    assert_eq!(post[0].metadata[keys::ERROR_KIND], "interrupted");
    assert!(
        post[0].content.contains("may or may not have run"),
        "{}",
        post[0].content
    );
    assert_eq!(post[0].id, "h0", "stamped by the turn's clock");
    assert_eq!(ask.step(), 1);
}

#[test]
fn healing_answers_other_prompts_calls_as_decided_and_leaves_the_turns_own_waiting_ones() {
    let p = prompt();
    let older = "older-prompt";
    let call = |id: &str, parent: &str, held: bool| {
        let mut m =
            Message::tool_call("s", &ToolRequest::new(id, "delete", json!({}))).with_parent(parent);
        if held {
            m.metadata.insert(approval::HELD.into(), "asked".into());
        }
        m
    };
    let own_held = call("c1", &p.id, true);
    let own_cut = call("c2", &p.id, false);
    let old_denied = call("c3", older, true);
    let old_undecided = call("c4", older, true);
    let old_cut = call("c5", "oldest", false);
    let h = history(
        &p,
        vec![
            old_cut.clone(),
            old_denied.clone(),
            old_undecided.clone(),
            own_held.clone(),
            own_cut.clone(),
        ],
    );
    let decided = HashMap::from([
        (
            old_denied.id.as_str(),
            Verdict::Deny(Some("not today".into())),
        ),
        (own_held.id.as_str(), Verdict::Approve),
    ]);
    let healing = heal(&still(1_800_000_000), &p.id, &h, &decided, &|_| false);
    let parents: Vec<&str> = healing
        .results
        .iter()
        .filter_map(|m| m.parent_id.as_deref())
        .collect();
    assert_eq!(
        parents,
        [
            old_cut.id.as_str(),
            old_denied.id.as_str(),
            old_undecided.id.as_str(),
            own_cut.id.as_str()
        ],
        "the turn's own waiting call is its to answer"
    );
    assert!(
        healing.results[1].content.contains("not today"),
        "{}",
        healing.results[1].content
    );
    assert!(
        healing.results[3]
            .content
            .contains("may or may not have run")
    );
    let ids: Vec<&str> = healing.results.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["h0", "h1", "h2", "h3"], "stamped by the turn's clock");
    assert_eq!(healing.moved_on, [older]);
    // Nothing left without a result: nothing to heal.
    let whole = history(&p, vec![own_cut.clone(), result_of(&own_cut, "5")]);
    let healing = heal(&still(0), &p.id, &whole, &HashMap::new(), &|_| false);
    assert!(healing.results.is_empty() && healing.moved_on.is_empty());
}
