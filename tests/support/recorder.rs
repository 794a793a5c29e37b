//! A scripted model that records a word of every message of each call it
//! gets (its text, its id...): what the model was shown, turn by turn.

use std::sync::{Arc, Mutex};

use kesoku::Message;
use kesoku::llm::{
    AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ScriptedLlm, ToolDeclaration,
};

/// Each call's messages, as `Recorder::pick` read them.
pub(crate) type Seen = Arc<Mutex<Vec<Vec<String>>>>;

pub(crate) struct Recorder {
    script: ScriptedLlm,
    seen: Seen,
    pick: fn(&Message) -> String,
}

impl Recorder {
    /// Follows `script`, recording what `pick` reads of each message.
    pub(crate) fn new(script: ScriptedLlm, seen: &Seen, pick: fn(&Message) -> String) -> Self {
        Recorder {
            script,
            seen: Arc::clone(seen),
            pick,
        }
    }
}

impl Llm for Recorder {
    fn provider(&self) -> &'static str {
        "Recorder"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.seen
            .lock()
            .unwrap()
            .push(messages.iter().map(self.pick).collect());
        self.script.complete(session_id, messages, tools, options)
    }
}
