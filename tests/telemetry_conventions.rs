//! The agent's telemetry against the GenAI conventions' types and names,
//! through tracing-opentelemetry into the SDK's in-memory exporters (what
//! an OTLP exporter would send): counts as integers, failures as the
//! span's Error status, a tool's own model call as a `chat` span with its
//! metrics and its tokens in the session's usage, the time to the first
//! chunk only when one came, and the conventions' names (cache counts,
//! `server.*`, `gen_ai.response.model`, Gemini's `generate_content`,
//! `gen_ai.execute_tool.duration`, kesoku's own under `kesoku.`).

#![cfg(feature = "otel")]

use kesoku::llm::{
    Agent, AgentBuilder, ClaudeLlm, GeminiLlm, HttpOptions, ScriptedLlm, TurnStatus, Usage,
    tools::TurnModel,
};
use kesoku::{DynamicTool, ToolError, ToolOutput, ToolRegistry};
use opentelemetry::Value as OtelValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;
use wiremock::{MockServer, ResponseTemplate};

#[path = "support/replies.rs"]
mod replies;
use replies::server;

const KEY: &str = "sk-ant-conventions-SECRET-77";

/// What a piece of work exported: its finished spans, and each
/// histogram's data points as (name, `key=value` attributes, count).
struct Exported {
    spans: Vec<SpanData>,
    points: Vec<(String, Vec<String>, u64)>,
}

impl Exported {
    fn named(&self, name: &str) -> Vec<&SpanData> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    fn one(&self, name: &str) -> &SpanData {
        let found = self.named(name);
        assert_eq!(found.len(), 1, "{name}: {:?}", self.names());
        found[0]
    }

    fn names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_ref()).collect()
    }

    /// How many values the histogram `name` got with `attribute` among
    /// its attributes.
    fn count(&self, name: &str, attribute: &str) -> u64 {
        self.points
            .iter()
            .filter(|(n, a, _)| n == name && a.iter().any(|x| x == attribute))
            .map(|(_, _, c)| *c)
            .sum()
    }
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// Runs `work` (given a meter to build its agent with) on this thread
/// with tracing-opentelemetry over in-memory exporters.
fn exported<F, Fut>(work: F) -> Exported
where
    F: FnOnce(opentelemetry::metrics::Meter) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let metrics = InMemoryMetricExporter::default();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    {
        let _guard = tracing::subscriber::set_default(subscriber);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work(meters.meter("kesoku")));
    }
    provider.force_flush().unwrap();
    meters.force_flush().unwrap();
    let mut points = Vec::new();
    for resource in &metrics.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                let mut add = |a: Vec<String>, count: u64| {
                    points.push((metric.name().to_owned(), a, count));
                };
                match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            let a = p.attributes().map(|kv| format!("{}={}", kv.key, kv.value));
                            add(a.collect(), p.count());
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            let a = p.attributes().map(|kv| format!("{}={}", kv.key, kv.value));
                            add(a.collect(), p.count());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let spans = spans.get_finished_spans().unwrap();
    assert!(!format!("{spans:?}").contains(KEY), "the key was recorded");
    Exported { spans, points }
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false})
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register(
            DynamicTool::new(
                "get_weather",
                "Reports the weather.",
                schema(),
                |_, _| async { Ok(ToolOutput::new(json!("sunny"))) },
            )
            .unwrap(),
        )
        .unwrap();
    tools
        .register(
            DynamicTool::new("broken", "Always fails.", schema(), |_, _| async {
                Err(ToolError::failed("the weather service is down"))
            })
            .unwrap(),
        )
        .unwrap();
    tools
}

fn claude_reply(id: &str, content: &Value, stop: &str) -> Value {
    json!({"id": id, "type": "message", "role": "assistant", "model": "claude-test-20260101",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 120, "cache_read_input_tokens": 100, "output_tokens": 7}})
}

fn claude(
    server: &MockServer,
    streaming: bool,
    meter: opentelemetry::metrics::Meter,
) -> AgentBuilder {
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
        .meter(meter)
}

/// A first step calling both tools (one fails), then a text.
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
            &json!([{"type": "text", "text": "Sunny in Paris."}]),
            "end_turn",
        )),
    ])
    .await
}

fn unauthorized() -> ResponseTemplate {
    ResponseTemplate::new(401).set_body_json(json!({"type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"}}))
}

/// Item 3: counts are OpenTelemetry ints, not text ("220").
#[test]
fn counts_are_exported_as_integers() {
    let exported = exported(|meter| async move {
        let server = two_steps().await;
        let agent = claude(&server, false, meter).build().unwrap();
        agent.send("s1", "Weather?").await.unwrap();
    });
    let chats = exported.named("chat claude-test");
    assert_eq!(chats.len(), 2, "{:?}", exported.names());
    for chat in chats {
        for (key, value) in [
            ("gen_ai.usage.input_tokens", 220),
            ("gen_ai.usage.output_tokens", 7),
            ("gen_ai.usage.cache_read.input_tokens", 100),
            ("gen_ai.request.max_tokens", 4096),
        ] {
            assert_eq!(attribute(chat, key), Some(&OtelValue::I64(value)), "{key}");
        }
        assert!(matches!(
            attribute(chat, "kesoku.step"),
            Some(OtelValue::I64(1 | 2))
        ));
    }
    let turn = exported.one("invoke_agent kesoku");
    assert_eq!(attribute(turn, "kesoku.steps"), Some(&OtelValue::I64(2)));
}

/// Item 4: a failed tool, a model call answered 401 and the turn it
/// failed have the Error status; the others do not.
#[test]
fn failures_set_the_span_status_to_error() {
    let exported = exported(|meter| async move {
        let server = two_steps().await;
        let agent = claude(&server, false, meter.clone()).build().unwrap();
        assert_eq!(
            agent.send("s1", "Weather?").await.unwrap().status,
            TurnStatus::Completed
        );
        let refusing = server_with(unauthorized()).await;
        let agent = claude(&refusing, false, meter).build().unwrap();
        assert_eq!(
            agent.send("s2", "Hello?").await.unwrap().status,
            TurnStatus::Failed
        );
    });
    let is_error = |span: &SpanData| matches!(span.status, Status::Error { .. });
    let broken = exported.one("execute_tool broken");
    assert!(is_error(broken), "{:?}", broken.status);
    assert!(!is_error(exported.one("execute_tool get_weather")));
    let chats = exported.named("chat claude-test");
    assert_eq!(chats.len(), 3);
    let failed: Vec<_> = chats.iter().filter(|s| is_error(s)).collect();
    assert_eq!(failed.len(), 1, "only the refused call");
    assert_eq!(
        attribute(failed[0], "error.type")
            .map(ToString::to_string)
            .as_deref(),
        Some("401")
    );
    let Status::Error { description } = &failed[0].status else {
        unreachable!()
    };
    assert!(
        description.contains("401") || description.contains("invalid"),
        "{description}"
    );
    let turns = exported.named("invoke_agent kesoku");
    assert_eq!(
        turns.iter().filter(|s| is_error(s)).count(),
        1,
        "the failed turn"
    );
}

async fn server_with(reply: ResponseTemplate) -> MockServer {
    server(vec![reply]).await
}

/// Item 8: a streamed call answered 401 got no chunk, so no time to it.
#[test]
fn a_refused_stream_has_no_time_to_first_chunk() {
    let exported = exported(|meter| async move {
        let refusing = server_with(unauthorized()).await;
        let agent = claude(&refusing, true, meter).build().unwrap();
        assert_eq!(
            agent.send("s1", "Hello?").await.unwrap().status,
            TurnStatus::Failed
        );
    });
    let chat = exported.one("chat claude-test");
    assert_eq!(
        attribute(chat, "gen_ai.request.stream"),
        Some(&OtelValue::Bool(true))
    );
    assert!(attribute(chat, "error.type").is_some());
    assert_eq!(attribute(chat, "gen_ai.response.time_to_first_chunk"), None);
}

/// Item 10: the conventions' names on a streamed Claude call (its cache
/// write), the server and the response's model; the tools' durations
/// in `gen_ai.execute_tool.duration`; kesoku's own attributes namespaced.
#[test]
fn names_follow_the_conventions() {
    let sse = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kesoku-llm/tests/fixtures/anthropic/stream/cached.sse"
    ))
    .unwrap();
    let mut port = 0;
    let found_port = &mut port;
    let exported = exported(move |meter| async move {
        let streamed = server_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        )
        .await;
        *found_port = streamed.address().port();
        claude(&streamed, true, meter.clone())
            .build()
            .unwrap()
            .send("s1", "Hi")
            .await
            .unwrap();
        let server = two_steps().await;
        claude(&server, false, meter)
            .build()
            .unwrap()
            .send("s2", "Weather?")
            .await
            .unwrap();
    });
    let chats = exported.named("chat claude-test");
    let streamed = chats[0];
    assert_eq!(
        attribute(streamed, "gen_ai.usage.cache_creation.input_tokens"),
        Some(&OtelValue::I64(188))
    );
    assert_eq!(
        attribute(streamed, "gen_ai.usage.cache_write.input_tokens"),
        None
    );
    assert_eq!(
        attribute(streamed, "server.port"),
        Some(&OtelValue::I64(i64::from(port)))
    );
    for chat in &chats {
        assert_eq!(
            attribute(chat, "server.address")
                .map(ToString::to_string)
                .as_deref(),
            Some("127.0.0.1")
        );
        assert!(matches!(
            attribute(chat, "server.port"),
            Some(OtelValue::I64(_))
        ));
        assert!(
            attribute(chat, "gen_ai.response.model").is_some(),
            "{:?}",
            chat.attributes
        );
        assert_eq!(attribute(chat, "step"), None, "namespaced");
    }
    assert_eq!(
        attribute(chats[1], "gen_ai.response.model")
            .map(ToString::to_string)
            .as_deref(),
        Some("claude-test-20260101")
    );
    assert_namespaced(&exported);
    let tool_calls = "gen_ai.operation.name=execute_tool";
    assert_eq!(
        exported.count("gen_ai.execute_tool.duration", tool_calls),
        2
    );
    assert_eq!(
        exported.count("gen_ai.client.operation.duration", tool_calls),
        0
    );
    assert_eq!(
        exported.count(
            "gen_ai.client.operation.duration",
            "gen_ai.operation.name=chat"
        ),
        3
    );
    assert_eq!(
        exported.count(
            "gen_ai.client.operation.duration",
            "server.address=127.0.0.1"
        ),
        3
    );
}

/// kesoku's own attributes are under `kesoku.`, not bare.
fn assert_namespaced(exported: &Exported) {
    let turn = &exported.named("invoke_agent kesoku")[0];
    for own in ["session", "message_id", "steps", "status"] {
        assert_eq!(attribute(turn, own), None, "{own}");
        assert!(
            attribute(turn, &format!("kesoku.{own}")).is_some(),
            "kesoku.{own}"
        );
    }
    let tool = exported.one("execute_tool broken");
    for own in ["outcome", "duration_ms"] {
        assert_eq!(attribute(tool, own), None, "{own}");
        assert!(
            attribute(tool, &format!("kesoku.{own}")).is_some(),
            "kesoku.{own}"
        );
    }
}

/// Item 10: Gemini's operation is `generate_content`.
#[test]
fn gemini_s_operation_is_generate_content() {
    let exported = exported(|meter| async move {
        let server = server_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2},
            "modelVersion": "gemini-test-001", "responseId": "r1"})))
        .await;
        let gemini = GeminiLlm::new(KEY).with_base_url(server.uri());
        let agent = Agent::builder(gemini)
            .model("gemini-test")
            .streaming(false)
            .meter(meter)
            .build()
            .unwrap();
        assert_eq!(
            agent.send("s1", "Hi").await.unwrap().answer.as_deref(),
            Some("Hi.")
        );
    });
    let chat = exported.one("generate_content gemini-test");
    assert_eq!(
        attribute(chat, "gen_ai.operation.name")
            .map(ToString::to_string)
            .as_deref(),
        Some("generate_content")
    );
    assert_eq!(
        attribute(chat, "gen_ai.response.model")
            .map(ToString::to_string)
            .as_deref(),
        Some("gemini-test-001")
    );
    assert_eq!(
        exported.count(
            "gen_ai.client.operation.duration",
            "gen_ai.operation.name=generate_content"
        ),
        1
    );
}

/// Item 5: a tool asking the turn's model (as `analyze_media` does) makes
/// a `chat` span under its own, is in the metrics, and its tokens are in
/// the outcome's and the session's usage.
#[test]
fn a_tool_s_model_call_is_traced_metered_and_counted() {
    let mut usage = (Usage::default(), Usage::default());
    let counted = &mut usage;
    let exported = exported(move |meter| async move {
        let model = ScriptedLlm::from_json(json!([
            {"tool_calls": [{"id": "c1", "name": "describe", "arguments": {"city": "Oslo"}}],
             "usage": {"input_tokens": 50, "output_tokens": 1}},
            {"text": "A fjord.", "usage": {"input_tokens": 10, "output_tokens": 2}},
            {"text": "{{c1}}", "usage": {"input_tokens": 100, "output_tokens": 5}}
        ]))
        .unwrap();
        let mut tools = ToolRegistry::new();
        tools
            .register(
                DynamicTool::new(
                    "describe",
                    "Asks the model.",
                    schema(),
                    |_, ctx| async move {
                        let model = ctx
                            .state::<TurnModel>()
                            .ok_or(ToolError::failed("no model"))?;
                        let turn = model
                            .ask(ctx.session_id(), vec![], "Describe it.")
                            .await
                            .map_err(|e| ToolError::failed(e.to_string()))?;
                        Ok(ToolOutput::new(json!(turn.text)))
                    },
                )
                .unwrap(),
            )
            .unwrap();
        let agent = Agent::builder(model)
            .registry(tools)
            .meter(meter)
            .build()
            .unwrap();
        let outcome = agent.send("s1", "Describe Oslo.").await.unwrap();
        assert_eq!(outcome.answer.as_deref(), Some("A fjord."));
        *counted = (outcome.usage(), agent.usage("s1").await.unwrap());
    });
    let all = Usage::new(160, 8);
    assert_eq!(usage, (all, all), "the tool's call counted once, in both");
    let chats = exported.named("chat default");
    assert_eq!(chats.len(), 3, "{:?}", exported.names());
    let tool = exported.one("execute_tool describe");
    let asked: Vec<_> = chats
        .iter()
        .filter(|c| c.parent_span_id == tool.span_context.span_id())
        .collect();
    assert_eq!(asked.len(), 1, "the tool's call, under the tool's span");
    assert_eq!(
        attribute(asked[0], "gen_ai.usage.input_tokens"),
        Some(&OtelValue::I64(10))
    );
    assert_eq!(attribute(asked[0], "kesoku.step"), None);
    assert_eq!(
        exported.count(
            "gen_ai.client.operation.duration",
            "gen_ai.operation.name=chat"
        ),
        3
    );
    assert_eq!(
        exported.count("gen_ai.client.token.usage", "gen_ai.token.type=input"),
        3
    );
}

/// Item 9: a kesoku MCP server's `tools/call` span of a tool that
/// returned an error has `error.type = tool_error` and the Error status.
#[test]
fn an_mcp_tool_error_is_marked_on_the_server_span() {
    use kesoku::mcp::{ImportOptions, McpClient, McpServer, Protocol};

    let exported = exported(|meter| async move {
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let (sr, sw) = tokio::io::split(server_side);
        tokio::spawn(McpServer::new(tools()).serve_io(sr, sw));
        let (cr, cw) = tokio::io::split(client_side);
        let client = McpClient::io("the weather server", cr, cw, Protocol::Auto)
            .await
            .unwrap();
        let mut imported = ToolRegistry::new();
        client
            .import(&mut imported, &ImportOptions::new().prefix("remote_"))
            .await
            .unwrap();
        let model = ScriptedLlm::from_json(json!([
            {"tool_calls": [
                {"id": "c1", "name": "remote_broken", "arguments": {"city": "Lima"}},
                {"id": "c2", "name": "remote_get_weather", "arguments": {"city": "Oslo"}}
            ]},
            {"text": "Done."}
        ]))
        .unwrap();
        let agent = Agent::builder(model)
            .registry(imported)
            .meter(meter)
            .build()
            .unwrap();
        assert_eq!(
            agent
                .send("s1", "Weather?")
                .await
                .unwrap()
                .answer
                .as_deref(),
            Some("Done.")
        );
    });
    let failed = exported.one("tools/call broken");
    assert_eq!(
        attribute(failed, "error.type")
            .map(ToString::to_string)
            .as_deref(),
        Some("tool_error")
    );
    assert!(
        matches!(failed.status, Status::Error { .. }),
        "{:?}",
        failed.status
    );
    let fine = exported.one("tools/call get_weather");
    assert_eq!(attribute(fine, "error.type"), None);
    assert_eq!(fine.status, Status::Unset);
}
