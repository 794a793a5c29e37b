//! The agent's spans, named and filled as OpenTelemetry's GenAI semantic
//! conventions say (`invoke_agent {name}` for a turn, `chat {model}` for a
//! model call; `execute_tool {name}` is the runner's), through `tracing`:
//! a bridge such as tracing-opentelemetry reads `otel.name` and
//! `otel.kind`. Without a subscriber that wants them, no field is built.
//!
//! Nothing here ever reads a key or a request's headers. Content (the
//! messages sent and received) is recorded only when the agent was built
//! with [`capture_content`](super::AgentBuilder::capture_content).

use std::time::Duration;

use kesoku_core::Message;
use kesoku_llm::{AssistantTurn, LlmError, LlmOptions, StopReason};
use tracing::Span;
use tracing::field::Empty;

/// The conventions' name of a provider (`gen_ai.provider.name`), from the
/// name its backend gives; others lowercased.
pub(crate) fn provider_name(provider: &str) -> String {
    match provider {
        "Claude" => "anthropic".into(),
        "OpenAI" => "openai".into(),
        "Gemini" => "gcp.gemini".into(),
        other => other.to_lowercase(),
    }
}

/// The span of one turn of `session`, by the agent `name`.
pub(crate) fn turn_span(name: &str, provider: &str, session: &str, prompt: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = format!("invoke_agent {name}"),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = name,
        gen_ai.provider.name = provider_name(provider),
        gen_ai.conversation.id = session,
        error.type = Empty,
        // kesoku's own.
        session = session,
        message_id = prompt,
        steps = Empty,
        status = Empty,
    )
}

/// The span of one model call, step `step` of a turn of `session`.
pub(crate) fn model_span(
    provider: &str,
    options: &LlmOptions,
    session: &str,
    step: usize,
    stream: bool,
) -> Span {
    tracing::info_span!(
        "chat",
        otel.name = format!("chat {}", options.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(provider),
        gen_ai.request.model = %options.model,
        gen_ai.request.max_tokens = options.max_tokens,
        gen_ai.request.stream = stream,
        gen_ai.conversation.id = session,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_write.input_tokens = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        // kesoku's own.
        step,
    )
}

/// Records what the model sent back.
pub(crate) fn record_reply(span: &Span, turn: &AssistantTurn, content: bool) {
    if span.is_disabled() {
        return;
    }
    if let Some(id) = &turn.response_id {
        span.record("gen_ai.response.id", id.as_str());
    }
    // A list in OpenTelemetry, which `tracing` cannot carry: set on the
    // span's OpenTelemetry side when there is one, else as text.
    #[cfg(feature = "otel")]
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(opentelemetry::Array::String(vec![
                finish_reason(&turn.stop_reason).into(),
            ])),
        );
    }
    #[cfg(not(feature = "otel"))]
    span.record(
        "gen_ai.response.finish_reasons",
        finish_reason(&turn.stop_reason),
    );
    span.record("gen_ai.usage.input_tokens", turn.usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", turn.usage.output_tokens);
    if let Some(read) = turn.usage.cache_read_tokens {
        span.record("gen_ai.usage.cache_read.input_tokens", read);
    }
    if let Some(written) = turn.usage.cache_write_tokens {
        span.record("gen_ai.usage.cache_write.input_tokens", written);
    }
    if content {
        let output: Vec<&Message> = turn.messages().collect();
        span.record("gen_ai.output.messages", messages_json(&output));
    }
}

/// Records what the model was sent, when content is captured.
pub(crate) fn record_input(span: &Span, view: &[Message]) {
    if span.is_disabled() {
        return;
    }
    let input: Vec<&Message> = view.iter().collect();
    span.record("gen_ai.input.messages", messages_json(&input));
}

/// Records a failed call.
pub(crate) fn record_error(span: &Span, error: &LlmError) {
    span.record("error.type", error_type(error));
}

/// Records how long the first piece of a streamed reply took, in seconds.
pub(crate) fn record_first_chunk(span: &Span, after: Duration) {
    span.record("gen_ai.response.time_to_first_chunk", after.as_secs_f64());
}

/// The reason the model stopped, as the conventions list it.
fn finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence => "stop".into(),
        StopReason::ToolUse => "tool_call".into(),
        StopReason::MaxTokens => "length".into(),
        StopReason::Refusal => "content_filter".into(),
        StopReason::Other(other) => other.clone(),
        _ => "unknown".into(),
    }
}

/// The class of a failure (`error.type`): the HTTP status the provider
/// answered with, else what kind of failure it was.
pub(crate) fn error_type(error: &LlmError) -> String {
    match error {
        LlmError::Api { status, .. } => status.to_string(),
        LlmError::ContextOverflow { .. } => "context_overflow".into(),
        LlmError::Transport { .. } => "transport".into(),
        LlmError::Malformed { .. } => "malformed_response".into(),
        LlmError::Stream { .. } => "stream".into(),
        LlmError::EventTooLarge { .. } => "event_too_large".into(),
        LlmError::CallTimeout { .. } => "timeout".into(),
        LlmError::Config { .. } => "config".into(),
        LlmError::UnsupportedSchema { .. } | LlmError::UnsupportedOutput { .. } => {
            "unsupported_schema".into()
        }
        LlmError::CrossOriginRedirect { .. } => "cross_origin_redirect".into(),
        _ => "_OTHER".into(),
    }
}

/// Messages as the conventions' JSON: `[{role, parts: [...]}]`, text and
/// tool calls and results as parts.
fn messages_json(messages: &[&Message]) -> String {
    use kesoku_core::{MessageType, Role, keys};
    let items: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
                Role::Tool => "tool",
            };
            let part = match m.kind {
                MessageType::ToolCall => serde_json::json!({
                    "type": "tool_call",
                    "id": m.meta_str(keys::CALL_ID),
                    "name": m.meta_str(keys::TOOL_NAME),
                    "arguments": m.metadata.get(keys::ARGUMENTS),
                }),
                MessageType::ToolResult => serde_json::json!({
                    "type": "tool_call_response",
                    "id": m.meta_str(keys::CALL_ID),
                    "response": m.content,
                }),
                _ => serde_json::json!({"type": "text", "content": m.content}),
            };
            serde_json::json!({"role": role, "parts": [part]})
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// The GenAI metrics (`gen_ai.client.operation.duration` in seconds,
/// `gen_ai.client.token.usage` in tokens), recorded through an
/// OpenTelemetry meter with the `otel` feature; nothing without it.
#[derive(Debug)]
pub(crate) struct Metrics {
    #[cfg(feature = "otel")]
    duration: opentelemetry::metrics::Histogram<f64>,
    #[cfg(feature = "otel")]
    tokens: opentelemetry::metrics::Histogram<u64>,
}

impl Metrics {
    /// The instruments, from `meter` (the global one by default).
    #[cfg(feature = "otel")]
    pub(crate) fn new(meter: &opentelemetry::metrics::Meter) -> Self {
        // The conventions' advice for each histogram's buckets.
        let seconds = (0..14).map(|i| 0.01 * f64::from(1_u32 << i)).collect();
        let tokens = (0..14).map(|i| f64::from(1_u32 << (2 * i))).collect();
        Metrics {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration.")
                .with_boundaries(seconds)
                .build(),
            tokens: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(tokens)
                .build(),
        }
    }

    /// No instruments.
    #[cfg(not(feature = "otel"))]
    pub(crate) fn new() -> Self {
        Metrics {}
    }

    /// A model call of `provider`'s `model` took `took`, and gave `reply`.
    #[cfg_attr(not(feature = "otel"), allow(clippy::unused_self))]
    pub(crate) fn model_call(
        &self,
        provider: &str,
        model: &str,
        reply: &Result<AssistantTurn, LlmError>,
        took: Duration,
    ) {
        #[cfg(feature = "otel")]
        {
            use opentelemetry::KeyValue;
            let mut attributes = vec![
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.provider.name", provider_name(provider)),
                KeyValue::new("gen_ai.request.model", model.to_owned()),
            ];
            match reply {
                Ok(turn) => {
                    for (kind, count) in [
                        ("input", turn.usage.input_tokens),
                        ("output", turn.usage.output_tokens),
                    ] {
                        let mut with_kind = attributes.clone();
                        with_kind.push(KeyValue::new("gen_ai.token.type", kind));
                        self.tokens.record(count, &with_kind);
                    }
                }
                Err(e) => attributes.push(KeyValue::new("error.type", error_type(e))),
            }
            self.duration.record(took.as_secs_f64(), &attributes);
        }
        #[cfg(not(feature = "otel"))]
        let _ = (provider, model, reply, took);
    }

    /// The calls whose `results` came back: each one's duration.
    #[cfg_attr(not(feature = "otel"), allow(clippy::unused_self))]
    pub(crate) fn tool_calls(&self, results: &[Message]) {
        #[cfg(feature = "otel")]
        for result in results {
            use kesoku_core::keys;
            use opentelemetry::KeyValue;
            let Some(ms) = result
                .metadata
                .get(keys::DURATION_MS)
                .and_then(serde_json::Value::as_u64)
            else {
                continue;
            };
            let mut attributes = vec![
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new(
                    "gen_ai.tool.name",
                    result
                        .meta_str(keys::TOOL_NAME)
                        .unwrap_or_default()
                        .to_owned(),
                ),
            ];
            if let Some(kind) = result.meta_str(keys::ERROR_KIND) {
                let kind = if kind == "failed" { "tool_error" } else { kind };
                attributes.push(KeyValue::new("error.type", kind.to_owned()));
            }
            #[allow(clippy::cast_precision_loss)] // Milliseconds, far below 2^52.
            self.duration.record(ms as f64 / 1000.0, &attributes);
        }
        #[cfg(not(feature = "otel"))]
        let _ = results;
    }
}
