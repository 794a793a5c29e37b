//! What a turn ends with ([`TurnOutcome`], also as read back from the
//! store), and why an agent call failed
//! ([`AgentError`]).

use kesoku_core::{GatewayError, Message, MessageType, Role, Status};

use super::approval::{self, PendingApproval};

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnStatus {
    /// The model answered without asking for tools; the user message is
    /// `processed`.
    Completed,
    /// `max_steps` model calls were made without a final answer; an
    /// assistant message says so, and the user message is `processed`.
    StepLimit,
    /// A newer user message of the session cut the turn short; the user
    /// message is `interrupted`.
    Interrupted,
    /// The model call failed (after the backend's retries) or its reply
    /// could not be read; an assistant message names the error, and the
    /// user message is `error`.
    Failed,
    /// Some calls wait for a person's decision
    /// ([`TurnOutcome::pending_approvals`]); the others ran. The user
    /// message is `awaiting_approval` and the session's lease is released;
    /// once every waiting call is decided, any worker resumes the turn.
    AwaitingApproval,
    /// A guardrail stopped the turn ([`TurnOutcome::tripped`] names it
    /// and says why): an input guardrail before the model's first reply
    /// was stored, an output guardrail after the final answer, which is
    /// kept, marked. A note answering the prompt says so; the user
    /// message is `processed`.
    Tripped,
}

/// The end of one turn: how it ended, the final text, and every message
/// the turn posted, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TurnOutcome {
    /// How the turn ended.
    pub status: TurnStatus,
    /// The model's final text, when it gave one.
    pub answer: Option<String>,
    /// Everything the turn posted after the user message, in order: the
    /// model's texts, its tool calls, their results, and the final answer
    /// or the note that ended the turn.
    pub messages: Vec<Message>,
    /// Why the turn [`Failed`](TurnStatus::Failed), when a model call
    /// failed it here: the backend's typed error
    /// ([`LlmError::ContextOverflow`](kesoku_llm::LlmError::ContextOverflow)
    /// for a request the model refused as too long, say). `None` for a
    /// turn that did not fail, or one read back from the store (its note's
    /// metadata holds the error's text).
    pub error: Option<kesoku_llm::LlmError>,
    /// Why the turn [`Failed`](TurnStatus::Failed), when a hook failed it
    /// here ([`Hooks`](super::Hooks)). `None` otherwise, and for a turn
    /// read back from the store (its note names the hook).
    pub hook_error: Option<HookFailure>,
    /// The guardrail that stopped the turn
    /// ([`Tripped`](TurnStatus::Tripped)), and why; also for a turn read
    /// back from the store.
    pub tripped: Option<Tripped>,
    /// The calls that agents this turn called as tools left waiting for a
    /// person (their paths lead to them).
    pub(crate) nested: Vec<PendingApproval>,
}

/// A guardrail that stopped a turn, and its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tripped {
    /// The guardrail's name.
    pub guardrail: String,
    /// Its reason.
    pub reason: String,
}

/// The metadata key naming the guardrail on its stored verdict, and on
/// an answer it stopped or sent back.
pub(crate) const GUARDRAIL: &str = "guardrail";
/// The metadata key of a trip's reason, on the note that ends the turn.
pub(crate) const TRIPPED: &str = "tripped";
/// The metadata key of the reason an output guardrail sent an answer
/// back, on that answer.
pub(crate) const SENT_BACK: &str = "sent_back";

impl Tripped {
    pub(crate) fn new(guardrail: &str, reason: &str) -> Self {
        Tripped {
            guardrail: guardrail.to_owned(),
            reason: reason.to_owned(),
        }
    }

    /// The trip a stored note records.
    pub(crate) fn of(note: &Message) -> Option<Self> {
        Some(Tripped::new(
            note.meta_str(GUARDRAIL)?,
            note.meta_str(TRIPPED)?,
        ))
    }
}

/// A hook that failed a turn: its [`name`](super::Hooks::name), and its
/// error (or its panic's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the hook `{hook}` failed: {error}")]
#[non_exhaustive]
pub struct HookFailure {
    /// The hook's name.
    pub hook: String,
    /// Its error, with its causes, or what its panic said.
    pub error: String,
}

impl HookFailure {
    pub(crate) fn new(hook: &str, error: String) -> Self {
        HookFailure {
            hook: hook.to_owned(),
            error,
        }
    }
}

impl TurnOutcome {
    /// The tokens this turn's model calls used, in total (see
    /// [`Agent::usage`](super::Agent::usage) for a session's).
    pub fn usage(&self) -> kesoku_llm::Usage {
        self.messages.iter().filter_map(kesoku_llm::Usage::of).sum()
    }

    /// The calls this turn left waiting for a person's decision, in the
    /// model's order, then those waiting in the agents it called as tools
    /// (each with its [`path`](PendingApproval::path)): empty unless it
    /// ended [`AwaitingApproval`](TurnStatus::AwaitingApproval). A turn
    /// read back from the store lists only its own;
    /// [`Agent::pending_approvals`](super::Agent::pending_approvals) lists
    /// them all.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        let answered: std::collections::HashSet<&str> = self
            .messages
            .iter()
            .filter(|m| m.kind == MessageType::ToolResult)
            .filter_map(|m| m.parent_id.as_deref())
            .collect();
        self.messages
            .iter()
            .filter(|m| approval::is_held(m) && !answered.contains(m.id.as_str()))
            .map(PendingApproval::of)
            .chain(self.nested.iter().cloned())
            .collect()
    }
}

/// Why an agent could not be built or could not run a turn. A turn that
/// ran and failed is not an error: it is a [`TurnOutcome`] whose status
/// is [`TurnStatus::Failed`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The store behind the gateway failed; what was posted before stays.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The builder's settings cannot work.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// Both [`AgentBuilder::store`](crate::AgentBuilder::store) and
    /// [`AgentBuilder::gateway`](crate::AgentBuilder::gateway) were set:
    /// one would silently replace the other, so neither is chosen.
    #[error(
        "invalid agent configuration: both `store` and `gateway` were set; a gateway already holds its store: set one"
    )]
    StoreAndGateway,
    /// A turn panicked, and so did settling its prompt afterwards.
    #[error(
        "the turn of session `{session}` panicked ({message}), and its prompt could not be settled"
    )]
    Panicked {
        /// The session.
        session: String,
        /// The panic's message.
        message: String,
    },
    /// The session's workspace directory could not be created.
    #[error("cannot create the workspace directory {path} of session `{session}`: {message}")]
    Workspace {
        /// The session.
        session: String,
        /// The directory.
        path: String,
        /// The file system's error.
        message: String,
    },
}

/// Why [`Agent::resume`](super::Agent::resume) ran no turn: each case a
/// front end shows differently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// No user message has this id (in the session given, with
    /// [`Agent::resume_in`](super::Agent::resume_in)).
    #[error("no prompt `{prompt}` is stored{}", in_session(.session.as_deref()))]
    Unknown {
        /// The id given.
        prompt: String,
        /// The session given, if one was.
        session: Option<String>,
    },
    /// Its turn still waits for a person's decision on some calls.
    #[error("the turn of prompt `{prompt}` still waits for {undecided} decision(s)")]
    Undecided {
        /// The id given.
        prompt: String,
        /// How many of its calls are undecided.
        undecided: usize,
    },
    /// Its turn is not waiting to be taken: it ended (`processed`,
    /// `error`), a newer prompt interrupted it (`interrupted`), or a worker
    /// is running it (`processing`).
    #[error("the turn of prompt `{prompt}` is not waiting to resume: the prompt is {status:?}")]
    NotWaiting {
        /// The id given.
        prompt: String,
        /// The prompt's status.
        status: Status,
    },
    /// Another worker took the turn first (a [`serve`](super::Agent::serve)
    /// here or in another process): it runs there.
    #[error("the turn of prompt `{prompt}` was taken by another worker")]
    Taken {
        /// The id given.
        prompt: String,
    },
    /// The turn could not run (the store failed, say).
    #[error(transparent)]
    Agent(#[from] AgentError),
}

fn in_session(session: Option<&str>) -> String {
    session.map_or_else(String::new, |s| format!(" in session `{s}`"))
}

impl From<GatewayError> for ResumeError {
    fn from(e: GatewayError) -> Self {
        ResumeError::Agent(e.into())
    }
}

/// The outcome of a turn as the store holds it: the messages that answer
/// the user message (and the results of their calls), for a `send` whose
/// message another agent took.
pub(crate) fn outcome_from_history(
    status: TurnStatus,
    user: &Message,
    history: Vec<Message>,
) -> TurnOutcome {
    let mut ours = std::collections::HashSet::new();
    ours.insert(user.id.clone());
    let mut messages = Vec::new();
    for m in history {
        if m.role != Role::User && m.parent_id.as_ref().is_some_and(|p| ours.contains(p)) {
            ours.insert(m.id.clone());
            messages.push(m);
        }
    }
    // A trip is settled `processed`: its note says it was one.
    let tripped = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
        .and_then(Tripped::of);
    let status = match (status, &tripped) {
        (TurnStatus::Completed, Some(_)) => TurnStatus::Tripped,
        (status, _) => status,
    };
    let answer = match status {
        TurnStatus::Completed => messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
            .map(|m| m.content.clone()),
        _ => None,
    };
    TurnOutcome {
        status,
        answer,
        messages,
        error: None,
        hook_error: None,
        tripped,
        nested: Vec::new(),
    }
}
