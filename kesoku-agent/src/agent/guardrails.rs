//! Guardrails: checks of a turn's prompt (input) and of its final answer
//! (output), each a [`Guardrail`]. When they run, and what a verdict does
//! to the turn, is the turn's (`run/model.rs`, `machine/guarded.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::hooks::HookError;

/// What a [`Guardrail`] decides.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardVerdict {
    /// Nothing wrong.
    Pass,
    /// Stop: the turn ends [`Tripped`](super::TurnStatus::Tripped),
    /// naming the guardrail and this reason. An input guardrail's trip
    /// drops the model call in flight, and nothing the model said is
    /// stored; an output guardrail's keeps the answer, marked.
    Trip(String),
    /// An output guardrail's: ask the model for another answer, telling
    /// it this, while it has tries left
    /// ([`AgentBuilder::output_repairs`](super::AgentBuilder::output_repairs));
    /// then it is a trip. To an input guardrail, a trip.
    Retry(String),
}

/// What a guardrail checks: the prompt's text, or the final answer's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuardInput {
    /// The session.
    pub session_id: String,
    /// The id of the prompt the turn answers.
    pub prompt_id: String,
    /// The text checked.
    pub text: String,
}

/// What a guardrail's check returns, boxed.
pub type GuardFuture = Pin<Box<dyn Future<Output = Result<GuardVerdict, HookError>> + Send>>;

type Check = dyn Fn(GuardInput) -> GuardFuture + Send + Sync;

/// A check of a turn's prompt or final answer: any async function, or
/// an agent that answers a [`GuardCheck`]
/// ([`Agent::as_guardrail`](super::Agent::as_guardrail)). Set with
/// [`AgentBuilder::input_guardrail`](super::AgentBuilder::input_guardrail)
/// and [`output_guardrail`](super::AgentBuilder::output_guardrail).
///
/// A guardrail that fails (returns an error) or panics fails the turn as
/// a [hook](super::Hooks) does, naming it. Its verdict, when it is not
/// [`Pass`](GuardVerdict::Pass), is stored as a message answering the
/// prompt, so the history shows why.
///
/// ```
/// use kesoku_agent::{GuardInput, GuardVerdict, Guardrail};
///
/// let no_passwords = Guardrail::new("no_passwords", |input: GuardInput| async move {
///     Ok(if input.text.to_lowercase().contains("password") {
///         GuardVerdict::Trip("this assistant does not handle passwords".into())
///     } else {
///         GuardVerdict::Pass
///     })
/// });
/// assert_eq!(no_passwords.name(), "no_passwords");
/// ```
#[derive(Clone)]
pub struct Guardrail {
    name: Arc<str>,
    check: Arc<Check>,
}

impl Guardrail {
    /// A guardrail named `name` (as the turn's status and its stored
    /// verdict name it) that runs `check`.
    pub fn new<F, Fut>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn(GuardInput) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<GuardVerdict, HookError>> + Send + 'static,
    {
        let name: String = name.into();
        Guardrail {
            name: name.into(),
            check: Arc::new(move |input| Box::pin(check(input))),
        }
    }

    /// The guardrail's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the check on `input`.
    pub(crate) fn check(&self, input: GuardInput) -> GuardFuture {
        (self.check)(input)
    }
}

impl std::fmt::Debug for Guardrail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guardrail")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The verdict an agent used as a guardrail answers with
/// ([`Agent::as_guardrail`](super::Agent::as_guardrail)): its typed answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, kesoku_macros::ToolArg)]
#[kesoku(crate = kesoku_core)]
pub struct GuardCheck {
    /// Whether the text breaks the rules you were given.
    pub tripped: bool,
    /// Why it does (a sentence the user will read); empty when it does not.
    pub reason: String,
}
