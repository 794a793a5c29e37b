//! Captures the request bodies the backends build for a set of demo
//! `#[tool]`s and conversations, so `.ci/run` can check them against the
//! official Python SDKs' types (`tools/conformance/check.py`): Claude,
//! OpenAI Chat Completions (and Azure's, in `openai/azure_*`), Gemini, and
//! OpenAI Responses (and Azure's, in `openai_responses/azure_*`), the
//! Responses bodies one-shot and streamed (`*_stream`).
//!
//! The bodies go to `$KESOKU_CONFORMANCE_DIR/requests/<provider>/` (default
//! `target/conformance`). The test itself checks the invariants every
//! provider documents, so it fails on its own too.

use std::collections::BTreeMap;
use std::path::PathBuf;

use std::sync::Arc;

use futures_util::StreamExt as _;
use kesoku::llm::testing::CaptureTransport;
use kesoku::llm::{
    AzureOpenAiLlm, AzureResponsesLlm, ClaudeLlm, ContentBlock, GeminiLlm, Llm, LlmOptions,
    OpenAiLlm, OpenAiResponsesLlm, ToolChoice, ToolDeclaration,
};
use kesoku::{Message, MessageType, OutputSchema, Role, ToolArg, ToolRequest, tool};
use serde::Deserialize;
use serde_json::{Value, json};

/// A temperature unit.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// Reports the weather for a city.
///
/// # Arguments
/// * `city` - The city.
/// * `unit` - The unit to report in.
/// * `days` - How many days ahead.
#[tool]
fn get_weather(city: String, unit: Option<Unit>, #[arg(default = 1)] days: u8) -> String {
    format!("sunny in {city} for {days} days ({unit:?})")
}

/// A filter.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // exists for its schema
#[serde(tag = "kind", rename_all = "snake_case")]
enum Filter {
    /// By tag.
    Tag {
        /// The tag.
        tag: String,
    },
    /// By score.
    MinScore {
        /// The lowest score.
        score: f64,
    },
}

/// Searches notes.
///
/// # Arguments
/// * `query` - What to look for.
/// * `filters` - Filters to apply.
/// * `weights` - Field weights.
/// * `limit` - At most this many.
#[tool]
#[allow(clippy::needless_pass_by_value)]
fn search_notes(
    query: String,
    filters: Vec<Filter>,
    weights: BTreeMap<String, f32>,
    limit: Option<u32>,
) -> Vec<String> {
    let _ = (filters, weights, limit);
    vec![query]
}

/// The sky on a day.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // exists for its schema
#[serde(tag = "kind", rename_all = "snake_case")]
enum Sky {
    /// No clouds.
    Clear,
    /// Rain.
    Rain {
        /// How much, in millimetres.
        mm: f64,
    },
}

/// One day of a forecast.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // exists for its schema
struct Day {
    /// The highest temperature.
    high: f64,
    /// The sky.
    sky: Sky,
}

/// A forecast: the typed answer the `typed_output` scenarios ask for.
#[derive(Debug, Deserialize, ToolArg)]
#[allow(dead_code)] // exists for its schema
struct Forecast {
    /// The city.
    city: String,
    /// The unit of the temperatures.
    unit: Unit,
    /// One entry per day.
    days: Vec<Day>,
    /// A warning, if there is one.
    warning: Option<String>,
}

fn out_dir() -> PathBuf {
    std::env::var_os("KESOKU_CONFORMANCE_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/conformance"),
        PathBuf::from,
    )
}

fn save(provider: &str, name: &str, body: &Value) {
    let dir = out_dir().join("requests").join(provider);
    std::fs::create_dir_all(&dir).unwrap();
    let text = serde_json::to_string_pretty(body).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

/// A whole conversation: text, a turn with two calls, one ok and one
/// failed result, media in a user message and in a result.
fn conversation() -> Vec<Message> {
    let s = "conformance";
    let mut out = vec![
        Message::new(
            s,
            Role::System,
            MessageType::Text,
            "You are a helpful assistant.",
        ),
        Message::new(
            s,
            Role::User,
            MessageType::Text,
            "Weather in Oslo and notes on Lima?",
        ),
        Message::new(s, Role::Assistant, MessageType::Text, "Checking both."),
    ];
    let a = ToolRequest::new(
        "call_A",
        "get_weather",
        json!({"city": "Oslo", "unit": "celsius"}),
    );
    let b = ToolRequest::new(
        "call_B",
        "search_notes",
        json!("{\"query\": \"Lima\", \"filters\": []}"),
    );
    let call_a = Message::tool_call(s, &a);
    let call_b = Message::tool_call(s, &b);
    let mut ok = Message::new(s, Role::Tool, MessageType::ToolResult, "sunny in Oslo")
        .with_parent(call_a.id.clone());
    ok.metadata
        .insert("tool_result".into(), json!("sunny in Oslo"));
    ok.metadata.insert(
        "content_blocks".into(),
        serde_json::to_value([ContentBlock::image("image/png", vec![137, 80, 78, 71])]).unwrap(),
    );
    let mut failed = Message::new(
        s,
        Role::Tool,
        MessageType::ToolResult,
        "Error: argument `weights` is required",
    )
    .with_parent(call_b.id.clone());
    failed
        .metadata
        .insert("tool_error".into(), json!("argument `weights` is required"));
    let mut photo = Message::new(s, Role::User, MessageType::Text, "And what is in these?");
    photo.metadata.insert(
        "content_blocks".into(),
        serde_json::to_value([
            ContentBlock::image("image/jpeg", vec![255, 216, 255]),
            ContentBlock::document("application/pdf", b"%PDF-1.4".to_vec()),
            ContentBlock::media("audio/wav", b"RIFF".to_vec()),
        ])
        .unwrap(),
    );
    out.extend([call_a, call_b, ok, failed, photo]);
    out
}

/// A minimal reply of each provider, for the captured requests' answers.
fn reply(provider: &str) -> Value {
    match provider {
        "anthropic" => json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}
        }),
        "openai" => json!({
            "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
        }),
        _ => json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
        }),
    }
}

/// The body `llm` sends for `msgs`, encoded whole: each scenario is the
/// first request of a session of its own.
async fn body_of(
    llm: &dyn Llm,
    capture: &CaptureTransport,
    scenario: &str,
    msgs: &[Message],
    tools: &[ToolDeclaration],
    opts: &LlmOptions,
) -> Value {
    capture.clear();
    llm.complete(scenario, msgs, tools, opts)
        .await
        .unwrap_or_else(|e| panic!("{scenario}: {e}"));
    capture.last_json().expect("a request was sent")
}

/// The body `llm` sends for `msgs` streamed (the reply, JSON, is read
/// whole, as from a server that does not stream).
async fn streamed_body_of(
    llm: &dyn Llm,
    capture: &CaptureTransport,
    scenario: &str,
    msgs: &[Message],
    tools: &[ToolDeclaration],
    opts: &LlmOptions,
) -> Value {
    capture.clear();
    let events: Vec<_> = llm.stream(scenario, msgs, tools, opts).collect().await;
    assert!(
        matches!(events.last(), Some(Ok(kesoku::llm::StreamEvent::Done(_)))),
        "{scenario}: {events:?}"
    );
    let body = capture.last_json().expect("a request was sent");
    assert_eq!(body["stream"], true, "{scenario}");
    body
}

/// A recorded Responses reply (`kesoku-llm/tests/fixtures/openai_responses/`).
fn recorded(name: &str) -> Value {
    let path = format!(
        "{}/kesoku-llm/tests/fixtures/openai_responses/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The recorded Responses reply with reasoning and two calls.
fn responses_reply() -> Value {
    recorded("two_calls")
}

/// The question, then a turn of OpenAI's built-in tools (reasoning, a web
/// search, a code interpreter run, the answer), then the next question.
async fn after_builtin_tools() -> Vec<Message> {
    let capture = Arc::new(CaptureTransport::json(&recorded("builtin_tools")));
    let llm = OpenAiResponsesLlm::new("k").with_transport(capture);
    let ask = |text: &str| Message::new("b", Role::User, MessageType::Text, text);
    let mut history = vec![ask("Weather in Oslo, and 2 + 2?")];
    let turn = llm
        .complete("first", &history, &[], &LlmOptions::new("gpt-5"))
        .await
        .unwrap();
    history.extend(turn.messages().cloned());
    history.push(ask("Thanks"));
    history
}

/// The user's question, a Responses turn with reasoning and two calls
/// (its output items kept), and both results: the history a stateless
/// request sends the reasoning back in.
async fn after_a_responses_turn(tools: &[ToolDeclaration]) -> Vec<Message> {
    let capture = Arc::new(CaptureTransport::json(&responses_reply()));
    let llm = OpenAiResponsesLlm::new("k").with_transport(capture);
    let mut history = vec![Message::new(
        "r",
        Role::User,
        MessageType::Text,
        "Weather in Oslo and Lima?",
    )];
    let turn = llm
        .complete("first", &history, tools, &LlmOptions::new("gpt-5"))
        .await
        .unwrap();
    history.extend(turn.messages().cloned());
    for call in &turn.calls {
        history.push(
            Message::new("r", Role::Tool, MessageType::ToolResult, "sunny")
                .with_parent(call.message.id.clone()),
        );
    }
    history
}

/// A scenario: its name, the backend, the history, the tools, the options.
type Scenario<'a> = (
    &'a str,
    &'a dyn Llm,
    &'a [Message],
    &'a [ToolDeclaration],
    &'a LlmOptions,
);

/// Responses and Azure's bodies: the scenarios each one-shot and
/// streamed, every input item kind among them.
async fn capture_responses(tools: &[ToolDeclaration], history: &[Message]) {
    let simple = [Message::new("c", Role::User, MessageType::Text, "Hi")];
    let replayed = after_a_responses_turn(tools).await;
    let builtin_history = after_builtin_tools().await;
    let mut options = LlmOptions::new("gpt-5");
    options.temperature = Some(0.2);
    options.system = Some("Be brief.".into());
    let mut forced = LlmOptions::new("gpt-5");
    forced.tool_choice = ToolChoice::Tool("get_weather".into());
    let mut any = LlmOptions::new("gpt-5");
    any.tool_choice = ToolChoice::Any;
    let typed = LlmOptions::new("gpt-5").with_output(OutputSchema::of::<Forecast>());

    let capture = Arc::new(CaptureTransport::json(&responses_reply()));
    let plain = OpenAiResponsesLlm::new("k").with_transport(Arc::clone(&capture));
    let strict = OpenAiResponsesLlm::new("k")
        .with_strict(true)
        .with_transport(Arc::clone(&capture));
    let chained = OpenAiResponsesLlm::new("k")
        .with_previous_response_id(true)
        .with_transport(Arc::clone(&capture));
    let builtin = OpenAiResponsesLlm::new("k")
        .with_builtin_tool(json!({"type": "web_search"}))
        .with_builtin_tool(json!({"type": "code_interpreter", "container": {"type": "auto"}}))
        .with_transport(Arc::clone(&capture));
    let azure = AzureResponsesLlm::new("https://res.openai.azure.com", "k")
        .with_api_version("2025-04-01-preview")
        .with_transport(Arc::clone(&capture));
    let scenarios: [Scenario<'_>; 12] = [
        ("text_only", &plain, &simple[..], &[][..], &options),
        ("conversation", &plain, history, tools, &options),
        ("forced_tool", &plain, &simple[..], tools, &forced),
        ("any_tool", &plain, &simple[..], tools, &any),
        ("strict", &strict, history, tools, &options),
        ("typed_output", &plain, history, tools, &typed),
        ("replayed_reasoning", &plain, &replayed[..], tools, &options),
        ("chained", &chained, &replayed[..], tools, &options),
        ("builtin_tools", &builtin, &simple[..], tools, &options),
        (
            "replayed_builtin_tools",
            &builtin,
            &builtin_history[..],
            &[][..],
            &options,
        ),
        ("azure_typed_output", &azure, history, tools, &typed),
        (
            "azure_replayed_reasoning",
            &azure,
            &replayed[..],
            tools,
            &options,
        ),
    ];
    for (name, llm, msgs, tools, opts) in scenarios {
        let body = body_of(llm, &capture, name, msgs, tools, opts).await;
        save("openai_responses", name, &body);
        let body =
            streamed_body_of(llm, &capture, &format!("{name}_stream"), msgs, tools, opts).await;
        save("openai_responses", &format!("{name}_stream"), &body);
    }
    // The reasoning went back, encrypted, before the items it preceded.
    let sent = body_of(&plain, &capture, "again", &replayed, tools, &options).await;
    let kinds: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "message",
            "function_call",
            "reasoning",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert!(sent["input"][1]["encrypted_content"].is_string());
    capture_azure_chat(tools, history, &options, &typed).await;
}

/// Azure's Chat Completions bodies, one-shot and streamed.
async fn capture_azure_chat(
    tools: &[ToolDeclaration],
    history: &[Message],
    options: &LlmOptions,
    typed: &LlmOptions,
) {
    let to_chat = Arc::new(CaptureTransport::json(&reply("openai")));
    let azure_chat = AzureOpenAiLlm::new("https://res.openai.azure.com", "k")
        .with_api_version("2024-10-21")
        .with_transport(Arc::clone(&to_chat));
    let body = body_of(
        &azure_chat,
        &to_chat,
        "azure_conversation",
        history,
        tools,
        options,
    )
    .await;
    save("openai", "azure_conversation", &body);
    let body = body_of(
        &azure_chat,
        &to_chat,
        "azure_typed_output",
        history,
        tools,
        typed,
    )
    .await;
    save("openai", "azure_typed_output", &body);
    let body = streamed_body_of(
        &azure_chat,
        &to_chat,
        "azure_stream",
        history,
        tools,
        options,
    )
    .await;
    save("openai", "azure_stream", &body);
}

#[tokio::test]
async fn capture_request_bodies() {
    // Start clean, so a scenario removed here is not checked from a stale file.
    let _ = std::fs::remove_dir_all(out_dir().join("requests"));
    let registry = kesoku::default_registry();
    let tools = ToolDeclaration::all(registry);
    assert_eq!(tools.len(), 2);
    let history = conversation();
    let simple = [Message::new("c", Role::User, MessageType::Text, "Hi")];
    let mut options = LlmOptions::new("model-x");
    options.temperature = Some(0.2);
    let mut forced = LlmOptions::new("model-x");
    forced.tool_choice = ToolChoice::Tool("get_weather".into());
    let mut any = LlmOptions::new("model-x");
    any.tool_choice = ToolChoice::Any;
    let typed = LlmOptions::new("model-x").with_output(OutputSchema::of::<Forecast>());

    let to_claude = Arc::new(CaptureTransport::json(&reply("anthropic")));
    let claude = ClaudeLlm::new("k").with_transport(Arc::clone(&to_claude));
    for (name, msgs, tools, opts) in [
        ("text_only", &simple[..], &[][..], &options),
        ("conversation", &history[..], &tools[..], &options),
        ("forced_tool", &simple[..], &tools[..], &forced),
        ("any_tool", &simple[..], &tools[..], &any),
        ("typed_output", &history[..], &tools[..], &typed),
    ] {
        let body = body_of(&claude, &to_claude, name, msgs, tools, opts).await;
        save("anthropic", name, &body);
    }
    let claude_conv = body_of(&claude, &to_claude, "again", &history, &tools, &options).await;
    // Every tool_use is answered in the next user message, results first.
    let msgs = claude_conv["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][1]["type"], "tool_result");

    let to_openai = Arc::new(CaptureTransport::json(&reply("openai")));
    let openai = OpenAiLlm::new("k").with_transport(Arc::clone(&to_openai));
    let strict = OpenAiLlm::new("k")
        .with_strict(true)
        .with_transport(Arc::clone(&to_openai));
    let ollama =
        OpenAiLlm::compatible("http://localhost:11434/v1").with_transport(Arc::clone(&to_openai));
    for (name, llm, msgs, tools, opts) in [
        ("text_only", &openai, &simple[..], &[][..], &options),
        ("conversation", &openai, &history[..], &tools[..], &options),
        ("forced_tool", &openai, &simple[..], &tools[..], &forced),
        ("any_tool", &openai, &simple[..], &tools[..], &any),
        ("strict", &strict, &history[..], &tools[..], &options),
        ("compatible", &ollama, &history[..], &tools[..], &options),
        ("typed_output", &openai, &history[..], &tools[..], &typed),
        (
            "typed_output_compatible",
            &ollama,
            &simple[..],
            &[][..],
            &typed,
        ),
    ] {
        let body = body_of(llm, &to_openai, name, msgs, tools, opts).await;
        save("openai", name, &body);
    }

    let to_gemini = Arc::new(CaptureTransport::json(&reply("gemini")));
    let gemini = GeminiLlm::new("k").with_transport(Arc::clone(&to_gemini));
    let legacy = GeminiLlm::new("k")
        .with_legacy_parameters(true)
        .with_transport(Arc::clone(&to_gemini));
    for (name, llm, msgs, tools, opts) in [
        ("text_only", &gemini, &simple[..], &[][..], &options),
        ("conversation", &gemini, &history[..], &tools[..], &options),
        ("forced_tool", &gemini, &simple[..], &tools[..], &forced),
        (
            "legacy_parameters",
            &legacy,
            &history[..],
            &tools[..],
            &options,
        ),
        ("typed_output", &gemini, &history[..], &tools[..], &typed),
        ("typed_output_legacy", &legacy, &simple[..], &[][..], &typed),
    ] {
        let body = body_of(llm, &to_gemini, name, msgs, tools, opts).await;
        // Gemini wants user and model turns to alternate.
        let roles: Vec<&str> = body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["role"].as_str().unwrap())
            .collect();
        assert!(roles.windows(2).all(|w| w[0] != w[1]), "{name}: {roles:?}");
        save("gemini", name, &body);
    }

    capture_responses(&tools, &history).await;
}
