//! [`TurnModel`]: the turn's model, for tools that ask it something.

use std::sync::Arc;

use kesoku_core::{ContentBlock, Message, MessageType, Role, Status, keys};

use kesoku_llm::{AssistantTurn, Llm, LlmError, LlmOptions};

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
#[derive(Clone)]
pub struct TurnModel {
    llm: Arc<dyn Llm>,
    options: LlmOptions,
}

impl std::fmt::Debug for TurnModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnModel")
            .field("provider", &self.llm.provider())
            .field("model", &self.options.model)
            .finish()
    }
}

impl TurnModel {
    /// `llm` with these options.
    pub fn new(llm: Arc<dyn Llm>, options: LlmOptions) -> Self {
        TurnModel { llm, options }
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
        // On the session's own id, so a scripted model plays its next
        // turn; a backend then encodes the conversation's next request
        // whole once, as this one is not its continuation.
        self.llm
            .complete(session_id, std::slice::from_ref(&message), &[], &options)
            .await
    }
}
