//! OTLP over real HTTP, across processes, into a loopback collector that
//! decodes what it receives (OTLP/HTTP protobuf, as Jaeger and the
//! OpenTelemetry Collector take it):
//! - the demo run with `--otlp` exports each turn as one tree of GenAI
//!   spans, and the GenAI metrics;
//! - an agent whose tool runs on `examples/mcp_server`, another process
//!   exporting to the collector, finds the server's spans in its own
//!   trace, under its tool span.

#![cfg(feature = "otel")]

#[path = "support/example.rs"]
mod example;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kesoku::llm::{Agent, ScriptedLlm};
use kesoku::mcp::{ImportOptions, McpClient};
use opentelemetry::trace::{SpanKind as OtelKind, TracerProvider as _};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as Any, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use prost::Message as _;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use example::example;

/// A span as the collector received it, with its process's service name.
struct Received {
    service: String,
    span: Span,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<String> {
        text(&self.span.attributes, key)
    }
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|Any { value }| match value {
            Some(AnyValue::StringValue(s)) => Some(s.clone()),
            Some(AnyValue::IntValue(i)) => Some(i.to_string()),
            Some(AnyValue::BoolValue(b)) => Some(b.to_string()),
            _ => None,
        })
}

/// A collector on loopback: it accepts every OTLP/HTTP export.
async fn collector() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// Every span the collector has received, decoded.
async fn spans(collector: &MockServer) -> Vec<Received> {
    let mut spans = Vec::new();
    for request in collector.received_requests().await.unwrap_or_default() {
        if request.url.path() != "/v1/traces" {
            continue;
        }
        assert_eq!(
            request
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/x-protobuf")
        );
        let export = ExportTraceServiceRequest::decode(request.body.as_slice())
            .expect("an OTLP trace export");
        for resource in export.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| text(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Received {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
    }
    spans
}

/// The names of every metric the collector has received.
async fn metric_names(collector: &MockServer) -> Vec<String> {
    let mut names = Vec::new();
    for request in collector.received_requests().await.unwrap_or_default() {
        if request.url.path() == "/v1/metrics" {
            let export = ExportMetricsServiceRequest::decode(request.body.as_slice())
                .expect("an OTLP metrics export");
            for resource in export.resource_metrics {
                for scope in resource.scope_metrics {
                    names.extend(scope.metrics.into_iter().map(|m| m.name));
                }
            }
        }
    }
    names
}

/// The demo's offline showcase with `--otlp`: each turn (the showcase
/// pauses for approval and resumes, then asks for a typed answer) is one
/// tree of spans rooted at `invoke_agent`, with the chat spans as clients
/// and every tool call, exported before the process ended; the GenAI
/// metrics went to the same collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_exports_each_turn_as_one_trace_over_otlp() {
    let collector = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(example("demo"))
        .current_dir(dir.path())
        .args(["--otlp", &collector.uri()])
        .env_remove("KESOKU_PROVIDER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = spans(&collector).await;
    let by_id: HashMap<&[u8], &Received> = spans
        .iter()
        .map(|r| (r.span.span_id.as_slice(), r))
        .collect();
    let named = |prefix: &str| -> Vec<&Received> {
        spans
            .iter()
            .filter(|r| r.span.name.starts_with(prefix))
            .collect()
    };
    let turns = named("invoke_agent ");
    assert!(turns.len() >= 2, "{:?}", names(&spans));
    for turn in &turns {
        // A turn is a root, but for the research assistant's, which hangs
        // under the call that ran it: one trace for the nested run.
        if !turn.span.parent_span_id.is_empty() {
            let call = by_id[turn.span.parent_span_id.as_slice()];
            assert_eq!(call.span.name, "execute_tool research");
        }
        assert_eq!(turn.span.kind, SpanKind::Internal as i32);
        assert_eq!(turn.service, "kesoku-demo");
        assert_eq!(
            turn.attribute("gen_ai.operation.name").as_deref(),
            Some("invoke_agent")
        );
    }
    // Every other span hangs, through its parents, from a turn of its own
    // trace: none is lost, none is orphaned.
    for received in &spans {
        let mut span = &received.span;
        while !span.parent_span_id.is_empty() {
            let parent = by_id
                .get(span.parent_span_id.as_slice())
                .unwrap_or_else(|| panic!("{}: its parent was not exported", span.name));
            assert_eq!(parent.span.trace_id, span.trace_id, "{}", span.name);
            span = &parent.span;
        }
        assert!(span.name.starts_with("invoke_agent "), "{}", span.name);
    }
    let chats = named("chat ");
    assert!(chats.len() >= 8, "{:?}", names(&spans));
    for chat in &chats {
        assert_eq!(chat.span.kind, SpanKind::Client as i32);
        assert!(chat.attribute("gen_ai.usage.input_tokens").is_some());
    }
    let sums = named("execute_tool calculate_sum");
    // The showcase's four, and the research assistant's.
    assert_eq!(sums.len(), 5, "{:?}", names(&spans));
    let nested = named("invoke_agent research-assistant");
    assert_eq!(nested.len(), 1, "{:?}", names(&spans));
    assert_eq!(
        nested[0].span.trace_id,
        by_id[nested[0].span.parent_span_id.as_slice()]
            .span
            .trace_id
    );
    // The call with "forty" for `a` failed validation: its span says so.
    assert_eq!(
        sums.iter()
            .filter(|s| s.attribute("error.type").is_some())
            .count(),
        1
    );
    for tool in ["current_time", "save_note", "delete_note", "analyze_media"] {
        assert_eq!(
            named(&format!("execute_tool {tool}")).len(),
            1,
            "{tool}: {:?}",
            names(&spans)
        );
    }
    let metrics = metric_names(&collector).await;
    for name in [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name}: {metrics:?}");
    }
}

fn names(spans: &[Received]) -> Vec<&str> {
    spans.iter().map(|r| r.span.name.as_str()).collect()
}

/// `--otlp` with something that is not a URL is refused before anything
/// runs, naming it.
#[tokio::test]
async fn the_demo_refuses_an_otlp_address_that_is_not_a_url() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(example("demo"))
        .current_dir(dir.path())
        .args(["--otlp", "localhost:4318", "Add 2 and 3"])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"localhost:4318\": not an http(s) URL"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("kesoku-demo.sqlite").exists(),
        "nothing ran"
    );
}

/// An agent (this process, exporting in memory) whose tool runs on
/// `examples/mcp_server` (another process, exporting over OTLP): the
/// server's `tools/call calculate_sum` span is a server span whose parent
/// is the agent's `execute_tool remote_calculate_sum`, in the agent's
/// trace, with the server's own tool span under it.
#[test]
fn a_tool_on_an_mcp_server_in_another_process_is_in_the_agent_s_trace() {
    let local = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(local.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let remote = runtime.block_on(async {
        let collector = collector().await;
        let mut server = tokio::process::Command::new(example("mcp_server"));
        // The batch exporter's default delay (five seconds): the server's
        // spans are still queued when the turn ends.
        server
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri())
            .env_remove("OTEL_BSP_SCHEDULE_DELAY");
        let client = McpClient::stdio(server).await.unwrap();
        let mut tools = kesoku::ToolRegistry::new();
        client
            .import(&mut tools, &ImportOptions::new().prefix("remote_"))
            .await
            .unwrap();
        let model = ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "c1", "name": "remote_calculate_sum",
                             "arguments": {"a": 2, "b": 40}}]},
            {"text": "{{c1}}"}
        ]))
        .unwrap();
        let agent = Agent::builder(model).registry(tools).build().unwrap();
        let outcome = agent.send("s1", "Add 2 and 40.").await.unwrap();
        assert_eq!(outcome.answer.as_deref(), Some("42"));
        // Shut down, the server flushes its spans as it exits (its stdin
        // closed): they are at the collector once this returns, well
        // before its exporter's delay would have sent them.
        let asked = Instant::now();
        client.shutdown(McpClient::CLOSE_GRACE).await.unwrap();
        assert!(
            asked.elapsed() < Duration::from_secs(4),
            "{:?}",
            asked.elapsed()
        );
        spans(&collector).await
    });
    provider.force_flush().unwrap();
    let local = local.get_finished_spans().unwrap();
    let one_local = |name: &str| {
        let found: Vec<_> = local.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "{name}");
        found[0]
    };
    let turn = one_local("invoke_agent kesoku");
    let tool = one_local("execute_tool remote_calculate_sum");
    assert_eq!(tool.parent_span_id, turn.span_context.span_id());
    assert_eq!(tool.span_kind, OtelKind::Internal);
    let one_remote = |name: &str| {
        let found: Vec<_> = remote.iter().filter(|r| r.span.name == name).collect();
        assert_eq!(found.len(), 1, "{name}: {:?}", names(&remote));
        found[0]
    };
    let call = one_remote("tools/call calculate_sum");
    let run = one_remote("execute_tool calculate_sum");
    assert_eq!(call.service, "kesoku-mcp-server");
    assert_eq!(call.span.kind, SpanKind::Server as i32);
    assert_eq!(
        call.span.trace_id,
        turn.span_context.trace_id().to_bytes(),
        "the agent's trace"
    );
    assert_eq!(
        call.span.parent_span_id,
        tool.span_context.span_id().to_bytes(),
        "a child of the agent's tool span"
    );
    assert_eq!(run.span.parent_span_id, call.span.span_id);
    assert_eq!(run.span.trace_id, call.span.trace_id);
    assert_eq!(
        call.attribute("mcp.method.name").as_deref(),
        Some("tools/call")
    );
}

/// The demo against a provider (Claude, streaming, on loopback) with
/// `--otlp` given the traces URL itself and `OTEL_SERVICE_NAME` set: its
/// spans reach `/v1/traces` under that service name, and carry no span
/// event of a dependency's (hyper logs 8 debug events a model call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_exports_kesoku_s_spans_to_a_full_url_as_its_named_service() {
    let collector = collector().await;
    let provider = MockServer::start().await;
    let sse = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kesoku-llm/tests/fixtures/anthropic/stream/cached.sse"
    ))
    .unwrap();
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        )
        .mount(&provider)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(example("demo"))
        .current_dir(dir.path())
        .args(["--otlp", &format!("{}/v1/traces", collector.uri()), "Hi"])
        .env("KESOKU_PROVIDER", "anthropic")
        .env("ANTHROPIC_API_KEY", "sk-ant-demo-test")
        .env("ANTHROPIC_BASE_URL", provider.uri())
        .env("OTEL_SERVICE_NAME", "my-agent")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let spans = spans(&collector).await;
    let chats: Vec<&Received> = spans
        .iter()
        .filter(|r| r.span.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 1, "{:?}", names(&spans));
    for received in &spans {
        assert_eq!(received.service, "my-agent", "{}", received.span.name);
        for event in &received.span.events {
            let target = text(&event.attributes, "target").unwrap_or_default();
            assert!(
                target.starts_with("kesoku"),
                "{}: an event of {target}: {}",
                received.span.name,
                event.name
            );
        }
    }
}

/// With no collector listening, the lost spans are said so on stderr,
/// once, naming where they were to go.
#[tokio::test]
async fn the_demo_reports_spans_it_could_not_export_once() {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(example("demo"))
        .current_dir(dir.path())
        .args(["--otlp", &url])
        .env_remove("KESOKU_PROVIDER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let reports = stderr
        .lines()
        .filter(|l| l.contains("spans could not be exported to"))
        .collect::<Vec<_>>();
    assert_eq!(reports.len(), 1, "{stderr}");
    assert!(reports[0].contains(&url), "{stderr}");
    assert!(
        !stderr.contains("the last spans were not exported"),
        "{stderr}"
    );
}
