//! Where a turn stands among nested agents: the prompt of an agent
//! called as a tool carries its place (the root session and prompt, and
//! the calls that lead to it, stored as its `nested` metadata), so
//! whichever worker runs its turn knows it, and tags what the turn does
//! with that path for the root session's listeners. No IO but the
//! gateway's live deltas.

use std::sync::{Arc, Mutex, PoisonError};

use kesoku_core::store::Seq;
use kesoku_core::{Delta, DeltaKind, Gateway, Message, Progress, ProgressFuture, Via};
use serde::{Deserialize, Serialize};

use super::approval::PendingApproval;
use serde_json::Value;

/// The metadata key of a nested prompt's [`Lineage`].
pub(crate) const NESTED: &str = "nested";

/// A nested prompt's place, as stored with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Lineage {
    /// The agent (by its name) whose turn answers this prompt.
    pub(crate) agent: String,
    /// The session at the top, whose listeners see what nested turns do.
    pub(crate) root_session: String,
    /// The prompt at the top.
    pub(crate) root_prompt: String,
    /// The session of the call that runs this prompt's turn.
    pub(crate) parent_session: String,
    /// The prompt whose turn made that call.
    pub(crate) parent_prompt: String,
    /// Where that prompt is stored (what its turn wrote follows it).
    #[serde(default)]
    pub(crate) parent_after: Seq,
    /// The calls from the root to this prompt's session, outermost first
    /// (the last is the parent's call).
    pub(crate) path: Vec<Via>,
}

impl Lineage {
    /// The lineage `prompt` stores, if it is a nested prompt.
    pub(crate) fn of(prompt: &Message) -> Option<Lineage> {
        // Read in place: the stored value is not copied first.
        Lineage::deserialize(prompt.metadata.get(NESTED)?).ok()
    }

    /// Stores it on `prompt`.
    pub(crate) fn stamp(&self, prompt: &mut Message) {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        prompt.metadata.insert(NESTED.into(), value);
    }
}

/// Where a turn's tools stand, given to them as state: the gateway the
/// root session's listeners hear (where nested turns' events go), the
/// root session and prompt, and the path to this turn's session (empty
/// at the top); and the calls whose agents paused for a person.
#[derive(Debug)]
pub(crate) struct Position {
    pub(crate) gateway: Gateway,
    pub(crate) root_session: String,
    pub(crate) root_prompt: String,
    pub(crate) path: Vec<Via>,
    /// Where the turn's prompt is stored.
    pub(crate) prompt_seq: Seq,
    /// The calls (by message id) whose agent paused for a person, with
    /// what each waits for: the turn pauses with them open.
    paused: Mutex<Vec<(String, Vec<PendingApproval>)>>,
}

impl Position {
    /// The position of the turn of `prompt`, posting through `own`; a
    /// nested turn's events go to `upstream` when given (the gateway of
    /// the turn that called it, in this process), else to `own`.
    pub(crate) fn of(
        own: &Gateway,
        upstream: Option<Gateway>,
        prompt: &Message,
        prompt_seq: Seq,
    ) -> Position {
        let (gateway, root_session, root_prompt, path) = match Lineage::of(prompt) {
            Some(lineage) => (
                upstream.unwrap_or_else(|| own.clone()),
                lineage.root_session,
                lineage.root_prompt,
                lineage.path,
            ),
            None => (
                own.clone(),
                prompt.session_id.clone(),
                prompt.id.clone(),
                Vec::new(),
            ),
        };
        Position {
            gateway,
            root_session,
            root_prompt,
            path,
            prompt_seq,
            paused: Mutex::new(Vec::new()),
        }
    }

    /// Notes that the agent of the call `call_id` paused for a person,
    /// waiting for `waiting`.
    pub(crate) fn pause(&self, call_id: &str, waiting: Vec<PendingApproval>) {
        self.paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((call_id.to_owned(), waiting));
    }

    /// The calls whose agents paused since last asked, with what each
    /// waits for.
    pub(crate) fn take_paused(&self) -> Vec<(String, Vec<PendingApproval>)> {
        std::mem::take(&mut *self.paused.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the turn is nested (its events are forwarded).
    pub(crate) fn is_nested(&self) -> bool {
        !self.path.is_empty()
    }

    /// Shows the root session's listeners what the nested turn stored.
    pub(crate) fn message(&self, message: &Message) {
        if self.is_nested() && self.gateway.has_delta_listeners() {
            self.forward(DeltaKind::Message(Box::new(message.clone())));
        }
    }

    /// Shows them a piece of the nested turn's reply.
    pub(crate) fn delta(&self, delta: &Delta) {
        if self.is_nested() && self.gateway.has_delta_listeners() {
            self.forward(delta.kind.clone());
        }
    }

    fn forward(&self, kind: DeltaKind) {
        self.gateway.publish(
            Delta::new(self.root_session.clone(), kind)
                .replying_to(self.root_prompt.clone())
                .via(self.path.clone()),
        );
    }
}

/// A nested turn's tools' progress notes: stored in its own session,
/// then shown to the root session's listeners.
pub(crate) struct Forwarding {
    pub(crate) own: Gateway,
    pub(crate) position: Arc<Position>,
}

impl Progress for Forwarding {
    fn post(&self, message: Message) -> ProgressFuture<'_> {
        Box::pin(async move {
            Progress::post(&self.own, message.clone()).await?;
            self.position.message(&message);
            Ok(())
        })
    }
}
