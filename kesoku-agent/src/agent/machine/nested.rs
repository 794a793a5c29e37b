//! A step whose calls ran agents that paused for a person: those calls
//! stay open (no result), and the turn pauses after the others' results.
//! Resumed, the turn runs them again, and each agent goes on from its
//! own session.

use super::Run;

impl Run {
    /// The calls `ids` ran agents that paused: they get no result now,
    /// and the step ends the turn's run with a pause.
    pub(crate) fn wait_on_nested(&mut self, ids: &[String]) {
        self.calls.retain(|(_, m)| !ids.contains(&m.id));
        self.nested_waits = true;
    }

    /// Whether the step ends the turn's run with a pause (a call held for
    /// a person, or an agent called that waits for one).
    pub(crate) fn pauses(&self) -> bool {
        !self.held.is_empty() || self.nested_waits
    }
}

impl super::Machine {
    /// A turn no agent here may answer (its session was handed to an
    /// agent unknown here): a note says `why`, and the turn fails.
    pub(crate) fn refuse(
        setup: super::Setup,
        prompt: &kesoku_core::Message,
        why: String,
    ) -> super::Decision {
        let machine = super::Machine::new(setup, prompt);
        let note = machine.note(
            kesoku_core::Role::Assistant,
            why,
            kesoku_core::Status::Pending,
        );
        let finish = super::Finish::new(
            crate::agent::outcome::TurnStatus::Failed,
            None,
            kesoku_core::Status::Error,
        );
        super::Decision::finish(vec![note], finish)
    }
}
