//! [`LlmOptions`] and [`ToolChoice`]: what one model call asks for besides
//! the history and the tools.

/// Whether and which tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Options of one model call.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmOptions {
    /// The model, such as `claude-sonnet-4-5`.
    pub model: String,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// System instructions, before any `system` messages of the history.
    pub system: Option<String>,
}

impl LlmOptions {
    /// Options for `model` with 4,096 output tokens and automatic tool choice.
    pub fn new(model: impl Into<String>) -> Self {
        LlmOptions {
            model: model.into(),
            max_tokens: 4096,
            temperature: None,
            tool_choice: ToolChoice::Auto,
            system: None,
        }
    }
}
