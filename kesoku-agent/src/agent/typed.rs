//! Typed answers: a prompt that asks for a value of a type, how it is
//! stored (its shape and its repairs travel with the prompt, so whichever
//! worker runs the turn asks for the same), the feedback the model gets
//! when its answer does not fit, and what `send_as` gives back.

use kesoku_core::{Message, MessageType, OutputError, OutputSchema, Role, keys};
use serde_json::{Value, json};

use super::outcome::{AgentError, TurnOutcome, TurnStatus};

/// Marks an answer that did not fit and was sent back: not the turn's
/// answer, whatever follows it.
pub(crate) const REJECTED: &str = "rejected";
/// The metadata key marking an answer the model's output limit cut short
/// (stop reason `max_tokens`).
pub(crate) const CUT: &str = "cut_at_output_limit";

/// Where the prompt keeps how many more answers the model may give after
/// one that does not fit.
const REPAIRS: &str = "repairs";

/// Marks `prompt` as asking for an answer of `output`, with `repairs`
/// more tries after an answer that does not fit.
pub(crate) fn ask_for(prompt: &mut Message, output: &OutputSchema, repairs: usize) {
    let mut stored = serde_json::to_value(output).unwrap_or(Value::Null);
    stored[REPAIRS] = json!(repairs);
    prompt.metadata.insert(keys::OUTPUT.into(), stored);
}

/// The shape `prompt` asks for, and its repairs; `None` for an untyped
/// prompt (or one whose stored shape no longer reads, which is answered
/// as text).
pub(crate) fn answer_shape(prompt: &Message) -> Option<(OutputSchema, usize)> {
    let stored = prompt.metadata.get(keys::OUTPUT)?;
    let output = match serde_json::from_value(stored.clone()) {
        Ok(output) => output,
        Err(e) => {
            tracing::warn!(
                prompt = %prompt.id,
                session = %prompt.session_id,
                "the prompt's answer shape (metadata `{}`) does not read, so it is answered as text: {e}",
                keys::OUTPUT
            );
            return None;
        }
    };
    let repairs = stored
        .get(REPAIRS)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    Some((output, repairs))
}

/// Whether `m` is the agent's feedback on an answer that did not fit.
pub(crate) fn is_feedback(m: &Message) -> bool {
    m.metadata.contains_key(keys::FEEDBACK)
}

/// What the model is told after an answer that did not fit; `cut` when
/// its output limit cut it short (the parse error then says only that it
/// ended early, which is not the model's mistake to fix).
pub(crate) fn feedback(error: &OutputError, cut: bool) -> String {
    if cut {
        return format!(
            "Your answer was cut at the output limit (max_tokens) before it was complete, so it \
             is not the whole JSON value ({error}).\n\nAnswer again with only the JSON value, \
             shorter, so that it fits."
        );
    }
    format!(
        "{error}\n\nAnswer again with only the JSON value, fixing {}.",
        if error.errors.len() == 1 {
            "this"
        } else {
            "each of these"
        }
    )
}

/// A turn's answer as a value of the type asked for, with the turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Typed<T> {
    /// The answer, decoded.
    pub value: T,
    /// The turn: its status is [`TurnStatus::Completed`], its answer the
    /// JSON text the value was read from.
    pub outcome: TurnOutcome,
}

/// Why [`Agent::send_as`](crate::Agent::send_as) gave no value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedError {
    /// The agent could not run the turn.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The model's provider cannot take the type's schema in its
    /// structured-output mode ([`LlmError::UnsupportedOutput`](kesoku_llm::LlmError::UnsupportedOutput)):
    /// nothing was posted or sent.
    #[error(transparent)]
    Unsupported(kesoku_llm::LlmError),
    /// The turn ended without an answer: failed, stopped at the step
    /// limit, interrupted, or waiting for a person's approval (read the
    /// value with [`TurnOutcome::value`] once it is resumed).
    #[error("the turn ended {:?} without an answer", .0.status)]
    NoAnswer(Box<TurnOutcome>),
    /// The last answer does not fit the type, after every repair: the
    /// text as the model wrote it, and every problem by its JSON path.
    /// Every answer stays in the store.
    #[error("{error}")]
    Invalid {
        /// The answer and its problems.
        error: OutputError,
        /// The turn.
        outcome: Box<TurnOutcome>,
    },
    /// The last answer was cut at the model's output limit (its stop
    /// reason was `max_tokens`) before it was whole, after every repair:
    /// raise the agent's `max_tokens`, or ask for less.
    #[error("the answer was cut at the output limit (max_tokens) before it was complete: {error}")]
    Cut {
        /// The answer as far as it came, and why it does not read.
        error: OutputError,
        /// The turn.
        outcome: Box<TurnOutcome>,
    },
}

impl TurnOutcome {
    /// The turn's answer read as a `T` (the type a typed prompt asked
    /// for): checked against `T`'s schema, then decoded. For a turn
    /// resumed or served elsewhere; `send_as` does this itself.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use kesoku_agent::Agent;
    /// use kesoku_llm::ScriptedLlm;
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "[3, 4]"}])).unwrap();
    /// let agent = Agent::builder(model).build().unwrap();
    /// let outcome = agent.send("s", "Two numbers, as a JSON array").await.unwrap();
    /// let numbers: Vec<u8> = outcome.value().unwrap();
    /// assert_eq!(numbers, [3, 4]);
    /// # });
    /// ```
    pub fn value<T>(&self) -> Result<T, TypedError>
    where
        T: kesoku_core::ToolArg + serde::de::DeserializeOwned + 'static,
    {
        let Some(answer) = self
            .answer
            .as_deref()
            .filter(|_| self.status == TurnStatus::Completed)
        else {
            return Err(TypedError::NoAnswer(Box::new(self.clone())));
        };
        let cut = self
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
            .is_some_and(|m| m.metadata.get(CUT).is_some_and(|v| v == true));
        OutputSchema::of::<T>().read_as(answer).map_err(|error| {
            let outcome = Box::new(self.clone());
            if cut {
                TypedError::Cut { error, outcome }
            } else {
                TypedError::Invalid { error, outcome }
            }
        })
    }
}
