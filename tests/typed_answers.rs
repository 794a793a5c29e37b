//! Typed answers (`Agent::send_as`) against each provider's API on
//! loopback HTTP: the structured-output parameters on every request of
//! the turn, tools still running, a first answer that does not fit
//! repaired, the typed error once the tries run out, and a type the
//! provider cannot take refused before anything is sent.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use kesoku::agent::{Agent, TypedError};
use kesoku::llm::{ClaudeLlm, GeminiLlm, Llm, LlmError, OpenAiLlm};
use kesoku::store::MemoryStore;
use kesoku::{Gateway, Role, ToolArg, ToolRegistry, keys, tool};
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

/// One line of an invoice.
#[derive(Debug, PartialEq, Deserialize, ToolArg)]
struct Line {
    /// What was sold.
    item: String,
    /// Its price, in cents of the invoice's currency.
    cents: u64,
}

/// The invoice's currency.
#[derive(Debug, PartialEq, Deserialize, ToolArg)]
#[serde(rename_all = "lowercase")]
enum Currency {
    /// Euros.
    Eur,
    /// US dollars.
    Usd,
}

/// An invoice read from a text.
#[derive(Debug, PartialEq, Deserialize, ToolArg)]
struct Invoice {
    /// Who pays.
    customer: String,
    /// What was sold.
    lines: Vec<Line>,
    /// The currency.
    currency: Currency,
    /// A note, if the text has one.
    note: Option<String>,
}

/// The exchange rate of a currency to euros.
///
/// # Arguments
/// * `currency` - The currency's code, such as `usd`.
#[tool(register = false)]
fn exchange_rate(currency: String) -> f64 {
    if currency == "usd" { 0.92 } else { 1.0 }
}

const GOOD: &str = r#"{"customer": "ACME", "lines": [{"item": "anvil", "cents": 12000}], "currency": "usd", "note": null}"#;
/// `cents` a string, `currency` not one of the values.
const BAD: &str = r#"{"customer": "ACME", "lines": [{"item": "anvil", "cents": "120.00"}], "currency": "dollars", "note": null}"#;

/// One provider's wire forms, for the test's scripted replies.
#[derive(Clone, Copy, Debug)]
enum Provider {
    Claude,
    OpenAi,
    Gemini,
}

impl Provider {
    const ALL: [Provider; 3] = [Provider::Claude, Provider::OpenAi, Provider::Gemini];

    fn model(self, uri: &str) -> Box<dyn Llm> {
        match self {
            Provider::Claude => Box::new(ClaudeLlm::new("k").with_base_url(uri)),
            Provider::OpenAi => Box::new(OpenAiLlm::new("k").with_base_url(format!("{uri}/v1"))),
            Provider::Gemini => Box::new(GeminiLlm::new("k").with_base_url(uri)),
        }
    }

    fn text(self, text: &str) -> Value {
        match self {
            Provider::Claude => json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }),
            Provider::OpenAi => json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            }),
            Provider::Gemini => json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}
            }),
        }
    }

    fn call(self) -> Value {
        match self {
            Provider::Claude => json!({
                "id": "msg_0", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "exchange_rate", "input": {"currency": "usd"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 5}
            }),
            Provider::OpenAi => json!({
                "id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "exchange_rate", "arguments": "{\"currency\": \"usd\"}"}}
                ]}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            }),
            Provider::Gemini => json!({
                "candidates": [{"content": {"role": "model", "parts": [
                    {"functionCall": {"id": "fc_1", "name": "exchange_rate", "args": {"currency": "usd"}}}
                ]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}
            }),
        }
    }

    /// The answer's schema as sent, asserting the mode's parameters.
    fn sent_schema(self, body: &Value) -> Value {
        match self {
            Provider::Claude => {
                let format = &body["output_config"]["format"];
                assert_eq!(format["type"], "json_schema", "{body}");
                format["schema"].clone()
            }
            Provider::OpenAi => {
                let format = &body["response_format"];
                assert_eq!(format["type"], "json_schema", "{body}");
                assert_eq!(format["json_schema"]["name"], "Invoice");
                assert_eq!(format["json_schema"]["strict"], true);
                format["json_schema"]["schema"].clone()
            }
            Provider::Gemini => {
                let config = &body["generationConfig"];
                assert_eq!(config["responseMimeType"], "application/json", "{body}");
                config["responseJsonSchema"].clone()
            }
        }
    }

    /// The last turn of the request's history, as text.
    fn last_turn(self, body: &Value) -> String {
        match self {
            Provider::Claude | Provider::OpenAi => {
                let last = body["messages"].as_array().unwrap().last().unwrap().clone();
                assert_eq!(last["role"], "user", "{body}");
                last["content"].to_string()
            }
            Provider::Gemini => {
                let last = body["contents"].as_array().unwrap().last().unwrap().clone();
                assert_eq!(last["role"], "user", "{body}");
                last["parts"].to_string()
            }
        }
    }
}

/// Replies in order, one per request.
struct Script(Mutex<VecDeque<Value>>);

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        match self.0.lock().unwrap().pop_front() {
            Some(body) => ResponseTemplate::new(200).set_body_json(body),
            None => ResponseTemplate::new(500).set_body_string("the script ran out"),
        }
    }
}

struct Setup {
    server: MockServer,
    agent: Agent,
}

async fn setup(provider: Provider, replies: Vec<Value>, repairs: usize) -> Setup {
    let server = MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Script(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    let mut tools = ToolRegistry::new();
    tools.register(exchange_rate::TOOL).unwrap();
    let mut builder = Agent::builder(provider.model(&server.uri()))
        .registry(tools)
        .gateway(Gateway::new(MemoryStore::new()))
        .streaming(false)
        .output_repairs(repairs);
    if matches!(provider, Provider::Gemini) {
        // A model that takes tools beside the JSON mode.
        builder = builder.model("gemini-3-flash-preview");
    }
    let agent = builder.build().unwrap();
    Setup { server, agent }
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn expected() -> Invoice {
    Invoice {
        customer: "ACME".into(),
        lines: vec![Line {
            item: "anvil".into(),
            cents: 12000,
        }],
        currency: Currency::Usd,
        note: None,
    }
}

#[tokio::test]
async fn a_typed_turn_returns_the_value_with_tools_running_on_the_way() {
    for provider in Provider::ALL {
        let s = setup(provider, vec![provider.call(), provider.text(GOOD)], 1).await;
        let typed = s
            .agent
            .send_as::<Invoice>("s", "Read this invoice: ACME bought an anvil for $120.")
            .await
            .unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        assert_eq!(typed.value, expected(), "{provider:?}");
        assert_eq!(typed.outcome.answer.as_deref(), Some(GOOD));
        // The tool ran in the turn.
        let result = typed
            .outcome
            .messages
            .iter()
            .find(|m| m.role == Role::Tool)
            .unwrap_or_else(|| panic!("{provider:?}: no tool result"));
        assert_eq!(result.content, "0.92", "{provider:?}");
        // Both model calls asked for the shape, lowered for the provider.
        let sent = bodies(&s.server).await;
        assert_eq!(sent.len(), 2, "{provider:?}");
        for body in &sent {
            let schema = provider.sent_schema(body);
            assert_eq!(
                schema["properties"]["currency"]["enum"],
                json!(["eur", "usd"]),
                "{provider:?}"
            );
        }
        let schema = provider.sent_schema(&sent[0]);
        match provider {
            Provider::OpenAi => {
                // Strict: every property listed, the option nullable.
                assert_eq!(
                    schema["required"],
                    json!(["customer", "lines", "currency", "note"])
                );
                assert_eq!(schema["additionalProperties"], false);
            }
            Provider::Claude => {
                // Closed objects, no numeric bounds (moved into descriptions).
                assert_eq!(schema["additionalProperties"], false);
                let cents = &schema["properties"]["lines"]["items"]["properties"]["cents"];
                assert!(cents.get("minimum").is_none(), "{cents}");
            }
            Provider::Gemini => {
                assert_eq!(schema["properties"]["customer"]["type"], "string");
            }
        }
    }
}

#[tokio::test]
async fn an_answer_that_does_not_fit_is_shown_its_problems_and_repaired() {
    for provider in Provider::ALL {
        let s = setup(provider, vec![provider.text(BAD), provider.text(GOOD)], 1).await;
        let typed = s
            .agent
            .send_as::<Invoice>("s", "Read this invoice.")
            .await
            .unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        assert_eq!(typed.value, expected(), "{provider:?}");
        let sent = bodies(&s.server).await;
        assert_eq!(sent.len(), 2, "{provider:?}");
        // The second request ends with the feedback, as the user's turn,
        // naming each problem by its path.
        let feedback = provider.last_turn(&sent[1]);
        assert!(
            feedback.contains("lines[0].cents"),
            "{provider:?}: {feedback}"
        );
        assert!(feedback.contains("`currency`"), "{provider:?}: {feedback}");
        provider.sent_schema(&sent[1]);
        // Nothing the model wrote is lost.
        let history = s.agent.history("s").await.unwrap();
        let answers: Vec<&str> = history
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(answers, [BAD, GOOD], "{provider:?}");
        assert!(
            history
                .iter()
                .any(|m| m.metadata.contains_key(keys::FEEDBACK))
        );
    }
}

#[tokio::test]
async fn after_the_last_try_the_error_holds_the_text_and_its_problems() {
    for provider in Provider::ALL {
        let s = setup(provider, vec![provider.text(BAD), provider.text(BAD)], 1).await;
        let error = s
            .agent
            .send_as::<Invoice>("s", "Read this invoice.")
            .await
            .unwrap_err();
        let TypedError::Invalid { error, outcome } = error else {
            panic!("{provider:?}: {error:?}");
        };
        assert_eq!(error.raw, BAD);
        let paths: Vec<&str> = error.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["lines[0].cents", "currency"],
            "{provider:?}: {error}"
        );
        assert_eq!(outcome.answer.as_deref(), Some(BAD));
        assert_eq!(bodies(&s.server).await.len(), 2, "{provider:?}");
        let history = s.agent.history("s").await.unwrap();
        assert_eq!(
            history.iter().filter(|m| m.role == Role::Assistant).count(),
            2,
            "{provider:?}"
        );
    }
    // With no repairs, the first answer is the last.
    let s = setup(Provider::Claude, vec![Provider::Claude.text(BAD)], 0).await;
    let error = s.agent.send_as::<Invoice>("s", "Read.").await.unwrap_err();
    assert!(matches!(error, TypedError::Invalid { .. }), "{error:?}");
    assert_eq!(bodies(&s.server).await.len(), 1);
}

/// Scores by name: an open map, which no structured-output mode takes.
#[derive(Debug, Deserialize, ToolArg)]
struct Scores {
    /// Each player's score.
    by_player: HashMap<String, u32>,
}

#[tokio::test]
async fn a_type_the_provider_cannot_take_is_refused_before_anything_is_sent() {
    for provider in Provider::ALL {
        if matches!(provider, Provider::Gemini) {
            // Gemini's JSON Schema mode takes open maps.
            let s = setup(
                provider,
                vec![provider.text(r#"{"by_player":{"ann":3}}"#)],
                1,
            )
            .await;
            let typed = s.agent.send_as::<Scores>("s", "Who scored what?").await;
            assert_eq!(typed.unwrap().value.by_player["ann"], 3);
            continue;
        }
        let s = setup(provider, vec![provider.text("{}")], 1).await;
        let error = s
            .agent
            .send_as::<Scores>("s", "Who scored what?")
            .await
            .unwrap_err();
        let TypedError::Unsupported(LlmError::UnsupportedOutput { output, path, .. }) = &error
        else {
            panic!("{provider:?}: {error:?}");
        };
        assert_eq!(output, "Scores");
        assert_eq!(path, "/properties/by_player/additionalProperties");
        assert!(
            error
                .to_string()
                .contains("cannot take the answer type `Scores`"),
            "{error}"
        );
        assert!(bodies(&s.server).await.is_empty(), "{provider:?}");
        assert!(
            s.agent.history("s").await.unwrap().is_empty(),
            "{provider:?}"
        );
    }
}

#[tokio::test]
async fn gemini_2_with_tools_is_told_the_shape_and_held_to_it() {
    // Gemini 2.x refuses function calling beside a JSON response type.
    let server = MockServer::start().await;
    let provider = Provider::Gemini;
    let replies = vec![provider.call(), provider.text(GOOD)];
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Script(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    let mut tools = ToolRegistry::new();
    tools.register(exchange_rate::TOOL).unwrap();
    let agent = Agent::builder(GeminiLlm::new("k").with_base_url(server.uri()))
        .registry(tools)
        .model("gemini-2.5-flash")
        .streaming(false)
        .build()
        .unwrap();
    let typed = agent
        .send_as::<Invoice>("s", "Read the invoice.")
        .await
        .unwrap();
    assert_eq!(typed.value, expected());
    for body in bodies(&server).await {
        assert!(body["tools"].is_array(), "{body}");
        let config = &body["generationConfig"];
        assert!(config.get("responseMimeType").is_none(), "{body}");
        assert!(config.get("responseJsonSchema").is_none(), "{body}");
        let system = body["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert!(system.contains("named `Invoice`"), "{system}");
        assert!(
            system.contains(r#""required":["customer","lines","currency"]"#),
            "{system}"
        );
    }

    // Without tools the same model takes the JSON mode.
    let server = MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Script(Mutex::new(vec![provider.text(GOOD)].into())))
        .mount(&server)
        .await;
    let agent = Agent::builder(GeminiLlm::new("k").with_base_url(server.uri()))
        .registry(ToolRegistry::new())
        .model("gemini-2.5-flash")
        .streaming(false)
        .build()
        .unwrap();
    agent
        .send_as::<Invoice>("s", "Read the invoice.")
        .await
        .unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
}

#[tokio::test]
async fn an_openai_refusal_ends_the_turn_with_its_text() {
    let refusal = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "refusal": "I can't help with that."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    let s = setup(Provider::OpenAi, vec![refusal], 2).await;
    let error = s
        .agent
        .send_as::<Invoice>("s", "Read the invoice.")
        .await
        .unwrap_err();
    let TypedError::Invalid { error, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(error.raw, "I can't help with that.");
    // Not asked again: a refusal is not a mistake to repair.
    assert_eq!(bodies(&s.server).await.len(), 1);
}

/// Item 16 of issue 42: an answer cut at the output limit is told so,
/// in the repair's feedback and in the typed error, not as a JSON error.
#[tokio::test]
async fn an_answer_cut_at_the_output_limit_is_told_so() {
    let cut = json!({
        "id": "msg_0", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": r#"{"customer": "ACME", "lines": [{"cents": 1"#}],
        "stop_reason": "max_tokens", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 4096}
    });
    let s = setup(Provider::Claude, vec![cut.clone(), cut], 1).await;
    let error = s.agent.send_as::<Invoice>("s", "Read.").await.unwrap_err();
    let TypedError::Cut { error: problem, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(problem.to_string().contains("not JSON"), "{problem}");
    assert!(
        error.to_string().starts_with(
            "the answer was cut at the output limit (max_tokens) before it was complete"
        ),
        "{error}"
    );
    // The repair's feedback said why.
    let bodies = bodies(&s.server).await;
    assert_eq!(bodies.len(), 2);
    let feedback = Provider::Claude.last_turn(&bodies[1]);
    assert!(
        feedback.contains("cut at the output limit (max_tokens)"),
        "{feedback}"
    );
    assert!(feedback.contains("shorter"), "{feedback}");
}
