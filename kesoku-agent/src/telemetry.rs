//! The agent's spans, named and filled as OpenTelemetry's GenAI semantic
//! conventions say (`invoke_agent {name}` for a turn, `chat {model}` for a
//! model call, the agent's own and a tool's through
//! [`TurnModel`](crate::tools::TurnModel); `execute_tool {name}` is the
//! runner's), through `tracing`: a bridge such as tracing-opentelemetry
//! reads `otel.name`, `otel.kind` and `otel.status_code`. Without a
//! subscriber that wants them, no field is built.
//!
//! Counts are recorded as `i64`: tracing-opentelemetry has no `u64`
//! attribute, and would send one as text.
//!
//! Nothing here ever reads a key or a request's headers. Content (the
//! messages sent and received) is recorded only when the agent was built
//! with [`capture_content`](crate::AgentBuilder::capture_content).

use std::time::Duration;

use kesoku_core::Message;
use kesoku_llm::{AssistantTurn, LlmError, LlmOptions, StopReason};
use tracing::Span;
use tracing::field::Empty;

/// A count as an `i64` attribute (an OpenTelemetry int), saturating.
pub(crate) fn int(count: impl TryInto<i64>) -> i64 {
    count.try_into().unwrap_or(i64::MAX)
}

/// The conventions' name of a provider (`gen_ai.provider.name`), from the
/// name its backend gives; others lowercased.
pub(crate) fn provider_name(provider: &str) -> String {
    match provider {
        "Claude" => "anthropic".into(),
        "OpenAI" => "openai".into(),
        "Gemini" => "gcp.gemini".into(),
        "Azure OpenAI" => "azure.ai.openai".into(),
        other => other.to_lowercase(),
    }
}

/// The conventions' operation of a model call (`gen_ai.operation.name`):
/// Gemini's API is `generateContent`, the others' a chat.
pub(crate) fn operation_name(provider: &str) -> &'static str {
    if provider == "Gemini" {
        "generate_content"
    } else {
        "chat"
    }
}

/// The host and port of a base URL (`https://api.anthropic.com` is
/// `api.anthropic.com`, 443), as `server.address` and `server.port` name
/// the model's server; `None` for what does not read as an http(s) URL.
pub(crate) fn server_of(url: &str) -> Option<(String, u16)> {
    let (default_port, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (443, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (80, rest)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    // Credentials in a URL are never recorded.
    let authority = authority.rsplit('@').next()?;
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8080`.
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some((host.to_owned(), port))
}

/// Marks `span` failed, as OpenTelemetry's span status (tracing-opentelemetry
/// reads these two fields): backends such as Jaeger show it as an error.
pub(crate) fn record_status_error(span: &Span, description: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", description);
}

/// The span of one turn of `session`, by the agent `name`.
pub(crate) fn turn_span(name: &str, provider: &str, session: &str, prompt: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = format!("invoke_agent {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = name,
        gen_ai.provider.name = provider_name(provider),
        gen_ai.conversation.id = session,
        error.type = Empty,
        // kesoku's own, in its namespace.
        kesoku.session = session,
        kesoku.message_id = prompt,
        kesoku.steps = Empty,
        kesoku.status = Empty,
    )
}

/// The span of one model call of `session` to the model at `base_url`:
/// step `step` of a turn, or `None` for a tool's call.
pub(crate) fn model_span(
    provider: &str,
    base_url: Option<&str>,
    options: &LlmOptions,
    session: &str,
    step: Option<usize>,
    stream: bool,
) -> Span {
    let operation = operation_name(provider);
    let span = tracing::info_span!(
        "chat",
        otel.name = format!("{operation} {}", options.model),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = operation,
        gen_ai.provider.name = provider_name(provider),
        gen_ai.request.model = %options.model,
        gen_ai.request.max_tokens = i64::from(options.max_tokens),
        gen_ai.request.stream = stream,
        gen_ai.conversation.id = session,
        server.address = Empty,
        server.port = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        // kesoku's own, in its namespace.
        kesoku.step = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some((host, port)) = base_url.and_then(server_of) {
        span.record("server.address", host.as_str());
        span.record("server.port", i64::from(port));
    }
    if let Some(step) = step {
        span.record("kesoku.step", int(step));
    }
    span
}

/// Records what the model sent back.
pub(crate) fn record_reply(span: &Span, turn: &AssistantTurn, content: bool) {
    if span.is_disabled() {
        return;
    }
    if let Some(id) = &turn.response_id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(model) = &turn.response_model {
        span.record("gen_ai.response.model", model.as_str());
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
    span.record("gen_ai.usage.input_tokens", int(turn.usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", int(turn.usage.output_tokens));
    if let Some(read) = turn.usage.cache_read_tokens {
        span.record("gen_ai.usage.cache_read.input_tokens", int(read));
    }
    if let Some(written) = turn.usage.cache_write_tokens {
        span.record("gen_ai.usage.cache_creation.input_tokens", int(written));
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

/// Records a failed call: its class, and the span's status (an error,
/// described by the error's message, in which a provider's key is never
/// shown).
pub(crate) fn record_error(span: &Span, error: &LlmError) {
    if span.is_disabled() {
        return;
    }
    span.record("error.type", error_type(error));
    record_status_error(span, &kesoku_core::ErrorChain(error).to_string());
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

/// The GenAI metrics, recorded through an OpenTelemetry meter with the
/// `otel` feature (nothing without it): `gen_ai.client.operation.duration`
/// (seconds, each model call), `gen_ai.execute_tool.duration` (seconds,
/// each tool call) and `gen_ai.client.token.usage` (tokens). Cloned into
/// the agent's [`TurnModel`](crate::tools::TurnModel), whose calls are
/// recorded with the agent's.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    #[cfg(feature = "otel")]
    duration: opentelemetry::metrics::Histogram<f64>,
    #[cfg(feature = "otel")]
    tool_duration: opentelemetry::metrics::Histogram<f64>,
    #[cfg(feature = "otel")]
    tokens: opentelemetry::metrics::Histogram<u64>,
}

impl Metrics {
    /// The instruments, from `meter` (the global one by default).
    #[cfg(feature = "otel")]
    pub(crate) fn new(meter: &opentelemetry::metrics::Meter) -> Self {
        // The conventions' advice for each histogram's buckets.
        let seconds: Vec<f64> = (0..14).map(|i| 0.01 * f64::from(1_u32 << i)).collect();
        let tokens = (0..14).map(|i| f64::from(1_u32 << (2 * i))).collect();
        Metrics {
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration.")
                .with_boundaries(seconds.clone())
                .build(),
            tool_duration: meter
                .f64_histogram("gen_ai.execute_tool.duration")
                .with_unit("s")
                .with_description("GenAI tool execution duration.")
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

    /// The instruments from the global meter provider, as it is now.
    #[cfg(feature = "otel")]
    pub(crate) fn global() -> Self {
        Self::new(&opentelemetry::global::meter("kesoku"))
    }

    /// No instruments.
    #[cfg(not(feature = "otel"))]
    pub(crate) fn new() -> Self {
        Metrics {}
    }

    /// No instruments.
    #[cfg(not(feature = "otel"))]
    pub(crate) fn global() -> Self {
        Metrics {}
    }

    /// A model call of `provider`'s `model` (at `base_url`) took `took`,
    /// and gave `reply`.
    #[cfg_attr(not(feature = "otel"), allow(clippy::unused_self))]
    pub(crate) fn model_call(
        &self,
        provider: &str,
        base_url: Option<&str>,
        model: &str,
        reply: &Result<AssistantTurn, LlmError>,
        took: Duration,
    ) {
        #[cfg(feature = "otel")]
        {
            use opentelemetry::KeyValue;
            let mut attributes = vec![
                KeyValue::new("gen_ai.operation.name", operation_name(provider)),
                KeyValue::new("gen_ai.provider.name", provider_name(provider)),
                KeyValue::new("gen_ai.request.model", model.to_owned()),
            ];
            if let Some((host, port)) = base_url.and_then(server_of) {
                attributes.push(KeyValue::new("server.address", host));
                attributes.push(KeyValue::new("server.port", i64::from(port)));
            }
            match reply {
                Ok(turn) => {
                    if let Some(model) = &turn.response_model {
                        attributes.push(KeyValue::new("gen_ai.response.model", model.clone()));
                    }
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
        let _ = (provider, base_url, model, reply, took);
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
                KeyValue::new("gen_ai.tool.type", "function"),
            ];
            if let Some(kind) = result.meta_str(keys::ERROR_KIND) {
                let kind = if kind == "failed" { "tool_error" } else { kind };
                attributes.push(KeyValue::new("error.type", kind.to_owned()));
            }
            #[allow(clippy::cast_precision_loss)] // Milliseconds, far below 2^52.
            self.tool_duration.record(ms as f64 / 1000.0, &attributes);
        }
        #[cfg(not(feature = "otel"))]
        let _ = results;
    }
}

#[cfg(test)]
mod tests {
    use super::server_of;

    #[test]
    fn a_base_url_names_its_server() {
        let cases = [
            (
                "https://api.anthropic.com",
                Some(("api.anthropic.com", 443)),
            ),
            ("http://127.0.0.1:8080/v1", Some(("127.0.0.1", 8080))),
            ("http://[::1]:11434/v1", Some(("::1", 11434))),
            (
                "https://user:pw@host.example/x",
                Some(("host.example", 443)),
            ),
            ("http://host", Some(("host", 80))),
            ("localhost:4318", None),
            ("http://:80", None),
            ("http://host:port", None),
        ];
        for (url, expected) in cases {
            let found = server_of(url);
            assert_eq!(
                found.as_ref().map(|(h, p)| (h.as_str(), *p)),
                expected,
                "{url}"
            );
        }
    }
}
