//! A turn's side of handoffs (`handoff.rs` has the rules): at its start,
//! the agent the session was handed to takes the turn; after a step, a
//! handoff among its results hands the rest of the turn over (a cycle
//! refused); and in a session that was ever handed off, each post names
//! the agent that made it. The agent handed to goes on under the same
//! lease (`claim.rs`).

use std::sync::Arc;

use kesoku_core::Message;

use super::super::handoff::{self, AGENT};
use super::super::shared::Shared;
use super::Turn;

impl Turn<'_> {
    /// At the turn's start, from the session's `history`: the agent it
    /// was handed to, if another than this one, which takes the turn. One
    /// unknown here is noted, and the turn refused.
    pub(super) fn follow_owner(&mut self, history: &[Message]) -> Option<Arc<Shared>> {
        if self.shared.handoffs.is_empty() {
            // An agent that hands nothing off runs its own turns.
            return None;
        }
        self.stamps = true;
        self.visited = handoff::visited(history, &self.user.id);
        let owner = handoff::owner(history)?;
        if owner == self.shared.name {
            return None;
        }
        let to = self.shared.agent_named(owner);
        if to.is_none() {
            self.unknown_owner = Some(format!(
                "This session was handed to the agent `{owner}`, which the agent `{}` that took this prompt does not know (`AgentBuilder::handoff`), so no agent here may answer it.",
                self.shared.name
            ));
        }
        to
    }

    /// After a step: the first handoff among its `results` hands the
    /// turn over once they are posted (its result names the agent it goes
    /// to); one to an agent that had this turn already is refused, and so
    /// is one in a step that `pauses` (the calls it waits on are this
    /// agent's to run once decided), and any later one in the step.
    pub(super) fn handoffs_in(&mut self, results: &mut [Message], pauses: bool) {
        if self.shared.handoffs.is_empty() {
            return;
        }
        let Some((i, agent)) = handoff::first(results, &self.shared.handoffs) else {
            return;
        };
        handoff::refuse_later(results, i, &self.shared.handoffs);
        if pauses {
            let why = format!(
                "the turn waits for a person's decision on another call of this step, so the conversation stays with `{}` for now: hand it to `{agent}` once the turn goes on",
                self.shared.name
            );
            handoff::refuse(&mut results[i], &why, "handoff_paused");
            return;
        }
        let mut had = self.visited.clone();
        if !had.contains(&self.shared.name) {
            had.push(self.shared.name.clone());
        }
        if had.iter().any(|v| v == agent) {
            handoff::refuse_cycle(&mut results[i], agent, &had);
            return;
        }
        match self.shared.agent_named(agent) {
            Some(to) => {
                results[i].metadata.insert(AGENT.into(), agent.into());
                self.handing_to = Some(to);
            }
            None => handoff::refuse(
                &mut results[i],
                &format!(
                    "no agent named `{agent}` is in this agent's team now; answer the user instead"
                ),
                "handoff_unknown",
            ),
        }
    }

    /// The turn ends with the step that handed off (its step limit): the
    /// handoff's result among `last` says it was not made, and names no
    /// agent, so the session stays with this one.
    pub(super) fn handoff_not_made(&mut self, last: &mut [Message]) {
        if self.handing_to.take().is_none() {
            return;
        }
        let made = last.iter_mut().find(|m| {
            m.metadata.contains_key(AGENT)
                && m.meta_str(kesoku_core::keys::TOOL_NAME)
                    .is_some_and(|t| self.shared.handoffs.contains_key(t))
        });
        if let Some(result) = made {
            result.metadata.remove(AGENT);
            let why = "the turn ended with this step (its step limit), so the conversation stays with this agent: hand it off in the next turn";
            handoff::refuse(result, why, "handoff_turn_ended");
        }
    }

    /// Names the agent that posts `m`, in a session that was ever handed
    /// off (a handoff's result keeps the agent it goes to).
    pub(super) fn stamp(&self, m: &mut Message) {
        if self.stamps {
            m.metadata
                .entry(AGENT)
                .or_insert_with(|| self.shared.name.clone().into());
        }
    }
}
