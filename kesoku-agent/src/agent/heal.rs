//! The rule for the calls a session's history left without results, with
//! no IO: what answers each before a turn runs on the history (a crash or
//! an interruption cut them short, or a user moved on from a pause). The
//! turn's other rules are `machine.rs`; `run.rs` posts what this decides.

use std::collections::HashMap;

use kesoku_core::Message;

use super::approval::{self, Verdict};
use super::clock::Clock;
use super::nested_ids::child_prompt;
use super::view::{healing_result, orphans};

/// What answers the calls a session's history left without results,
/// before a turn runs on it.
#[derive(Debug, Default)]
pub(crate) struct Healing {
    /// The results, to post in order.
    pub(crate) results: Vec<Message>,
    /// The older prompts whose waiting calls these answer: their turns
    /// end `interrupted` (paused, or put back but not yet resumed, they
    /// will not run).
    pub(crate) moved_on: Vec<String>,
}

/// The results that heal `history`'s calls left without results before
/// the turn of `prompt` runs, stamped by `clock`. A call of `prompt` that
/// waits for a person is the turn's to answer (`Machine::start`) and is
/// left alone; another prompt's was left by a user who moved on, and is
/// answered as `decisions` says (undecided, denied with its reason, or
/// approved but never run); a call of `prompt` that `runs_again` (an
/// agent called as a tool, which goes on from its own stored history) is
/// the turn's to run again; any other call was cut short (a crash, an
/// interruption) and may or may not have run.
pub(crate) fn heal(
    clock: &Clock,
    prompt: &str,
    history: &[Message],
    decisions: &HashMap<&str, Verdict>,
    runs_again: &dyn Fn(&Message) -> bool,
) -> Healing {
    let mut moved_on = Vec::new();
    let results = orphans(history)
        .into_iter()
        .filter(|m| {
            let ours = m.parent_id.as_deref() == Some(prompt);
            !(ours && (approval::is_held(m) || runs_again(m)))
        })
        .map(|m| {
            clock.stamp(if approval::is_held(m) {
                moved_on.extend(m.parent_id.clone());
                approval::moved_on_result(m, decisions.get(m.id.as_str()))
            } else {
                if runs_again(m) {
                    // An agent called by a turn the user moved on from
                    // (paused on a decision inside it, say): that turn
                    // and the agent's are over, not left for a sweep to
                    // put back and run after the newer prompt.
                    moved_on.extend(m.parent_id.clone());
                    moved_on.push(child_prompt(m));
                }
                healing_result(m)
            })
        })
        .collect();
    moved_on.dedup();
    Healing { results, moved_on }
}
