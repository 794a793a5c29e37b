//! Handing a session to another agent, as the OpenAI Agents SDK's
//! handoffs do: a `transfer_to_<agent>` tool per target; once the model
//! calls one, the turn goes on with that agent's instructions, tools and
//! model, and so does every later turn of the session. Where it stands
//! is stored: each message a turn posts in a session that was ever handed
//! off names its agent (`agent` in its metadata), the handoff's result
//! the agent it goes to; the newest such message names the session's
//! agent, for whichever worker takes its next prompt. No IO.

use kesoku_core::{DynamicTool, Message, RegistryError, Tool, ToolOutput, keys};
use serde_json::json;

/// The metadata key naming the agent a message was posted by (or, on a
/// handoff's result, handed to).
pub(crate) const AGENT: &str = "agent";

/// The name of the tool that hands the conversation to `agent`.
pub(crate) fn tool_name(agent: &str) -> String {
    let safe: String = agent
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("transfer_to_{safe}")
}

/// The tool that hands the conversation to `agent`.
pub(crate) fn tool(agent: &str, description: &str) -> Result<Tool, RegistryError> {
    let answer = format!("Transferred to `{agent}`, which answers from here.");
    let tool = DynamicTool::new(
        tool_name(agent),
        format!("Hands the conversation to the agent `{agent}`: {description}"),
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        move |_, _| {
            let answer = answer.clone();
            async move { Ok(ToolOutput::new(answer.into())) }
        },
    )?;
    Ok(tool.into())
}

/// The agent the newest message of `history` that names one names.
pub(crate) fn owner(history: &[Message]) -> Option<&str> {
    history
        .iter()
        .rev()
        .find_map(|m| m.metadata.get(AGENT).and_then(|a| a.as_str()))
}

/// The agents that had the turn of `prompt` so far, in order: those
/// named by the messages after it in `history`.
pub(crate) fn visited(history: &[Message], prompt: &str) -> Vec<String> {
    let Some(at) = history.iter().rposition(|m| m.id == prompt) else {
        return Vec::new();
    };
    let mut had: Vec<String> = Vec::new();
    for m in &history[at + 1..] {
        if let Some(agent) = m.metadata.get(AGENT).and_then(|a| a.as_str())
            && !had.iter().any(|h| h == agent)
        {
            had.push(agent.to_owned());
        }
    }
    had
}

/// The target of the first handoff among `results` (by the tool each
/// answers, found in `handoffs`: tool name to agent), and its place;
/// errors hand nothing off.
pub(crate) fn first<'h>(
    results: &[Message],
    handoffs: &'h std::collections::HashMap<String, String>,
) -> Option<(usize, &'h str)> {
    results.iter().enumerate().find_map(|(i, r)| {
        if r.metadata.contains_key(keys::TOOL_ERROR) {
            return None;
        }
        let tool = r.meta_str(keys::TOOL_NAME)?;
        handoffs.get(tool).map(|agent| (i, agent.as_str()))
    })
}

/// Refuses each handoff among `results` after the one at `first`: a
/// step hands the conversation to one agent, and a result saying it was
/// handed to another would mislead the model.
pub(crate) fn refuse_later(
    results: &mut [Message],
    first: usize,
    handoffs: &std::collections::HashMap<String, String>,
) {
    let Some(made) = results[first].meta_str(keys::TOOL_NAME).map(str::to_owned) else {
        return;
    };
    for r in results.iter_mut().skip(first + 1) {
        let tool = r.meta_str(keys::TOOL_NAME).unwrap_or_default();
        if r.metadata.contains_key(keys::TOOL_ERROR) || !handoffs.contains_key(tool) {
            continue;
        }
        let error = format!(
            "one handoff a step: only the first, `{made}`, was taken up; answer the user, or hand off in a later step"
        );
        refuse(r, &error, "handoff_second");
    }
}

/// `result` turned into the error that refuses handing off to `agent`,
/// which this turn was handed to already (`visited`, in order).
pub(crate) fn refuse_cycle(result: &mut Message, agent: &str, visited: &[String]) {
    let path: Vec<&str> = visited.iter().map(String::as_str).chain([agent]).collect();
    let error = format!(
        "handing the conversation to `{agent}` again would go round in a cycle within this turn ({}); answer the user instead",
        path.join(" > ")
    );
    refuse(result, &error, "handoff_cycle");
}

/// `result` turned into an error saying `error`, of `kind`: the handoff
/// it answered hands nothing over.
pub(crate) fn refuse(result: &mut Message, error: &str, kind: &str) {
    result.metadata.remove(keys::TOOL_RESULT);
    result
        .metadata
        .insert(keys::TOOL_ERROR.into(), error.into());
    result.metadata.insert(keys::ERROR_KIND.into(), kind.into());
    result.content = format!("Error: {error}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use kesoku_core::{MessageType, Role};

    fn named(agent: Option<&str>) -> Message {
        let mut m = Message::new("s", Role::Assistant, MessageType::Text, "x");
        if let Some(a) = agent {
            m.metadata.insert(AGENT.into(), a.into());
        }
        m
    }

    #[test]
    fn the_newest_message_naming_an_agent_names_the_owner() {
        assert_eq!(owner(&[named(None)]), None);
        let h = [named(Some("a")), named(Some("b")), named(None)];
        assert_eq!(owner(&h), Some("b"));
    }

    #[test]
    fn tool_names_keep_to_what_models_call() {
        assert_eq!(tool_name("billing"), "transfer_to_billing");
        assert_eq!(tool_name("Help desk!"), "transfer_to_Help_desk_");
    }

    #[test]
    fn a_cycle_is_refused_naming_the_path() {
        let mut r = named(None);
        r.metadata.insert(keys::TOOL_RESULT.into(), "ok".into());
        refuse_cycle(&mut r, "a", &["a".into(), "b".into()]);
        assert_eq!(
            r.content,
            "Error: handing the conversation to `a` again would go round in a cycle within this turn (a > b > a); answer the user instead"
        );
        assert!(!r.metadata.contains_key(keys::TOOL_RESULT));
    }
}
