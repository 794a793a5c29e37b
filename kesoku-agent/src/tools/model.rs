//! [`TurnModel`]: the turn's model, for tools that ask it something.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kesoku_core::{ContentBlock, Message, MessageType, Role, Status, keys};
use kesoku_llm::{AssistantTurn, Llm, LlmError, LlmOptions, Usage};
use tracing::Instrument as _;

use crate::telemetry::{self, Metrics};

/// The model a turn runs on, as a tool can reach it: an
/// [`Agent`](crate::Agent) puts one in the state of every turn's
/// [`ToolContext`](kesoku_core::ToolContext).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kesoku_core::{ContentBlock, ToolContext};
/// use kesoku_agent::tools::TurnModel;
/// use kesoku_llm::{LlmOptions, ScriptedLlm};
///
/// let llm = ScriptedLlm::from_json(serde_json::json!([{"text": "A red square."}])).unwrap();
/// let ctx = ToolContext::new("s").with_state(TurnModel::new(Arc::new(llm), LlmOptions::new("m")));
/// let model = ctx.state::<TurnModel>().unwrap();
/// let turn = model.ask("s", vec![ContentBlock::text("...")], "What is it?").await.unwrap();
/// assert_eq!(turn.text, "A red square.");
/// # });
/// ```
///
/// Each question is a model call like the agent's own: a `chat {model}`
/// span (a child of the tool's), the GenAI metrics, and, in an agent's
/// turn, its tokens counted into the session's usage
/// ([`Agent::usage`](crate::Agent::usage)), stored with the tool's result.
#[derive(Clone)]
pub struct TurnModel {
    llm: Arc<dyn Llm>,
    options: LlmOptions,
    metrics: Metrics,
    /// Whether spans carry the messages sent and received.
    capture_content: bool,
    /// The tokens spent per session, not yet stored: kept only for an
    /// agent, which takes them after each step's calls (a model made
    /// with [`new`](Self::new) has no one to take them).
    spent: Option<Arc<Mutex<HashMap<String, Usage>>>>,
}

impl std::fmt::Debug for TurnModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnModel")
            .field("provider", &self.llm.provider())
            .field("model", &self.options.model)
            .finish_non_exhaustive()
    }
}

impl TurnModel {
    /// `llm` with these options; its calls are recorded in the global
    /// meter provider's metrics (with the `otel` feature).
    pub fn new(llm: Arc<dyn Llm>, options: LlmOptions) -> Self {
        TurnModel {
            llm,
            options,
            metrics: Metrics::global(),
            capture_content: false,
            spent: None,
        }
    }

    /// An agent's: recorded with the agent's metrics, its content captured
    /// as the agent's is, its tokens kept for the agent to store.
    pub(crate) fn for_agent(
        llm: Arc<dyn Llm>,
        options: LlmOptions,
        metrics: Metrics,
        capture_content: bool,
    ) -> Self {
        TurnModel {
            llm,
            options,
            metrics,
            capture_content,
            spent: Some(Arc::default()),
        }
    }

    /// The tokens `session`'s calls spent since this was last asked, if
    /// any (an agent's only).
    pub(crate) fn take_usage(&self, session: &str) -> Option<Usage> {
        let spent = self.spent.as_ref()?;
        spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(session)
    }

    /// Asks the model one question outside the conversation: one user
    /// message with `blocks` and `prompt`, no tools and no system prompt.
    /// `session_id` names the session it is asked for.
    pub async fn ask(
        &self,
        session_id: &str,
        blocks: Vec<ContentBlock>,
        prompt: &str,
    ) -> Result<AssistantTurn, LlmError> {
        let mut message = Message::new(session_id, Role::User, MessageType::Text, prompt)
            .with_status(Status::Processed);
        if !blocks.is_empty() {
            let blocks = serde_json::to_value(blocks).map_err(|e| LlmError::Config {
                provider: self.llm.provider(),
                message: format!("content blocks cannot be encoded: {e}"),
            })?;
            message.metadata.insert(keys::CONTENT_BLOCKS.into(), blocks);
        }
        let mut options = self.options.clone();
        options.system = None;
        options.tool_choice = kesoku_llm::ToolChoice::Auto;
        let provider = self.llm.provider();
        let base_url = self.llm.base_url();
        let span = telemetry::model_span(provider, base_url, &options, session_id, None, false);
        let sent = std::slice::from_ref(&message);
        if self.capture_content {
            telemetry::record_input(&span, sent);
        }
        let asked = Instant::now();
        // On the session's own id, so a scripted model plays its next
        // turn; a backend then encodes the conversation's next request
        // whole once, as this one is not its continuation.
        let reply = self
            .llm
            .complete(session_id, sent, &[], &options)
            .instrument(span.clone())
            .await;
        self.metrics
            .model_call(provider, base_url, &options.model, &reply, asked.elapsed());
        match &reply {
            Ok(turn) => {
                telemetry::record_reply(&span, turn, self.capture_content);
                if let Some(spent) = &self.spent
                    && !turn.usage.is_empty()
                {
                    *spent
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .entry(session_id.to_owned())
                        .or_default() += turn.usage;
                }
            }
            Err(e) => telemetry::record_error(&span, e),
        }
        reply
    }
}
