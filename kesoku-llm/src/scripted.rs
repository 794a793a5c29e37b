//! [`ScriptedLlm`]: a deterministic model that plays a script, for tests
//! and the offline demo.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kesoku_core::{Message, MessageType, Role, ToolRequest, keys};
use serde_json::Value;

use crate::{AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ToolDeclaration, Usage};

const PROVIDER: &str = "Scripted";

/// A model that plays a script: an array of turns, in order, for each
/// session.
///
/// A turn is `{"tool_calls": [{"id", "name", "arguments"}]}` or
/// `{"text": "..."}`, with an optional `"usage"` (a [`Usage`](crate::Usage)
/// as JSON: `{"input_tokens", "output_tokens"}`) that it reports. In a text turn, `{{ID}}` is replaced by the content
/// of the tool result whose call id is `ID`, found in the history the
/// model is given. When a session's turns run out, the call fails with an
/// error saying so. A call dropped before it answers (an interrupted
/// turn) plays no turn.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use kesoku_llm::{Llm, LlmOptions, ScriptedLlm};
///
/// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hello."}])).unwrap();
/// let turn = model.complete("s", &[], &[], &LlmOptions::new("any")).await.unwrap();
/// assert_eq!(turn.text, "Hello.");
/// let done = model.complete("s", &[], &[], &LlmOptions::new("any")).await.unwrap_err();
/// assert!(done.to_string().contains("has no turn 2"));
/// # });
/// ```
#[derive(Debug)]
pub struct ScriptedLlm {
    turns: Vec<(Scripted, Usage)>,
    /// How many turns each session has played.
    played: Mutex<HashMap<String, usize>>,
    latency: Duration,
    per_prompt: bool,
}

#[derive(Debug, Clone)]
enum Scripted {
    Calls(Vec<ToolRequest>),
    Text(String),
}

/// Why a script cannot be played.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid script: {0}")]
pub struct ScriptError(String);

impl ScriptedLlm {
    /// Reads a script: a JSON array of turns.
    pub fn from_json(script: Value) -> Result<Self, ScriptError> {
        let Value::Array(turns) = script else {
            return Err(ScriptError(format!(
                "a script is a JSON array of turns, got {}",
                kind(&script)
            )));
        };
        let turns = turns
            .iter()
            .enumerate()
            .map(|(i, t)| read_turn(i + 1, t))
            .collect::<Result<_, _>>()?;
        Ok(ScriptedLlm {
            turns,
            played: Mutex::new(HashMap::new()),
            latency: Duration::ZERO,
            per_prompt: false,
        })
    }

    /// Makes every answer wait `latency` first, as a real model would.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Plays the script from its start for each user prompt, at the turn
    /// the history says: one more than the model's replies since the last
    /// user message. Nothing is kept between calls, so any process (any
    /// of several agents sharing a store, or one that resumes a turn after
    /// another died) plays the same turn from the same history.
    ///
    /// Without it, a script counts the calls made in its own process: a
    /// turn that paused for approval in one process and resumes in another
    /// (`Agent::resume`, or a worker's `serve`) would start that process's
    /// copy of the script from its first reply. One script shared by the
    /// processes of a test needs `per_prompt`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use kesoku_core::{Message, MessageType, Role};
    /// use kesoku_llm::{Llm, LlmOptions, ScriptedLlm};
    ///
    /// let model = ScriptedLlm::from_json(serde_json::json!([{"text": "Hello."}]))
    ///     .unwrap()
    ///     .per_prompt();
    /// let options = LlmOptions::new("any");
    /// let prompt = |text| Message::new("s", Role::User, MessageType::Text, text);
    /// for history in [vec![prompt("hi")], vec![prompt("hi"), prompt("again")]] {
    ///     let turn = model.complete("s", &history, &[], &options).await.unwrap();
    ///     assert_eq!(turn.text, "Hello.");
    /// }
    /// # });
    /// ```
    #[must_use]
    pub fn per_prompt(mut self) -> Self {
        self.per_prompt = true;
        self
    }

    /// The session's next turn number (1-based), counting it as played.
    fn next_turn(&self, session: &str) -> usize {
        let mut played = self.played.lock().unwrap_or_else(PoisonError::into_inner);
        let n = played.entry(session.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    fn play(&self, session: &str, history: &[Message]) -> Result<AssistantTurn, LlmError> {
        let (n, history) = if self.per_prompt {
            let prompt = history
                .iter()
                .rposition(|m| m.role == Role::User)
                .map_or(0, |i| i + 1);
            let since = &history[prompt..];
            (replies(since) + 1, since)
        } else {
            (self.next_turn(session), history)
        };
        let Some((turn, usage)) = self.turns.get(n - 1) else {
            return Err(LlmError::Config {
                provider: PROVIDER,
                message: format!(
                    "the script has no turn {n} for session `{session}`: it has {} turn(s), all played",
                    self.turns.len()
                ),
            });
        };
        Ok(match turn {
            Scripted::Text(template) => {
                let text = fill(template, history).map_err(|id| LlmError::Config {
                    provider: PROVIDER,
                    message: format!(
                        "turn {n} quotes {{{{{id}}}}}, but the history has no result of a tool call with id `{id}`"
                    ),
                })?;
                AssistantTurn::new(session, PROVIDER, text, [])
            }
            Scripted::Calls(calls) => AssistantTurn::new(session, PROVIDER, "", calls.clone()),
        }
        .with_usage(*usage))
    }
}

/// Reads a script from JSON text, such as a file's contents.
impl std::str::FromStr for ScriptedLlm {
    type Err = ScriptError;

    fn from_str(script: &str) -> Result<Self, ScriptError> {
        let value = serde_json::from_str(script)
            .map_err(|e| ScriptError(format!("the script is not JSON: {e}")))?;
        Self::from_json(value)
    }
}

impl Llm for ScriptedLlm {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        _tools: &'a [ToolDeclaration],
        _options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        Box::pin(async move {
            if !self.latency.is_zero() {
                tokio::time::sleep(self.latency).await;
            }
            self.play(session_id, messages)
        })
    }
}

fn read_turn(n: usize, turn: &Value) -> Result<(Scripted, Usage), ScriptError> {
    let err = |what: String| ScriptError(format!("turn {n}: {what}"));
    let usage = match turn.get("usage") {
        None => Usage::default(),
        Some(usage) => serde_json::from_value(usage.clone())
            .map_err(|e| err(format!("`usage` does not read: {e}")))?,
    };
    let scripted = match (turn.get("text"), turn.get("tool_calls")) {
        (Some(Value::String(text)), None) => Ok(Scripted::Text(text.clone())),
        (Some(other), None) => Err(err(format!("`text` must be a string, got {}", kind(other)))),
        (None, Some(Value::Array(calls))) if !calls.is_empty() => calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let field = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| err(format!("tool_calls[{i}] needs a string `{k}`")))
                };
                let arguments = c
                    .get("arguments")
                    .cloned()
                    .unwrap_or(Value::Object(serde_json::Map::new()));
                Ok(ToolRequest::new(field("id")?, field("name")?, arguments))
            })
            .collect::<Result<_, _>>()
            .map(Scripted::Calls),
        (None, Some(_)) => Err(err("`tool_calls` must be a non-empty array".into())),
        (Some(_), Some(_)) => Err(err("a turn has `text` or `tool_calls`, not both".into())),
        (None, None) => Err(err(format!(
            "a turn is {{\"text\": ...}} or {{\"tool_calls\": [...]}}, got {turn}"
        ))),
    }?;
    Ok((scripted, usage))
}

/// `template` with each `{{ID}}` replaced by the content of the result of
/// call `ID` in `history`; `Err(ID)` for a call without one.
/// How many model replies `messages` hold: runs of assistant messages,
/// each ended by the results of its calls.
fn replies(messages: &[Message]) -> usize {
    let mut count = 0;
    let mut in_reply = false;
    for m in messages {
        let assistant = m.role == Role::Assistant;
        if assistant && !in_reply {
            count += 1;
        }
        if assistant || m.role == Role::Tool {
            in_reply = assistant;
        }
    }
    count
}

fn fill(template: &str, history: &[Message]) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let id = &rest[start + 2..start + 2 + len];
        let result = history
            .iter()
            .rev()
            .find(|m| m.kind == MessageType::ToolResult && m.meta_str(keys::CALL_ID) == Some(id))
            .ok_or_else(|| id.to_owned())?;
        out.push_str(&rest[..start]);
        out.push_str(&result.content);
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scripts_are_checked_when_read() {
        let bad = [
            (json!({"text": "x"}), "a JSON array"),
            (json!([{"text": 1}]), "turn 1: `text` must be a string"),
            (
                json!([{"text": "a", "usage": {"input_tokens": -1}}]),
                "turn 1: `usage` does not read",
            ),
            (
                json!([{"text": "a"}, {"tool_calls": []}]),
                "turn 2: `tool_calls` must be a non-empty array",
            ),
            (
                json!([{"tool_calls": [{"name": "t"}]}]),
                "tool_calls[0] needs a string `id`",
            ),
            (json!([{"say": "hi"}]), "a turn is"),
        ];
        for (script, message) in bad {
            let e = ScriptedLlm::from_json(script).unwrap_err().to_string();
            assert!(e.contains(message), "{e}");
        }
    }

    #[test]
    fn placeholders_quote_results() {
        let call = ToolRequest::new("c1", "add", json!({}));
        let mut result = Message::new("s", Role::Tool, MessageType::ToolResult, "5");
        result.metadata.insert(keys::CALL_ID.into(), "c1".into());
        let history = [Message::tool_call("s", &call), result];
        assert_eq!(fill("sum: {{c1}}!", &history).unwrap(), "sum: 5!");
        assert_eq!(fill("{{c2}}", &history).unwrap_err(), "c2");
        assert_eq!(fill("no {{ end", &history).unwrap(), "no {{ end");
    }
}
