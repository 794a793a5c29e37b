//! Tool schemas are lowered once per declaration set, what the lowering
//! cost is logged once, and `deny_unsupported_schemas(true)` turns an
//! unrepresentable schema into a typed error before anything is sent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kesoku_core::lowering::{Dialect, LoweringReport, ReportEntry, Severity, lower};
use kesoku_core::{Message, MessageType, Role};
use kesoku_llm::{ClaudeLlm, GeminiLlm, Llm, LlmError, LlmOptions, OpenAiLlm, ToolDeclaration};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
mod common;
use common::{sent, server_answering};

/// The fields of every warning logged about a tool, by field name.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        if *event.metadata().level() != tracing::Level::WARN {
            return;
        }
        if fields.contains_key("tool") {
            self.0.lock().unwrap().push(fields);
        }
    }
}

impl Warnings {
    /// (tool, path) of each warning, in order.
    fn logged(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|f| (f["tool"].clone(), f["path"].clone()))
            .collect()
    }
}

/// The builder methods every backend has, for one test over all three.
trait Hooks: Llm + Sized {
    fn at(self, url: String) -> Self;
    fn deny(self) -> Self;
    fn report(&self, tools: &[ToolDeclaration]) -> Arc<LoweringReport>;
}

macro_rules! hooks {
    ($($ty:ty),*) => {$(
        impl Hooks for $ty {
            fn at(self, url: String) -> Self {
                self.with_base_url(url)
            }
            fn deny(self) -> Self {
                self.deny_unsupported_schemas(true)
            }
            fn report(&self, tools: &[ToolDeclaration]) -> Arc<LoweringReport> {
                self.lowering_report(tools)
            }
        }
    )*};
}
hooks!(ClaudeLlm, OpenAiLlm, GeminiLlm);

fn user() -> Message {
    Message::new("s", Role::User, MessageType::Text, "Hi")
}

fn declaration(name: &str, parameters: Value) -> ToolDeclaration {
    ToolDeclaration {
        name: name.into(),
        description: "A tool.".into(),
        parameters,
    }
}

/// What lowering `tool` to `dialect` costs: its lossy and unsupported
/// findings.
fn findings(dialect: Dialect, tool: &ToolDeclaration) -> Vec<ReportEntry> {
    let report = lower(dialect, &tool.name, &tool.parameters).report;
    report
        .entries
        .into_iter()
        .filter(|e| e.severity >= Severity::Lossy)
        .collect()
}

/// Two calls with the same tools lower them once and log each finding
/// once; another set is lowered again; with `deny`, the first unsupported
/// finding is the error and nothing reaches the server.
async fn check<L: Hooks>(make: impl Fn() -> L, dialect: Dialect, costly: ToolDeclaration) {
    let expected = findings(dialect, &costly);
    assert!(
        expected.iter().any(|e| e.severity == Severity::Unsupported),
        "the test schema must be unsupported for {dialect}: {expected:?}"
    );
    let plain = declaration(
        "plain",
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
    );
    let fixture_name = match make().provider() {
        "Claude" => "anthropic/text.json",
        "OpenAI" => "openai/text.json",
        _ => "gemini/text.json",
    };

    let warnings = Warnings::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    let server = server_answering(fixture_name, 4).await;
    let llm = make().at(server.uri());
    let first = llm.report(&[plain.clone(), costly.clone()]);
    for _ in 0..2 {
        // A fresh copy each time: the cache knows a set by its content.
        let tools = vec![plain.clone(), costly.clone()];
        llm.complete("s", &[user()], &tools, &LlmOptions::new("m"))
            .await
            .unwrap();
    }
    let again = llm.report(&[plain.clone(), costly.clone()]);
    assert!(Arc::ptr_eq(&first, &again), "one set, lowered once");
    let found: Vec<(String, String)> = again
        .iter()
        .filter(|e| e.severity >= Severity::Lossy)
        .map(|e| (e.tool.clone(), e.path.clone()))
        .collect();
    let logged = warnings.logged();
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|e| (e.tool.clone(), e.path.clone()))
        .collect();
    assert_eq!(
        logged, want,
        "each finding logged once, naming tool and path"
    );
    assert_eq!(found, want, "the report is what was logged");

    let options = LlmOptions::new("m");
    llm.complete("s", &[user()], std::slice::from_ref(&plain), &options)
        .await
        .unwrap();
    let other = llm.report(std::slice::from_ref(&plain));
    assert!(
        !Arc::ptr_eq(&other, &first),
        "another set is lowered on its own"
    );
    llm.complete("s", &[user()], &[plain.clone(), costly.clone()], &options)
        .await
        .unwrap();
    assert!(
        Arc::ptr_eq(&llm.report(&[plain.clone(), costly.clone()]), &first),
        "the first set is still cached"
    );
    assert_eq!(warnings.logged().len(), want.len(), "and not logged again");

    let silent = server_answering(fixture_name, 1).await;
    let strict = make().at(silent.uri()).deny();
    let tools = [plain, costly];
    let err = strict
        .complete("s", &[user()], &tools, &LlmOptions::new("m"))
        .await
        .unwrap_err();
    let first = expected
        .iter()
        .find(|e| e.severity == Severity::Unsupported)
        .unwrap();
    assert_eq!(
        err,
        LlmError::UnsupportedSchema {
            provider: strict.provider(),
            tool: first.tool.clone(),
            path: first.path.clone(),
            reason: first.detail.clone(),
        }
    );
    assert!(err.to_string().contains(&first.tool), "{err}");
    assert!(silent.received_requests().await.unwrap().is_empty());
    // A set without findings still goes through a denying backend.
    strict
        .complete("s", &[user()], &tools[..1], &LlmOptions::new("m"))
        .await
        .unwrap();
}

#[tokio::test]
async fn claude_lowers_once_warns_once_and_can_deny() {
    // Claude takes any schema with an object root, and nothing else.
    let costly = declaration(
        "listing",
        json!({"type": "array", "items": {"type": "string"}}),
    );
    check(|| ClaudeLlm::new("k"), Dialect::Anthropic, costly).await;
}

#[tokio::test]
async fn openai_lowers_once_warns_once_and_can_deny() {
    // Strict mode cannot express an open map.
    let costly = declaration(
        "weigh",
        json!({
            "type": "object",
            "properties": {
                "weights": {"type": "object", "additionalProperties": {"type": "number"}},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
            },
            "required": ["weights"],
            "additionalProperties": false
        }),
    );
    check(
        || OpenAiLlm::new("k").with_strict(true),
        Dialect::OpenAiStrict,
        costly,
    )
    .await;
}

#[tokio::test]
async fn gemini_lowers_once_warns_once_and_can_deny() {
    // The legacy `parameters` drop `uniqueItems` and cannot express a type
    // union without null.
    let costly = declaration(
        "tag",
        json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "value": {"type": ["string", "integer"]}
            },
            "required": ["tags"]
        }),
    );
    check(
        || GeminiLlm::new("k").with_legacy_parameters(true),
        Dialect::GeminiOpenApi,
        costly,
    )
    .await;
}

#[tokio::test]
async fn a_tool_declared_without_a_schema_is_not_lowered_or_judged() {
    // Gemini declares a tool without arguments with no schema at all, so
    // nothing about its (empty) schema can fail the call.
    let none = declaration("ping", json!({"type": "object", "properties": {}}));
    let (body, _) = sent(
        |t| {
            GeminiLlm::new("k")
                .with_legacy_parameters(true)
                .deny_unsupported_schemas(true)
                .with_transport(t)
        },
        "gemini/text.json",
        &[user()],
        &[none],
        &LlmOptions::new("m"),
    )
    .await;
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0],
        json!({"name": "ping", "description": "A tool."})
    );
}
