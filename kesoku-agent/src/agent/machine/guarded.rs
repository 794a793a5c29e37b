//! The turn's rules for its guardrails' verdicts (`run/model.rs` asks
//! them): an input guardrail's trip ends the turn before anything the
//! model said is stored; an output guardrail's verdict on the final
//! answer passes it, sends it back for another try (as a typed answer's
//! repair does), or ends the turn with the answer kept, marked. Every
//! verdict that is not a pass is stored, as a message answering the
//! prompt.

use kesoku_core::{Message, Role, Status, keys};

use super::{Ask, Decision, Finish, Machine};
use crate::agent::guardrails::GuardVerdict;
use crate::agent::outcome::{GUARDRAIL, SENT_BACK, TRIPPED, Tripped, TurnStatus};

impl Finish {
    /// The end of a turn a guardrail stopped.
    pub(super) fn tripped(tripped: Tripped) -> Self {
        let mut finish = Finish::new(TurnStatus::Tripped, None, Status::Processed);
        finish.tripped = Some(tripped);
        finish
    }
}

impl Machine {
    /// The note that ends a turn `guardrail` stopped: what the user reads.
    fn trip_note(&self, guardrail: &str, reason: &str, what: &str) -> Message {
        let text = format!("The guardrail `{guardrail}` stopped {what}: {reason}");
        let mut note = self.note(Role::Assistant, text, Status::Pending);
        note.metadata.insert(GUARDRAIL.into(), guardrail.into());
        note.metadata.insert(TRIPPED.into(), reason.into());
        note
    }

    /// The turn ends with `answer` (the model's final one, if it gave
    /// text), as the output guardrails' verdict on it says.
    pub(super) fn complete(
        mut self,
        answer: Option<Message>,
        verdict: Option<(String, GuardVerdict)>,
    ) -> Decision {
        let (Some((name, verdict)), Some(mut given)) = (verdict, answer.clone()) else {
            let text = answer.as_ref().map(|m| m.content.clone());
            return Decision::finish(
                answer.into_iter().collect(),
                Finish::new(TurnStatus::Completed, text, Status::Processed),
            );
        };
        given.metadata.insert(GUARDRAIL.into(), name.clone().into());
        match verdict {
            GuardVerdict::Pass => {
                let text = answer.as_ref().map(|m| m.content.clone());
                Decision::finish(
                    answer.into_iter().collect(),
                    Finish::new(TurnStatus::Completed, text, Status::Processed),
                )
            }
            GuardVerdict::Retry(why) if self.guard_retries > 0 && self.steps < self.max_steps => {
                self.guard_retries -= 1;
                given.status = Status::Responded;
                // Its reason too: a worker that stops before the feedback
                // is stored posts it on resuming (`sent_back`).
                given.metadata.insert(SENT_BACK.into(), why.clone().into());
                let note = self.guard_feedback(&name, &why);
                self.next_step(vec![given, note])
            }
            GuardVerdict::Retry(reason) | GuardVerdict::Trip(reason) => {
                let note = self.trip_note(&name, &reason, "this answer");
                Decision::finish(
                    vec![given, note],
                    Finish::tripped(Tripped::new(&name, &reason)),
                )
            }
        }
    }
}

impl Machine {
    /// The feedback on an answer the guardrail `name` sent back, read as
    /// the user's turn (as a typed answer's is).
    fn guard_feedback(&self, name: &str, why: &str) -> Message {
        let text =
            format!("The guardrail `{name}` did not accept that answer: {why}. Answer again.");
        let mut note = self.note(Role::System, text, Status::Responded);
        note.metadata.insert(keys::FEEDBACK.into(), true.into());
        note.metadata.insert(GUARDRAIL.into(), name.into());
        note
    }

    /// The feedback on the answer `history` (from the prompt on) ends on,
    /// when an output guardrail sent it back and its worker stopped before
    /// the feedback was stored: that answer is not the turn's.
    pub(super) fn sent_back(&mut self, history: &[Message]) -> Option<Message> {
        let last = self.last_answer(history)?;
        let why = last.meta_str(SENT_BACK)?;
        let name = last.meta_str(GUARDRAIL)?;
        let note = self.guard_feedback(name, why);
        // The try it gives was counted when the answer was sent back.
        self.guard_retries = self.guard_retries.saturating_sub(1);
        Some(note)
    }
}

impl Ask {
    /// An output guardrail's verdict on the reply this will be fed (its
    /// final answer, if it is one).
    pub(crate) fn checked(mut self, guardrail: &str, verdict: GuardVerdict) -> Self {
        self.0.guarded = Some((guardrail.to_owned(), verdict));
        self
    }

    /// An input guardrail stopped the turn before the model's reply (if
    /// any came) was stored: only its verdict is.
    pub(crate) fn tripped(self, guardrail: &str, reason: &str) -> Decision {
        let note = self.0.trip_note(guardrail, reason, "this prompt");
        Decision::finish(vec![note], Finish::tripped(Tripped::new(guardrail, reason)))
    }
}
