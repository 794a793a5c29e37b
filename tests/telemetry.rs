//! The agent's spans, as OpenTelemetry's GenAI conventions name them,
//! read through `tracing` by a subscriber that keeps every span: a turn
//! (`invoke_agent kesoku`, internal), each model call (`chat {model}`,
//! client, a child of the turn) and each tool call (`execute_tool
//! {name}`, internal, a child of the turn), with their attributes;
//! against Claude on a loopback server. The key appears nowhere.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kesoku::llm::{Agent, AgentBuilder, ClaudeLlm, HttpOptions, TurnStatus};
use kesoku::{DynamicTool, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use wiremock::{MockServer, ResponseTemplate};

#[path = "support/replies.rs"]
mod replies;
use replies::server;

const KEY: &str = "sk-ant-telemetry-SECRET-4242";

/// A span as the subscriber saw it.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

impl Seen {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

/// Every span and event field, kept.
#[derive(Clone, Default)]
struct Keep {
    spans: Arc<Mutex<HashMap<u64, Seen>>>,
    order: Arc<Mutex<Vec<u64>>>,
    events: Arc<Mutex<Vec<String>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> Layer<S> for Keep
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            parent: ctx
                .span(id)
                .and_then(|s| s.parent())
                .map(|p| p.id().into_u64()),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.spans.lock().unwrap().insert(id.into_u64(), seen);
        self.order.lock().unwrap().push(id.into_u64());
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(seen) = self.spans.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(format!("{fields:?}"));
    }
}

impl Keep {
    /// The spans named `name`, in the order they began.
    fn named(&self, name: &str) -> Vec<(u64, Seen)> {
        let spans = self.spans.lock().unwrap();
        self.order
            .lock()
            .unwrap()
            .iter()
            .filter_map(|id| spans.get(id).map(|s| (*id, s.clone())))
            .filter(|(_, s)| s.name == name)
            .collect()
    }

    /// Everything recorded, as text.
    fn all_text(&self) -> String {
        format!(
            "{:?}{:?}",
            self.spans.lock().unwrap(),
            self.events.lock().unwrap()
        )
    }
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    tools
        .register(
            DynamicTool::new(
                "get_weather",
                "Reports the weather.",
                schema.clone(),
                |a, _| async move {
                    Ok(ToolOutput::new(json!(format!(
                        "sunny in {}",
                        a["city"].as_str().unwrap_or("?")
                    ))))
                },
            )
            .unwrap(),
        )
        .unwrap();
    tools
        .register(
            DynamicTool::new("broken", "Always fails.", schema, |_, _| async move {
                Err(ToolError::failed("the weather service is down"))
            })
            .unwrap(),
        )
        .unwrap();
    tools
}

fn claude_reply(id: &str, content: &Value, stop: &str) -> Value {
    json!({"id": id, "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 120, "cache_read_input_tokens": 100, "output_tokens": 7}})
}

fn agent(server: &MockServer, streaming: bool, capture: bool) -> Agent {
    builder(server, streaming, capture).build().unwrap()
}

fn builder(server: &MockServer, streaming: bool, capture: bool) -> AgentBuilder {
    let claude = ClaudeLlm::new(KEY)
        .with_base_url(server.uri())
        .with_http_options(HttpOptions {
            max_retries: 0,
            ..HttpOptions::default()
        });
    Agent::builder(claude)
        .model("claude-test")
        .registry(tools())
        .streaming(streaming)
        .capture_content(capture)
}

/// Runs `work` on this thread with `keep` as the subscriber.
fn traced<F: std::future::Future>(keep: &Keep, work: F) -> F::Output {
    let subscriber = tracing_subscriber::registry().with(keep.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

/// A server answering a first step with two parallel calls (the second
/// to a tool that fails), then a text.
async fn two_steps() -> MockServer {
    server(vec![
        ResponseTemplate::new(200).set_body_json(claude_reply(
            "msg_1",
            &json!([
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "broken", "input": {"city": "Lima"}}
            ]),
            "tool_use",
        )),
        ResponseTemplate::new(200).set_body_json(claude_reply(
            "msg_2",
            &json!([{"type": "text", "text": "Sunny in Paris; Lima is unknown."}]),
            "end_turn",
        )),
    ])
    .await
}

#[test]
fn a_two_step_turn_with_parallel_calls_is_one_trace_of_genai_spans() {
    let keep = Keep::default();
    traced(&keep, async {
        let server = two_steps().await;
        let outcome = agent(&server, false, false)
            .send("s1", "Weather?")
            .await
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
    });

    let turns = keep.named("invoke_agent");
    assert_eq!(turns.len(), 1);
    let (turn_id, turn) = &turns[0];
    assert_eq!(turn.get("otel.name"), Some("invoke_agent kesoku"));
    assert_eq!(turn.get("otel.kind"), Some("internal"));
    assert_eq!(turn.get("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(turn.get("gen_ai.agent.name"), Some("kesoku"));
    assert_eq!(turn.get("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(turn.get("gen_ai.conversation.id"), Some("s1"));

    let chats = keep.named("chat");
    assert_eq!(chats.len(), 2, "two model calls");
    for (i, (_, chat)) in chats.iter().enumerate() {
        assert_eq!(chat.parent, Some(*turn_id), "a child of the turn");
        assert_eq!(chat.get("otel.name"), Some("chat claude-test"));
        assert_eq!(chat.get("otel.kind"), Some("client"));
        assert_eq!(chat.get("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.get("gen_ai.provider.name"), Some("anthropic"));
        assert_eq!(chat.get("gen_ai.request.model"), Some("claude-test"));
        assert_eq!(chat.get("gen_ai.request.stream"), Some("false"));
        assert_eq!(chat.get("gen_ai.conversation.id"), Some("s1"));
        assert_eq!(chat.get("gen_ai.response.id"), Some(["msg_1", "msg_2"][i]));
        // With `otel`, set as a list on the OpenTelemetry side instead.
        if !cfg!(feature = "otel") {
            assert_eq!(
                chat.get("gen_ai.response.finish_reasons"),
                Some(["tool_call", "stop"][i])
            );
        }
        // Claude's uncached count and its cache read, the whole request.
        assert_eq!(chat.get("gen_ai.usage.input_tokens"), Some("220"));
        assert_eq!(
            chat.get("gen_ai.usage.cache_read.input_tokens"),
            Some("100")
        );
        assert_eq!(chat.get("gen_ai.usage.output_tokens"), Some("7"));
        assert_eq!(chat.get("error.type"), None);
        // Content is off by default.
        assert_eq!(chat.get("gen_ai.input.messages"), None);
    }

    let tools = keep.named("execute_tool");
    assert_eq!(tools.len(), 2, "the two calls of the first step");
    let mut names: Vec<&str> = tools
        .iter()
        .filter_map(|(_, t)| t.get("gen_ai.tool.name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["broken", "get_weather"]);
    for (_, tool) in &tools {
        assert_eq!(tool.parent, Some(*turn_id), "a child of the turn");
        assert_eq!(tool.get("otel.kind"), Some("internal"));
        assert_eq!(tool.get("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.get("gen_ai.tool.type"), Some("function"));
        let name = tool.get("gen_ai.tool.name").unwrap();
        assert_eq!(
            tool.get("otel.name"),
            Some(format!("execute_tool {name}").as_str())
        );
        let (id, error) = if name == "broken" {
            ("toolu_2", Some("tool_error"))
        } else {
            ("toolu_1", None)
        };
        assert_eq!(tool.get("gen_ai.tool.call.id"), Some(id));
        assert_eq!(tool.get("error.type"), error, "{name}");
        assert_eq!(tool.get("gen_ai.tool.call.arguments"), None);
    }
    assert!(!keep.all_text().contains(KEY));
}

#[test]
fn a_failed_model_call_carries_its_error_type() {
    let keep = Keep::default();
    traced(&keep, async {
        let server = server(vec![
            ResponseTemplate::new(529).set_body_json(json!({
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ])
        .await;
        let outcome = agent(&server, false, false)
            .send("s2", "Hello?")
            .await
            .unwrap();
        assert_eq!(outcome.status, TurnStatus::Failed);
    });
    let chats = keep.named("chat");
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].1.get("error.type"), Some("529"));
    assert_eq!(
        keep.named("invoke_agent")[0].1.get("error.type"),
        Some("turn_failed")
    );
    assert!(!keep.all_text().contains(KEY));
}

#[test]
fn a_streamed_reply_records_its_time_to_first_chunk_and_content_when_asked() {
    let keep = Keep::default();
    let sse = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kesoku-llm/tests/fixtures/anthropic/stream/cached.sse"
    ))
    .unwrap();
    traced(&keep, async {
        let server = server(vec![
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        ])
        .await;
        let outcome = agent(&server, true, true)
            .send("s3", "Hi again")
            .await
            .unwrap();
        assert_eq!(outcome.answer.as_deref(), Some("Hello again!"));
    });
    let chats = keep.named("chat");
    assert_eq!(chats.len(), 1);
    let chat = &chats[0].1;
    assert_eq!(chat.get("gen_ai.request.stream"), Some("true"));
    let first: f64 = chat
        .get("gen_ai.response.time_to_first_chunk")
        .expect("the time to the first chunk")
        .parse()
        .unwrap();
    assert!(first > 0.0 && first < 10.0, "{first} s");
    assert_eq!(
        chat.get("gen_ai.usage.cache_creation.input_tokens"),
        Some("188")
    );
    // Content, asked for: the prompt sent, the reply received.
    let input: Value = serde_json::from_str(chat.get("gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(
        input[0]["parts"][0],
        json!({"type": "text", "content": "Hi again"})
    );
    let output: Value = serde_json::from_str(chat.get("gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "Hello again!");
    assert!(!keep.all_text().contains(KEY));
}

/// With the `otel` feature, through tracing-opentelemetry to an SDK's
/// in-memory exporters: one trace of real OpenTelemetry spans, with their
/// kinds and parents, the finish reasons as a list, and the GenAI metrics.
#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::trace::{SpanKind, TracerProvider as _};
    use opentelemetry::{Array, Value as OtelValue};
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
    use serde_json::json;
    use tracing_subscriber::layer::SubscriberExt as _;
    use wiremock::ResponseTemplate;

    use super::{KEY, builder, claude_reply, server, two_steps};
    use kesoku::llm::TurnStatus;

    fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    /// Runs `work` on this thread with tracing-opentelemetry, over an
    /// in-memory exporter, as the subscriber; the spans it finished.
    fn exported(work: impl std::future::Future<Output = ()>) -> Vec<SpanData> {
        let spans = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        {
            let _guard = tracing::subscriber::set_default(subscriber);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(work);
        }
        provider.force_flush().unwrap();
        spans.get_finished_spans().unwrap()
    }

    fn text(span: &SpanData, key: &str) -> Option<String> {
        attribute(span, key).map(OtelValue::to_string)
    }

    /// A histogram's data point: its name, attributes (`key=value`), and
    /// count (of `f64` values) or sum (of `u64` ones).
    type Point = (String, Vec<String>, u64);

    /// Each histogram's data points.
    fn points(metrics: &InMemoryMetricExporter) -> Vec<Point> {
        let exported = metrics.get_finished_metrics().unwrap();
        let mut points = Vec::new();
        for resource in &exported {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics() {
                    let attributes = |a: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                        a.map(|kv| format!("{}={}", kv.key, kv.value))
                            .collect::<Vec<_>>()
                    };
                    match metric.data() {
                        AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                            for p in h.data_points() {
                                let a = attributes(&mut p.attributes());
                                points.push((metric.name().to_owned(), a, p.count()));
                            }
                        }
                        AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                            for p in h.data_points() {
                                let a = attributes(&mut p.attributes());
                                points.push((metric.name().to_owned(), a, p.sum()));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        points
    }

    /// A two-step turn with two calls (one failing), its spans and metrics
    /// exported in memory.
    fn exported_turn() -> (Vec<SpanData>, Vec<Point>) {
        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        let finished = exported(async {
            let server = two_steps().await;
            let agent = builder(&server, false, true)
                .meter(meter_provider.meter("kesoku"))
                .build()
                .unwrap();
            let outcome = agent.send("s9", "Weather?").await.unwrap();
            assert_eq!(outcome.status, TurnStatus::Completed);
        });
        meter_provider.force_flush().unwrap();
        (finished, points(&metrics))
    }

    #[test]
    fn a_turn_is_one_trace_of_opentelemetry_spans_with_genai_metrics() {
        let (finished, points) = exported_turn();
        let named =
            |name: &str| -> Vec<&SpanData> { finished.iter().filter(|s| s.name == name).collect() };
        let turn = named("invoke_agent kesoku");
        assert_eq!(
            turn.len(),
            1,
            "{:?}",
            finished.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        let turn = turn[0];
        assert_eq!(turn.span_kind, SpanKind::Internal);
        let trace = turn.span_context.trace_id();
        let chats = named("chat claude-test");
        assert_eq!(chats.len(), 2);
        for chat in &chats {
            assert_eq!(chat.span_kind, SpanKind::Client);
            assert_eq!(chat.parent_span_id, turn.span_context.span_id());
            assert_eq!(chat.span_context.trace_id(), trace);
            assert_eq!(
                text(chat, "gen_ai.provider.name").as_deref(),
                Some("anthropic")
            );
            assert_eq!(
                text(chat, "gen_ai.usage.input_tokens").as_deref(),
                Some("220")
            );
            // A list, as the conventions type it.
            assert!(
                matches!(
                    attribute(chat, "gen_ai.response.finish_reasons"),
                    Some(OtelValue::Array(Array::String(_)))
                ),
                "{:?}",
                chat.attributes
            );
            assert!(
                text(chat, "gen_ai.input.messages").is_some(),
                "content was asked for"
            );
        }
        let tools: Vec<&SpanData> = finished
            .iter()
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        assert_eq!(tools.len(), 2);
        for tool in &tools {
            assert_eq!(tool.span_kind, SpanKind::Internal);
            assert_eq!(tool.parent_span_id, turn.span_context.span_id());
            assert_eq!(tool.span_context.trace_id(), trace);
            assert!(
                text(tool, "gen_ai.tool.call.arguments")
                    .unwrap()
                    .contains("city")
            );
        }
        let broken = tools
            .iter()
            .find(|t| t.name == "execute_tool broken")
            .unwrap();
        assert_eq!(text(broken, "error.type").as_deref(), Some("tool_error"));
        assert!(!format!("{finished:?}").contains(KEY));

        // The metrics: a duration for each model and tool call (each in
        // its own histogram, as the conventions name them), the tokens
        // of each model call by type.
        let has = |name: &str, attribute: &str| {
            points
                .iter()
                .filter(|(n, a, _)| n == name && a.iter().any(|x| x == attribute))
                .map(|(_, _, v)| *v)
                .max()
        };
        assert_eq!(
            has(
                "gen_ai.client.operation.duration",
                "gen_ai.operation.name=chat"
            ),
            Some(2),
            "{points:?}"
        );
        assert!(has("gen_ai.execute_tool.duration", "gen_ai.tool.name=broken").is_some());
        assert!(has("gen_ai.execute_tool.duration", "error.type=tool_error").is_some());
        assert_eq!(
            has("gen_ai.client.token.usage", "gen_ai.token.type=input"),
            Some(440)
        );
        assert_eq!(
            has("gen_ai.client.token.usage", "gen_ai.token.type=output"),
            Some(14)
        );
    }

    /// The agent's tool runs on a kesoku MCP server: the request's `_meta`
    /// carries the agent's tool span's context, and the server's span of
    /// the call continues it (its parent remote), with the server's own
    /// tool span under it: one trace.
    #[test]
    fn a_tool_on_an_mcp_server_is_in_the_agent_s_trace() {
        use kesoku::mcp::{ImportOptions, McpClient, McpServer, Protocol};

        let finished = exported(async {
            let (client_side, server_side) = tokio::io::duplex(1 << 16);
            let (sr, sw) = tokio::io::split(server_side);
            tokio::spawn(McpServer::new(super::tools()).serve_io(sr, sw));
            let (cr, cw) = tokio::io::split(client_side);
            let client = McpClient::io("the weather server", cr, cw, Protocol::Auto)
                .await
                .unwrap();
            let mut imported = kesoku::ToolRegistry::new();
            client
                .import(&mut imported, &ImportOptions::new().prefix("remote_"))
                .await
                .unwrap();
            let server = server(vec![
                ResponseTemplate::new(200).set_body_json(claude_reply(
                    "msg_1",
                    &json!([{"type": "tool_use", "id": "toolu_9", "name": "remote_get_weather",
                            "input": {"city": "Oslo"}}]),
                    "tool_use",
                )),
                ResponseTemplate::new(200).set_body_json(claude_reply(
                    "msg_2",
                    &json!([{"type": "text", "text": "Sunny in Oslo."}]),
                    "end_turn",
                )),
            ])
            .await;
            let agent = builder(&server, false, false)
                .registry(imported)
                .build()
                .unwrap();
            let outcome = agent.send("s10", "Weather in Oslo?").await.unwrap();
            assert_eq!(outcome.answer.as_deref(), Some("Sunny in Oslo."));
        });
        let one = |name: &str| -> &SpanData {
            let found: Vec<&SpanData> = finished.iter().filter(|s| s.name == name).collect();
            assert_eq!(
                found.len(),
                1,
                "{name}: {:?}",
                finished.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            found[0]
        };
        let turn = one("invoke_agent kesoku");
        let agent_side = one("execute_tool remote_get_weather");
        let server_side = one("tools/call get_weather");
        let server_tool = one("execute_tool get_weather");
        let trace = turn.span_context.trace_id();
        assert_eq!(agent_side.parent_span_id, turn.span_context.span_id());
        assert_eq!(server_side.span_kind, SpanKind::Server);
        assert!(
            server_side.parent_span_is_remote,
            "continued from the request's _meta"
        );
        assert_eq!(
            server_side.parent_span_id,
            agent_side.span_context.span_id()
        );
        assert_eq!(
            server_tool.parent_span_id,
            server_side.span_context.span_id()
        );
        for span in [agent_side, server_side, server_tool] {
            assert_eq!(span.span_context.trace_id(), trace, "{}", span.name);
        }
        assert_eq!(
            text(server_side, "mcp.method.name").as_deref(),
            Some("tools/call")
        );
    }
}
