//! [`LlmOptions`] and [`ToolChoice`]: what one model call asks for besides
//! the history and the tools.

use kesoku_core::OutputSchema;
use serde_json::{Map, Value};

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
#[non_exhaustive]
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
    /// The provider's own parameters, merged into the request body last
    /// (objects member by member, anything else replaced): Anthropic's
    /// `thinking`, OpenAI's `reasoning_effort`, Gemini's
    /// `generationConfig.thinkingConfig`. See
    /// [`with_param`](Self::with_param).
    pub provider_params: Map<String, Value>,
    /// The shape the answer must have, asked through the provider's
    /// structured-output mode: OpenAI's `response_format` (strict
    /// `json_schema`), Gemini's `responseMimeType` with
    /// `responseJsonSchema`, Claude's `output_config.format`. See
    /// [`with_output`](Self::with_output).
    pub output: Option<OutputSchema>,
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
            provider_params: Map::new(),
            output: None,
        }
    }

    /// Asks for an answer of this shape, through the provider's
    /// structured-output mode; the answer is the JSON text of the turn.
    /// A schema the provider cannot take fails the call with
    /// [`LlmError::UnsupportedOutput`](crate::LlmError::UnsupportedOutput)
    /// before anything is sent.
    ///
    /// ```
    /// use kesoku_core::OutputSchema;
    /// use kesoku_llm::LlmOptions;
    ///
    /// // A list at the root: Gemini takes it (OpenAI and Claude want an object).
    /// let options = LlmOptions::new("gemini-2.5-flash").with_output(OutputSchema::of::<Vec<String>>());
    /// assert_eq!(options.output.unwrap().name(), "output");
    /// ```
    #[must_use]
    pub fn with_output(mut self, output: OutputSchema) -> Self {
        self.output = Some(output);
        self
    }

    /// Adds a provider's own parameter to every request made with these
    /// options, merged into the body after kesoku's fields: an object
    /// merges member by member into what is there (so Gemini's
    /// `generationConfig` keeps its `maxOutputTokens`), any other value
    /// replaces it. The history's own key (`messages`, `contents`) cannot
    /// be set this way: a call with it fails with
    /// [`LlmError::Config`](crate::LlmError::Config).
    ///
    /// ```
    /// use kesoku_llm::LlmOptions;
    /// use serde_json::json;
    ///
    /// let claude = LlmOptions::new("claude-sonnet-4-5")
    ///     .with_param("thinking", json!({"type": "enabled", "budget_tokens": 2048}));
    /// let openai = LlmOptions::new("o4-mini").with_param("reasoning_effort", json!("low"));
    /// let gemini = LlmOptions::new("gemini-2.5-flash")
    ///     .with_param("generationConfig", json!({"thinkingConfig": {"thinkingBudget": 0}}));
    /// assert_eq!(openai.provider_params["reasoning_effort"], "low");
    /// # let _ = (claude, gemini);
    /// ```
    #[must_use]
    pub fn with_param(mut self, key: impl Into<String>, value: Value) -> Self {
        self.provider_params.insert(key.into(), value);
        self
    }
}

/// Merges `params` into `fields`: objects member by member, recursively;
/// anything else replaced.
pub(crate) fn merge_params(fields: &mut Map<String, Value>, params: &Map<String, Value>) {
    for (key, value) in params {
        match (fields.get_mut(key), value) {
            (Some(Value::Object(have)), Value::Object(add)) => merge_params(have, add),
            _ => {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_merge_objects_and_replace_the_rest() {
        let Value::Object(mut fields) = json!({
            "generationConfig": {"maxOutputTokens": 10, "stopSequences": ["x"]},
            "temperature": 1
        }) else {
            unreachable!()
        };
        let Value::Object(params) = json!({
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}, "stopSequences": []},
            "temperature": null,
            "new": [1]
        }) else {
            unreachable!()
        };
        merge_params(&mut fields, &params);
        assert_eq!(
            Value::Object(fields),
            json!({
                "generationConfig": {
                    "maxOutputTokens": 10,
                    "stopSequences": [],
                    "thinkingConfig": {"thinkingBudget": 0}
                },
                "temperature": null,
                "new": [1]
            })
        );
    }
}
