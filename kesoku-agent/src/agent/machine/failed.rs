//! How a turn ends without an answer of the model's: its model call
//! failed (a note says why), or a newer prompt came first.

use kesoku_core::{ErrorChain, Role, Status};
use kesoku_llm::LlmError;

use super::{Ask, Decision, Finish};
use crate::agent::outcome::TurnStatus;

impl Ask {
    /// The model call failed (after the backend's retries): a note says
    /// why, and the turn fails.
    pub(crate) fn failed(self, error: &LlmError) -> Decision {
        // The whole chain: a note is read where no chain is printed.
        let said = ErrorChain(error);
        let text = if matches!(error, LlmError::ContextOverflow { .. }) {
            // The same request would be refused again: say what to change.
            format!(
                "The model refused the request as longer than its context window ({said}), and \
                 no more of the session could be left out of it (the running turn is always \
                 sent whole), so this turn stopped. Send a shorter prompt, set the agent's \
                 compaction (AgentBuilder::compaction) if it is off, or continue in a new session."
            )
        } else {
            format!("The model call failed, so this turn stopped: {said}")
        };
        let mut m = self.0.note(Role::Assistant, text, Status::Pending);
        m.metadata.insert("error".into(), said.to_string().into());
        let mut finish = Finish::new(TurnStatus::Failed, None, Status::Error);
        finish.error = Some(error.clone());
        Decision::finish(vec![m], finish)
    }

    /// A newer user message of the session came first: the turn stops,
    /// posting nothing more.
    #[expect(
        clippy::unused_self,
        reason = "taken to end the state: no reply can be fed after"
    )]
    pub(crate) fn interrupted(self) -> Decision {
        Decision::finish(
            Vec::new(),
            Finish::new(TurnStatus::Interrupted, None, Status::Interrupted),
        )
    }
}
