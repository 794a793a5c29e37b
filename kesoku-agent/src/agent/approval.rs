//! A person in the loop: which calls wait for a yes ([`Approval`], the
//! agent's policy), how a waiting call and a decision are stored, and the
//! results that answer a call that was not approved.
//!
//! A pause is data in the store, not a future in memory:
//! - a call that waits is its `tool_call` message with
//!   `"approval": "asked"` in its metadata, and no result;
//! - its turn's prompt is [`Status::AwaitingApproval`], and the session's
//!   lease is released;
//! - a decision is a message of its own, whose id is the call message's
//!   id and [`DECISION_SUFFIX`]: the store's unique ids make a second
//!   decision fail, in every process at once. It is never shown to the
//!   model.
//!
//! Once every waiting call of the step is decided, the prompt goes back
//! to `pending_agent`, and whichever worker takes it runs the approved
//! calls and answers the denied ones with their reasons.
//!
//! A turn also pauses when an agent it called as a tool paused: that
//! call is left open (no result, not held), and the child's prompt, in
//! its own session (`nested.rs`), waits for the decisions. The turn
//! counts as decided once every call it waits on, at every depth, is.

use std::sync::Arc;

use kesoku_core::store::{Seq, Store, StoreError};
use kesoku_core::{Message, MessageType, Role, Status, ToolHints, ToolRequest, keys};
use serde_json::Value;

use super::nested_ids::child_prompt;

/// The metadata key marking a call held for a person's decision (its
/// stored value is `"asked"`); the mark stays once the call is decided.
pub(crate) const HELD: &str = "approval";
/// The metadata key of a decision: the id of the call message it decides.
pub(crate) const DECIDES: &str = "approval_of";
/// The metadata key of a waiting call's deadline (RFC 3339): past it, the
/// call is answered as denied.
pub(crate) const DEADLINE: &str = "approval_deadline";
/// The metadata key of a waiting call's prompt's place in the store
/// (its `Seq`): its calls, results and decisions all come after it, so a
/// decision reads only those, whatever the session's length.
pub(crate) const AFTER: &str = "approval_after";
/// The reason a call is denied with when its deadline passed.
pub(crate) const DEADLINE_PASSED: &str = "no one decided before the approval deadline";
/// A decision's message id: the call message's, and this.
pub(crate) const DECISION_SUFFIX: &str = ".decision";

/// What an approval policy says of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// Run it.
    Allow,
    /// Store it as waiting, and pause the turn until a person decides.
    Ask,
    /// Do not run it: its result is an error carrying this reason, which
    /// the model reads.
    Deny(String),
}

/// What a policy decides a call from: the request, and what its tool says
/// of itself.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ApprovalCheck<'a> {
    /// The call, as the model asked for it.
    pub request: &'a ToolRequest,
    /// The tool's hints (`destructive`, `read_only`, …), also those a
    /// tool imported over MCP carries; the default (no hints) for a tool
    /// the registry does not hold.
    pub hints: ToolHints,
    /// Whether the tool is marked `#[tool(approval)]` (or
    /// [`DynamicTool::needs_approval`](kesoku_core::DynamicTool::needs_approval)).
    pub marked: bool,
}

/// An agent's approval policy.
pub(crate) type Policy = Arc<dyn Fn(&ApprovalCheck<'_>) -> Approval + Send + Sync>;

/// The default policy: ask for the tools marked `approval`, allow the rest.
pub(crate) fn marked_only(check: &ApprovalCheck<'_>) -> Approval {
    if check.marked {
        Approval::Ask
    } else {
        Approval::Allow
    }
}

/// A person's decision on a waiting call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The call runs.
    Approve,
    /// The call does not run; its result is an error naming the reason
    /// (when given), for the model to read.
    Deny(Option<String>),
}

/// A call waiting for a person's decision.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PendingApproval {
    /// The id to decide it by: its `tool_call` message's id (the model's
    /// call ids repeat across turns; this one never does).
    pub id: String,
    /// The model's id of the call.
    pub call_id: String,
    /// The tool it calls.
    pub tool: String,
    /// Its arguments, as the model gave them.
    pub arguments: Value,
    /// Its session.
    pub session_id: String,
    /// The user message whose turn waits for it.
    pub prompt_id: String,
    /// When the call is denied unless someone decided it first (the
    /// agent's [`approval_deadline`](super::AgentBuilder::approval_deadline)),
    /// if it has one.
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// For a call of an agent called as a tool ([`AgentTool`](super::AgentTool)), the
    /// calls that lead to its session from the one asked about, outermost
    /// first; empty for that session's own calls.
    pub path: Vec<kesoku_core::Via>,
}

impl PendingApproval {
    /// The waiting call that `call` (a stored `tool_call` message) is.
    pub(crate) fn of(call: &Message) -> Self {
        PendingApproval {
            id: call.id.clone(),
            call_id: call.meta_str(keys::CALL_ID).unwrap_or_default().to_owned(),
            tool: call
                .meta_str(keys::TOOL_NAME)
                .unwrap_or_default()
                .to_owned(),
            arguments: call
                .metadata
                .get(keys::ARGUMENTS)
                .cloned()
                .unwrap_or_default(),
            session_id: call.session_id.clone(),
            prompt_id: call.parent_id.clone().unwrap_or_default(),
            deadline: deadline(call),
            path: Vec::new(),
        }
    }
}

/// What a decision did to its call's turn.
///
/// A turn paused on several calls waits until every one is decided; the
/// decision that completes the set puts the turn back for a worker to run
/// ([`Agent::serve`](super::Agent::serve), in any process sharing the
/// store, or [`Agent::resume`](super::Agent::resume)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decided {
    /// Other calls of the same turn still wait for a decision.
    Waiting {
        /// The user message whose turn waits.
        prompt_id: String,
        /// How many of its calls are still undecided.
        undecided: usize,
    },
    /// Every call of the turn is decided: the turn is ready to resume.
    Ready {
        /// The user message whose turn resumes.
        prompt_id: String,
    },
}

impl Decided {
    /// Whether every call of the turn is decided, so the turn can resume.
    pub fn is_ready(&self) -> bool {
        matches!(self, Decided::Ready { .. })
    }

    /// The user message whose turn the call belongs to (what
    /// [`Agent::resume`](super::Agent::resume) takes).
    pub fn prompt_id(&self) -> &str {
        match self {
            Decided::Waiting { prompt_id, .. } | Decided::Ready { prompt_id } => prompt_id,
        }
    }
}

/// Why a decision was refused. A refusal stores nothing, with one
/// exception: [`Expired`](ApprovalError::Expired), where the deadline's
/// denial is stored in place of the decision given (as a sweep would).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No message has this id.
    #[error("no tool call has the id `{id}`")]
    Unknown {
        /// The id given.
        id: String,
    },
    /// The message is not a call that waited for approval.
    #[error("message `{id}` is not a tool call waiting for approval")]
    NotWaiting {
        /// The id given.
        id: String,
    },
    /// The call has a result already (it ran, or the user moved on).
    #[error("the call `{id}` is answered already: {result}")]
    Answered {
        /// The id given.
        id: String,
        /// Its result's text.
        result: String,
    },
    /// Its approval deadline passed before this decision: the decision
    /// given is not taken, and the call is denied for the deadline
    /// instead (that denial is stored, and the model is told; the turn is
    /// put back once every call is decided, as after any decision).
    #[error("the call `{id}` is denied: its approval deadline passed")]
    Expired {
        /// The id given.
        id: String,
    },
    /// The session named holds no tool call with this id (it may be
    /// another session's: a front end acting for one session's user is
    /// refused it, and is not told whether it exists elsewhere).
    #[error("session `{session}` has no tool call `{id}`")]
    NotInSession {
        /// The id given.
        id: String,
        /// The session given.
        session: String,
    },
    /// Someone decided it first.
    #[error("the call `{id}` was already {}", if *.approved { "approved" } else { "denied" })]
    AlreadyDecided {
        /// The id given.
        id: String,
        /// What the first decision was.
        approved: bool,
    },
    /// The store failed; nothing was decided, or the decision stands and
    /// the turn was not yet put back (deciding again says which).
    #[error(transparent)]
    Gateway(#[from] kesoku_core::GatewayError),
}

/// Whether `m` is a call held for a person's decision (decided or not).
pub(crate) fn is_held(m: &Message) -> bool {
    m.kind == MessageType::ToolCall && m.metadata.get(HELD).is_some_and(|v| v == "asked")
}

/// The deadline of the waiting `call`, if it has one.
pub(crate) fn deadline(call: &Message) -> Option<chrono::DateTime<chrono::Utc>> {
    call.meta_str(DEADLINE)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.to_utc())
}

/// Whether the deadline of the waiting `call` has passed at `now`.
pub(crate) fn expired(call: &Message, now: chrono::DateTime<chrono::Utc>) -> bool {
    deadline(call).is_some_and(|deadline| deadline <= now)
}

/// Where the messages about the waiting `call` begin: after its prompt
/// (0, the whole session, for a call stored before this was kept).
pub(crate) fn after(call: &Message) -> Seq {
    call.metadata
        .get(AFTER)
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether `m` is a decision (never shown to the model).
pub(crate) fn is_decision(m: &Message) -> bool {
    m.metadata.contains_key(DECIDES)
}

/// The id of the decision on the call message `call_id`.
pub(crate) fn decision_id(call: &str) -> String {
    format!("{call}{DECISION_SUFFIX}")
}

/// The message recording `verdict` on `call`.
pub(crate) fn decision(call: &Message, verdict: &Verdict) -> Message {
    let (approved, reason) = match verdict {
        Verdict::Approve => (true, None),
        Verdict::Deny(reason) => (false, reason.clone()),
    };
    let text = match (&reason, approved) {
        (_, true) => "approved".to_owned(),
        (Some(r), false) => format!("denied: {r}"),
        (None, false) => "denied".to_owned(),
    };
    let mut m = Message::new(&call.session_id, Role::System, MessageType::Text, text)
        .with_sender("approval")
        .with_status(Status::Processed)
        .with_parent(&call.id);
    m.id = decision_id(&call.id);
    m.metadata.insert(DECIDES.into(), call.id.clone().into());
    m.metadata.insert("approved".into(), approved.into());
    if let Some(r) = reason {
        m.metadata.insert("reason".into(), r.into());
    }
    m
}

/// The verdict a decision message records.
pub(crate) fn verdict_of(decision: &Message) -> Verdict {
    if decision.metadata.get("approved").is_some_and(|v| v == true) {
        Verdict::Approve
    } else {
        Verdict::Deny(decision.meta_str("reason").map(str::to_owned))
    }
}

/// The error result of a call that will not run: `why` is what the model
/// reads.
pub(crate) fn refused_result(call: &Message, why: &str, kind: &str) -> Message {
    let name = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
    let mut m = Message::new(
        &call.session_id,
        Role::Tool,
        MessageType::ToolResult,
        format!("Error: {why}"),
    )
    .with_sender(name)
    .with_status(Status::Responded)
    .with_parent(&call.id);
    m.metadata.insert(keys::TOOL_NAME.into(), name.into());
    m.metadata.insert(
        keys::CALL_ID.into(),
        call.meta_str(keys::CALL_ID).unwrap_or_default().into(),
    );
    m.metadata.insert(keys::TOOL_ERROR.into(), why.into());
    m.metadata.insert(keys::ERROR_KIND.into(), kind.into());
    m
}

/// The result of a call a person denied.
pub(crate) fn denied_result(call: &Message, reason: Option<&str>) -> Message {
    let name = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
    let why = match reason {
        Some(r) => format!("the call to `{name}` was not approved: {r}"),
        None => format!("the call to `{name}` was not approved"),
    };
    refused_result(call, &why, "denied")
}

/// The result of a call of an older prompt, whose user moved on (a newer
/// prompt) before its turn resumed: as decided, if it was (`verdict`),
/// and it never runs.
pub(crate) fn moved_on_result(call: &Message, verdict: Option<&Verdict>) -> Message {
    let name = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
    match verdict {
        None => {
            let why = format!("the call to `{name}` was not approved: the user moved on");
            refused_result(call, &why, "denied")
        }
        Some(Verdict::Deny(reason)) => denied_result(call, reason.as_deref()),
        Some(Verdict::Approve) => {
            let why = format!(
                "the call to `{name}` was approved, but did not run: the user moved on to a newer prompt first"
            );
            refused_result(call, &why, "interrupted")
        }
    }
}

/// The calls of `prompt` in `history` that wait for a person and have
/// no result.
pub(crate) fn waiting<'h>(history: &'h [Message], prompt: &str) -> Vec<&'h Message> {
    unanswered(history, prompt, is_held)
}

/// The calls of `prompt` in `history` that have no result and are `which`.
fn unanswered<'h>(
    history: &'h [Message],
    prompt: &str,
    which: impl Fn(&Message) -> bool,
) -> Vec<&'h Message> {
    let answered: std::collections::HashSet<&str> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .filter_map(|m| m.parent_id.as_deref())
        .collect();
    history
        .iter()
        .filter(|m| {
            m.kind == MessageType::ToolCall
                && which(m)
                && m.parent_id.as_deref() == Some(prompt)
                && !answered.contains(m.id.as_str())
        })
        .collect()
}

/// Puts the paused turn of `prompt` back for any worker to take
/// (`awaiting_approval` → `pending_agent`) once every call it waits on
/// is decided (its calls are stored after `after`). Both a decider and
/// the pausing turn call it after their own write, so whichever comes
/// second finds every decision and the pause (the store orders the two),
/// and the conditional update puts it back once.
pub(crate) async fn put_back_if_decided(
    store: &dyn Store,
    session: &str,
    prompt: &str,
    after: Seq,
) -> Result<PutBack, StoreError> {
    let history: Vec<Message> = store
        .history_after(session, after)
        .await?
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    let undecided = undecided_in(store, &history, prompt).await?;
    let put_back = undecided == 0
        && store
            .transition(prompt, &[Status::AwaitingApproval], Status::PendingAgent)
            .await?;
    Ok(PutBack {
        undecided,
        put_back,
    })
}

/// How many decisions the turn of `prompt` (whose messages `history`
/// holds) waits for: its held calls' not yet given, and those the agents
/// it called wait for, at every depth.
pub(crate) async fn undecided_in(
    store: &dyn Store,
    history: &[Message],
    prompt: &str,
) -> Result<usize, StoreError> {
    let mut undecided = 0;
    for call in waiting(history, prompt) {
        if store.get(&decision_id(&call.id)).await?.is_none() {
            undecided += 1;
        }
    }
    for child in paused_children(store, history, prompt).await? {
        // A nested session holds one prompt and its turn: read whole.
        let history: Vec<Message> = store
            .history_after(&child.session_id, 0)
            .await?
            .into_iter()
            .map(|(_, m)| m)
            .collect();
        undecided += Box::pin(undecided_in(store, &history, &child.id)).await?;
    }
    Ok(undecided)
}

/// The prompts of the agents that `prompt`'s open calls (in `history`)
/// run, paused for a person.
pub(crate) async fn paused_children(
    store: &dyn Store,
    history: &[Message],
    prompt: &str,
) -> Result<Vec<Message>, StoreError> {
    let mut paused = Vec::new();
    for call in unanswered(history, prompt, |m| !is_held(m)) {
        if let Some(child) = store.get(&child_prompt(call)).await?
            && child.status == Status::AwaitingApproval
        {
            paused.push(child);
        }
    }
    Ok(paused)
}

/// What [`put_back_if_decided`] found and did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PutBack {
    /// The turn's calls still waiting for a decision.
    pub(crate) undecided: usize,
    /// Whether this call put the turn back (else it was not paused, or
    /// someone else did).
    pub(crate) put_back: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call() -> Message {
        let mut m = Message::tool_call(
            "s",
            &ToolRequest::new("c1", "delete_note", json!({"title": "x"})),
        )
        .with_parent("prompt");
        m.metadata.insert(HELD.into(), "asked".into());
        m
    }

    #[test]
    fn a_decision_is_keyed_by_its_call_and_reads_back() {
        let call = call();
        assert!(is_held(&call));
        let d = decision(&call, &Verdict::Deny(Some("not today".into())));
        assert_eq!(d.id, format!("{}.decision", call.id));
        assert!(is_decision(&d));
        assert_eq!(verdict_of(&d), Verdict::Deny(Some("not today".into())));
        let d = decision(&call, &Verdict::Approve);
        assert_eq!(verdict_of(&d), Verdict::Approve);
        let pending = PendingApproval::of(&call);
        assert_eq!(
            (
                pending.call_id.as_str(),
                pending.tool.as_str(),
                pending.prompt_id.as_str()
            ),
            ("c1", "delete_note", "prompt")
        );
        assert_eq!(pending.arguments, json!({"title": "x"}));
    }

    #[test]
    fn a_denied_result_carries_the_reason_for_the_model() {
        let r = denied_result(&call(), Some("keep it"));
        assert_eq!(r.kind, MessageType::ToolResult);
        assert!(r.content.contains("not approved: keep it"), "{}", r.content);
        assert!(
            moved_on_result(&call(), None)
                .content
                .contains("not approved: the user moved on")
        );
        let denied = Verdict::Deny(Some("keep it".into()));
        let r = moved_on_result(&call(), Some(&denied));
        assert!(r.content.contains("not approved: keep it"), "{}", r.content);
        let r = moved_on_result(&call(), Some(&Verdict::Approve));
        assert!(
            r.content.contains("approved, but did not run"),
            "{}",
            r.content
        );
    }
}
