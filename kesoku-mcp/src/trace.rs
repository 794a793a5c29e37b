//! One trace across MCP: the client puts the W3C trace context of the
//! span it calls from into the request's `_meta` (`traceparent`,
//! `tracestate`: the keys the 2026-07-28 revision reserves, SEP-414), and
//! the server's span of the call (`tools/call {tool}`, a server span as
//! OpenTelemetry's MCP conventions name it) continues it, so the tool's
//! run is a child of the agent's tool span in another process.
//!
//! The spans are `tracing`'s; the context is OpenTelemetry's, read and set
//! through tracing-opentelemetry with the `otel` feature. Without it,
//! nothing is sent, and the server's span starts its own trace.

use rmcp::model::RequestMetaObject;

/// Puts the current span's trace context into a request's `_meta`.
pub(crate) fn inject(meta: &mut Option<RequestMetaObject>) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let context = tracing::Span::current().context();
        let span = context.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return;
        }
        let meta = meta.get_or_insert_with(RequestMetaObject::default);
        meta.0.set_traceparent(format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ));
        let state = sc.trace_state().header();
        if !state.is_empty() {
            meta.0.set_tracestate(state);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = meta;
}

/// The server's span of a call of `tool` (request `id`), continuing the
/// trace the request's `_meta` carries, if it carries a valid one.
pub(crate) fn server_span(tool: &str, id: &str, meta: &RequestMetaObject) -> tracing::Span {
    let span = tracing::info_span!(
        "tools/call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        jsonrpc.request.id = id,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    #[cfg(feature = "otel")]
    if let Some(remote) = remote(meta) {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    #[cfg(not(feature = "otel"))]
    let _ = meta;
    span
}

/// Records that the call's result is an error (`isError`): `error.type`
/// is `tool_error`, as the MCP conventions name it, and the span's status
/// (which tracing-opentelemetry reads) an error.
pub(crate) fn record_tool_error(span: &tracing::Span) {
    span.record("error.type", "tool_error");
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", "tool_error");
}

/// The caller's span context in `meta`: a `traceparent` of version `00`
/// (32 hex digits of trace id, 16 of span id, 2 of flags, neither id all
/// zeros), with its `tracestate` if that reads; `None` for anything else.
#[cfg(feature = "otel")]
fn remote(meta: &RequestMetaObject) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let parent = meta.0.get_traceparent()?;
    let mut parts = parent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if version != "00"
        || parts.next().is_some()
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let state = meta
        .0
        .get_tracestate()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace, span, flags, true, state);
    context.is_valid().then_some(context)
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use rmcp::model::RequestMetaObject;

    fn meta(parent: &str) -> RequestMetaObject {
        let mut meta = RequestMetaObject::default();
        meta.0.set_traceparent(parent);
        meta
    }

    #[test]
    fn only_a_well_formed_traceparent_is_continued() {
        let good = super::remote(&meta(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ))
        .expect("a valid parent");
        assert_eq!(
            good.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert!(good.is_remote() && good.is_sampled());
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
            "00-+af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert!(super::remote(&meta(bad)).is_none(), "{bad}");
        }
    }
}
