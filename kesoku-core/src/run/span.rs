//! A tool call's `tracing` span, as OpenTelemetry's GenAI conventions name
//! it (`execute_tool {tool}`, internal; `otel.*` name it for a bridge such
//! as tracing-opentelemetry). Its fields are built only when a subscriber
//! wants the span.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::{Message, ToolRequest};

/// The span of `request`'s call, with its arguments when `capture`.
pub(crate) fn call(request: &ToolRequest, capture: bool) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {}", request.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %request.name,
        gen_ai.tool.call.id = %request.id,
        gen_ai.tool.type = "function",
        error.type = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        // kesoku's own, in its namespace.
        kesoku.duration_ms = Empty,
        kesoku.outcome = Empty,
    );
    if capture && !span.is_disabled() {
        span.record(
            "gen_ai.tool.call.arguments",
            tracing::field::display(&request.arguments),
        );
    }
    span
}

/// Records how the call ended: its outcome (`ok` or the error's kind), how
/// long it took, and its result when `capture`.
pub(crate) fn ended(span: &Span, outcome: &str, took: Duration, result: &Message, capture: bool) {
    if span.is_disabled() {
        return;
    }
    span.record("kesoku.duration_ms", took.as_secs_f64() * 1000.0);
    span.record("kesoku.outcome", outcome);
    if outcome != "ok" {
        // The tool's own `Err` is `tool_error`, as MCP's conventions name
        // it; the runner's refusals keep their kind.
        let error_type = if outcome == "failed" {
            "tool_error"
        } else {
            outcome
        };
        span.record("error.type", error_type);
        // The span's status, which tracing-opentelemetry reads: an error.
        // Described by its class, not the tool's message, which may hold
        // what content capture keeps out of spans, unless captured.
        span.record("otel.status_code", "ERROR");
        if capture {
            span.record("otel.status_description", result.content.as_str());
        } else {
            span.record("otel.status_description", error_type);
        }
    }
    if capture {
        span.record("gen_ai.tool.call.result", result.content.as_str());
    }
}
