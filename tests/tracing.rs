//! Each tool call gets a `tracing` span (`execute_tool`, as
//! OpenTelemetry's GenAI conventions name it) with the tool name, call id,
//! duration and outcome; each agent turn (`invoke_agent`) and model call
//! (`chat`) gets one too. `tests/telemetry.rs` checks the conventions'
//! attributes in full.

use std::sync::{Arc, Mutex};

use kesoku::{Message, ToolContext, ToolRequest, ToolRunner, tool};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Every field recorded on `execute_tool` spans, as (name, value) text.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<(String, String)>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.name().to_owned(), value.to_string()));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name().to_owned(), value.to_string()));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "execute_tool" {
            attrs.record(&mut Fields(&mut self.0.lock().unwrap()));
        }
    }
    fn on_record(&self, _: &Id, values: &Record<'_>, _: Context<'_, S>) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
}

#[tokio::test]
async fn every_call_has_a_span_with_name_id_duration_and_outcome() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let runner = ToolRunner::new(kesoku::default_registry(), ToolContext::new("s"));
    for (id, args) in [
        ("call_ok", json!({"a": 1, "b": 2})),
        ("call_bad", json!({"a": 1})),
    ] {
        let request = ToolRequest::new(id, "add", args);
        runner
            .execute(&request, &Message::tool_call("s", &request), None)
            .await;
    }

    let fields = capture.0.lock().unwrap().clone();
    let get = |name: &str| -> Vec<&str> {
        fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(get("gen_ai.tool.name"), ["add", "add"]);
    assert_eq!(get("gen_ai.tool.call.id"), ["call_ok", "call_bad"]);
    assert_eq!(get("error.type"), ["invalid_arguments"]);
    assert_eq!(get("kesoku.outcome"), ["ok", "invalid_arguments"]);
    let durations = get("kesoku.duration_ms");
    assert_eq!(durations.len(), 2);
    assert!(
        durations
            .iter()
            .all(|d| d.parse::<f64>().is_ok_and(|ms| ms >= 0.0)),
        "{durations:?}"
    );
}

/// Every field recorded on any span, as (span name, field, value) text.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(String, String, String)>>>);

impl Spans {
    fn record(&self, span: &str, visit: impl FnOnce(&mut Fields<'_>)) {
        let mut fields = Vec::new();
        visit(&mut Fields(&mut fields));
        let mut all = self.0.lock().unwrap();
        for (name, value) in fields {
            all.push((span.to_owned(), name, value));
        }
    }

    fn get(&self, span: &str, field: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, f, _)| s == span && f == field)
            .map(|(_, _, v)| v.clone())
            .collect()
    }
}

impl<S> Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.record(attrs.metadata().name(), |f| attrs.record(f));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            self.record(span.metadata().name(), |f| values.record(f));
        }
    }
}

#[tokio::test]
async fn every_turn_and_model_call_has_a_span() {
    use kesoku::llm::{Agent, ScriptedLlm};

    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let model = ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c", "name": "add", "arguments": {"a": 1, "b": 2}}]},
        {"text": "{{c}}"}
    ]))
    .unwrap();
    let agent = Agent::builder(model)
        .registry(kesoku::default_registry())
        .model("scripted-model")
        .build()
        .unwrap();
    let outcome = agent.send("traced", "1+2?").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("3"));

    assert_eq!(spans.get("invoke_agent", "kesoku.session"), ["traced"]);
    assert_eq!(
        spans.get("invoke_agent", "gen_ai.conversation.id"),
        ["traced"]
    );
    assert_eq!(spans.get("invoke_agent", "kesoku.steps"), ["2"]);
    assert_eq!(spans.get("invoke_agent", "kesoku.status"), ["Completed"]);
    assert_eq!(spans.get("chat", "kesoku.step"), ["1", "2"]);
    assert_eq!(
        spans.get("chat", "gen_ai.request.model"),
        ["scripted-model", "scripted-model"]
    );
    assert_eq!(
        spans.get("chat", "gen_ai.provider.name"),
        ["scripted", "scripted"]
    );
    assert_eq!(spans.get("chat", "gen_ai.usage.output_tokens").len(), 2);
    assert_eq!(spans.get("execute_tool", "gen_ai.tool.name"), ["add"]);
}
