//! The ids a call of an agent offered as a tool is stored under: its own
//! session and that session's one prompt, both derived from the call, so
//! a call run again (a resumed turn, another worker) finds them. No IO.

use kesoku_core::{Message, keys};

/// The session of the agent that the call `call_id` of `tool`, in
/// `parent_session`, runs.
pub(crate) fn child_session(parent_session: &str, tool: &str, call_id: &str) -> String {
    format!("{parent_session}/{tool}/{call_id}")
}

/// The id of the one prompt of a nested `session`.
pub(crate) fn prompt_id(session: &str) -> String {
    format!("{session}/prompt")
}

/// The prompt of the agent that the stored `call` runs, if it runs one.
pub(crate) fn child_prompt(call: &Message) -> String {
    let tool = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
    prompt_id(&child_session(&call.session_id, tool, &call.id))
}
