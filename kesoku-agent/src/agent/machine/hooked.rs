//! The turn's rules for what its hooks said (`hooks_in_turn.rs` asks
//! them): a call a hook denied or rewrote, and a hook that failed the
//! turn. Each call still gets exactly one result.

use kesoku_core::{Message, Role, Status};

use super::{Ask, Decision, Finish, Machine, Run};
use crate::agent::approval;
use crate::agent::outcome::{HookFailure, TurnStatus};

impl Machine {
    /// Ends the turn a hook failed, after `post`: a note names the hook
    /// and its error, and the turn fails as a failed model call does.
    fn hook_failed(self, mut post: Vec<Message>, failure: HookFailure) -> Decision {
        let text = format!("This turn stopped: {failure}.");
        let mut note = self.note(Role::Assistant, text, Status::Pending);
        // Read back, a note with an error is a failed turn's.
        note.metadata
            .insert("error".into(), failure.to_string().into());
        post.push(note);
        let mut finish = Finish::new(TurnStatus::Failed, None, Status::Error);
        finish.hook_error = Some(failure);
        Decision::finish(post, finish)
    }
}

impl Ask {
    /// A hook failed before or after the model call: the turn fails,
    /// its note naming the hook.
    pub(crate) fn hook_failed(self, failure: HookFailure) -> Decision {
        self.0.hook_failed(Vec::new(), failure)
    }
}

impl Run {
    /// A hook denied the call `id`: it does not run, and the model reads
    /// `reason` in its result.
    pub(crate) fn deny(&mut self, id: &str, hook: &str, reason: &str) {
        if let Some(i) = self.calls.iter().position(|(_, m)| m.id == id) {
            let (request, call) = self.calls.remove(i);
            let why = format!(
                "the call to `{}` was not allowed by the hook `{hook}`: {reason}",
                request.name
            );
            self.refused.push(
                self.machine
                    .clock
                    .stamp(approval::refused_result(&call, &why, "denied")),
            );
        }
    }

    /// A hook rewrote the arguments of the call `id`: it runs with these
    /// instead, checked against the tool's schema as the model's are.
    pub(crate) fn rewrite(&mut self, id: &str, arguments: serde_json::Value) {
        if let Some((request, _)) = self.calls.iter_mut().find(|(_, m)| m.id == id) {
            request.arguments = arguments;
        }
    }

    /// A hook failed before the step's calls ran or after they did:
    /// `results` (of those that ran) are posted as [`results`](Self::results)
    /// posts them, a call without one (nor a call waiting for a person,
    /// whose turn now ends) answered as not run; then the turn fails.
    pub(crate) fn hook_failed(mut self, results: Vec<Message>, failure: HookFailure) -> Decision {
        let mut post = self.paired(results, not_run);
        let held = std::mem::take(&mut self.held);
        post.extend(
            held.iter()
                .map(|call| self.machine.clock.stamp(not_run(call))),
        );
        self.machine.hook_failed(post, failure)
    }
}

/// The result of a call that did not run because a hook failed the turn.
fn not_run(call: &Message) -> Message {
    let name = call
        .meta_str(kesoku_core::keys::TOOL_NAME)
        .unwrap_or_default();
    approval::refused_result(
        call,
        &format!("the call to `{name}` did not run: a hook failed the turn"),
        "hook",
    )
}
