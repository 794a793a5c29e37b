//! A backend keeps each session's encoded history and, on the session's
//! next request, encodes only the messages added since. Whatever the
//! history, every request must be exactly the one encoding it whole would
//! give: the same body, the same fallbacks. Histories here mix every kind
//! of message (results before or without their calls, system notes,
//! thoughts, blocks, Gemini's replayed parts, OpenAI Responses' output
//! items, several wire items to a message), grow by random steps, and
//! sometimes change under the cache (a rewind, an edit, other
//! instructions), which must be noticed.

use std::cell::Cell;
use std::sync::Arc;

use kesoku::llm::testing::CaptureTransport;
use kesoku::llm::{
    ClaudeLlm, ContentBlock, GeminiLlm, Llm, LlmOptions, OpenAiLlm, OpenAiResponsesLlm,
    PROVIDER_KEY, ToolDeclaration,
};
use kesoku::{Message, MessageType, Role, ToolRequest, keys};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One message to add, chosen by the strategy.
#[derive(Debug, Clone)]
enum Step {
    User(String),
    Assistant(String),
    Thought,
    System(String),
    /// A tool call; `true`: it is followed at once by its result.
    Call(bool),
    /// A result for the `n`th call so far (modulo), or for no known call.
    Result(Option<usize>, Attach),
    /// A result stored before its call, which comes this many steps later
    /// (if that step is a call).
    Early(usize),
    /// An assistant reply Gemini replays verbatim, with the turn's calls.
    Replayed(u8),
    /// A Responses turn: its text and calls, each with the output items
    /// (reasoning first) it is sent back as.
    Items(u8),
}

#[derive(Debug, Clone, Copy)]
enum Attach {
    None,
    Image,
    Document,
    Error,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => "[a-z ]{0,12}".prop_map(Step::User),
        3 => "[a-z ]{0,12}".prop_map(Step::Assistant),
        1 => Just(Step::Thought),
        1 => "[a-z]{1,8}".prop_map(Step::System),
        4 => any::<bool>().prop_map(Step::Call),
        3 => (
            proptest::option::weighted(0.9, 0..8usize),
            prop_oneof![
                Just(Attach::None),
                Just(Attach::Image),
                Just(Attach::Document),
                Just(Attach::Error)
            ]
        )
            .prop_map(|(n, a)| Step::Result(n, a)),
        1 => (1..3u8).prop_map(Step::Replayed),
        1 => (0..3u8).prop_map(Step::Items),
        1 => (1..4usize).prop_map(Step::Early),
    ]
}

/// Builds the history the steps describe.
fn history(steps: &[Step]) -> Vec<Message> {
    let s = "s";
    let mut out: Vec<Message> = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::User(t) => out.push(Message::new(s, Role::User, MessageType::Text, t)),
            Step::Assistant(t) => {
                out.push(Message::new(s, Role::Assistant, MessageType::Text, t));
            }
            Step::Thought => out.push(Message::new(
                s,
                Role::Assistant,
                MessageType::Thought,
                "hmm",
            )),
            Step::System(t) => out.push(Message::new(s, Role::System, MessageType::Text, t)),
            Step::Call(answered) => {
                let request = ToolRequest::new(
                    format!("c{i}"),
                    "get_weather",
                    json!({"city": format!("city {i}")}),
                );
                let mut call = Message::tool_call(s, &request);
                // A known id, for results stored before their call.
                call.id = format!("m{i}");
                calls.push(call.id.clone());
                let result = Message::new(s, Role::Tool, MessageType::ToolResult, "sunny")
                    .with_parent(call.id.clone());
                out.push(call);
                if *answered {
                    out.push(result);
                }
            }
            Step::Result(n, attach) => {
                let parent = match n {
                    Some(n) if !calls.is_empty() => calls[n % calls.len()].clone(),
                    _ => format!("missing-{i}"),
                };
                let mut m = Message::new(s, Role::Tool, MessageType::ToolResult, "result")
                    .with_parent(parent);
                m.metadata
                    .insert(keys::CALL_ID.into(), format!("own{i}").into());
                let block = match attach {
                    Attach::None => None,
                    Attach::Image => Some(ContentBlock::image("image/png", vec![1, 2, 3])),
                    Attach::Document => Some(ContentBlock::document("application/pdf", vec![4, 5])),
                    Attach::Error => {
                        m.metadata.insert(keys::TOOL_ERROR.into(), "boom".into());
                        None
                    }
                };
                if let Some(block) = block {
                    m.metadata.insert(
                        keys::CONTENT_BLOCKS.into(),
                        serde_json::to_value([block]).unwrap(),
                    );
                }
                out.push(m);
            }
            Step::Early(ahead) => {
                let parent = format!("m{}", i + ahead);
                out.push(
                    Message::new(s, Role::Tool, MessageType::ToolResult, "early")
                        .with_parent(parent),
                );
            }
            Step::Replayed(calls_in_turn) => {
                let turn = format!("t{i}");
                let mut parts = vec![json!({"text": "let me see", "thoughtSignature": "sig"})];
                let mut text = Message::new(s, Role::Assistant, MessageType::Text, "let me see");
                let mut turn_messages = Vec::new();
                for k in 0..*calls_in_turn {
                    let request =
                        ToolRequest::new(format!("g{i}-{k}"), "get_weather", json!({"city": "x"}));
                    parts.push(
                        json!({"functionCall": {"name": "get_weather", "args": {"city": "x"}}}),
                    );
                    let mut call = Message::tool_call(s, &request);
                    call.metadata
                        .insert(PROVIDER_KEY.into(), json!({"turn": turn}));
                    calls.push(call.id.clone());
                    turn_messages.push(call);
                }
                text.metadata
                    .insert(PROVIDER_KEY.into(), json!({"turn": turn, "parts": parts}));
                out.push(text);
                out.extend(turn_messages);
            }
            Step::Items(calls_in_turn) => responses_turn(&mut out, &mut calls, i, *calls_in_turn),
        }
    }
    out
}

/// A Responses turn at step `i`: its text with a reasoning item and the
/// message item, then `calls_in_turn` calls, each with its reasoning and
/// function call items.
fn responses_turn(out: &mut Vec<Message>, calls: &mut Vec<String>, i: usize, calls_in_turn: u8) {
    let s = "s";
    let reasoning = |k: u8| json!({"type": "reasoning", "id": format!("rs_{i}_{k}"), "summary": [], "encrypted_content": "enc"});
    let mut text = Message::new(s, Role::Assistant, MessageType::Text, "on it");
    let message = json!({"type": "message", "id": format!("msg_{i}"), "role": "assistant",
        "status": "completed", "content": [{"type": "output_text", "text": "on it", "annotations": []}]});
    text.metadata.insert(
        PROVIDER_KEY.into(),
        json!({"output_items": [reasoning(9), message], "response_id": format!("resp_{i}")}),
    );
    out.push(text);
    for k in 0..calls_in_turn {
        let request = ToolRequest::new(format!("r{i}-{k}"), "get_weather", json!({"city": "y"}));
        let mut call = Message::tool_call(s, &request);
        let item = json!({"type": "function_call", "id": format!("fc_{i}_{k}"),
            "call_id": format!("r{i}-{k}"), "name": "get_weather", "arguments": "{}"});
        call.metadata.insert(
            PROVIDER_KEY.into(),
            json!({"output_items": [reasoning(k), item], "response_id": format!("resp_{i}")}),
        );
        calls.push(call.id.clone());
        out.push(call);
    }
}

fn tools() -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "get_weather".into(),
        description: "Reports the weather.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    }]
}

/// What a request is: its body as JSON, and its fallbacks.
type Sent = (Value, Vec<(String, String)>);

/// One backend, and what it sends: every request goes through a transport
/// that keeps it and answers with a plain reply of the provider's.
struct Probe {
    llm: Box<dyn Llm>,
    sent: Arc<CaptureTransport>,
    runtime: tokio::runtime::Runtime,
    /// Numbers the sessions of whole encodings.
    fresh: Cell<u64>,
}

impl Probe {
    fn new(build: impl FnOnce(Arc<CaptureTransport>) -> Box<dyn Llm>, reply: &Value) -> Probe {
        let sent = Arc::new(CaptureTransport::json(reply));
        Probe {
            llm: build(Arc::clone(&sent)),
            sent,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap(),
            fresh: Cell::new(0),
        }
    }

    fn claude() -> Probe {
        Probe::new(
            |t| Box::new(ClaudeLlm::new("k").with_transport(t)),
            &json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}
            }),
        )
    }

    fn openai() -> Probe {
        Probe::new(
            |t| Box::new(OpenAiLlm::new("k").with_transport(t)),
            &json!({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}),
        )
    }

    fn responses() -> Probe {
        Probe::new(
            |t| Box::new(OpenAiResponsesLlm::new("k").with_transport(t)),
            &json!({"id": "resp_x", "status": "completed", "output": [{"type": "message", "id": "m",
                "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]}),
        )
    }

    fn gemini() -> Probe {
        Probe::new(
            |t| Box::new(GeminiLlm::new("k").with_transport(t)),
            &json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}),
        )
    }

    /// The request for `h` in session `s`: its body and its fallbacks.
    fn session(&self, s: &str, h: &[Message], o: &LlmOptions) -> Sent {
        let turn = self
            .runtime
            .block_on(self.llm.complete(s, h, &tools(), o))
            .unwrap();
        let f = turn
            .fallbacks
            .iter()
            .map(|f| (f.message_id.clone(), f.mime_type.clone()));
        (self.sent.last_json().unwrap(), f.collect())
    }

    /// The request for `h` encoded whole: the first of a new session.
    fn whole(&self, h: &[Message], o: &LlmOptions) -> Sent {
        self.fresh.set(self.fresh.get() + 1);
        self.session(&format!("whole-{}", self.fresh.get()), h, o)
    }
}

/// How the history given to the next request changes.
#[derive(Debug, Clone)]
enum Next {
    /// Grows by this many messages.
    Grow(usize),
    /// Goes back to this many messages.
    Rewind(usize),
    /// The same length, with message `n` (modulo) edited.
    Edit(usize),
    /// Other instructions.
    System,
}

fn next() -> impl Strategy<Value = Next> {
    prop_oneof![
        8 => (0..6usize).prop_map(Next::Grow),
        1 => (0..40usize).prop_map(Next::Rewind),
        1 => any::<usize>().prop_map(Next::Edit),
        1 => Just(Next::System),
    ]
}

fn check(llm: &Probe, full: &[Message], plan: &[Next]) -> Result<(), TestCaseError> {
    let mut history: Vec<Message> = Vec::new();
    let mut options = LlmOptions::new("m");
    for (k, step) in plan.iter().enumerate() {
        match step {
            Next::Grow(n) => {
                let upto = (history.len() + n).min(full.len());
                history.extend_from_slice(&full[history.len()..upto]);
            }
            Next::Rewind(n) => history.truncate(*n),
            Next::Edit(n) if !history.is_empty() => {
                let i = n % history.len();
                history[i].content.push_str(" (edited)");
            }
            Next::Edit(_) => {}
            Next::System => {
                options.system = match options.system {
                    None => Some(format!("instructions {k}")),
                    Some(_) => None,
                };
            }
        }
        let whole = llm.whole(&history, &options);
        let session = llm.session("s", &history, &options);
        prop_assert_eq!(&session, &whole, "request {} of {:?}", k, plan);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_request_of_a_session_is_the_whole_encoding(
        steps in proptest::collection::vec(step(), 0..40),
        plan in proptest::collection::vec(next(), 1..16),
    ) {
        let full = history(&steps);
        check(&Probe::claude(), &full, &plan)?;
        check(&Probe::openai(), &full, &plan)?;
        check(&Probe::gemini(), &full, &plan)?;
        check(&Probe::responses(), &full, &plan)?;
    }
}

#[test]
fn a_long_session_reuses_what_it_encoded() {
    // Not a timing: the request of a grown session equals the whole
    // encoding, for a history long enough that the prefix matters.
    let steps: Vec<Step> = (0..500)
        .flat_map(|i| {
            [
                Step::User(format!("q{i}")),
                Step::Call(true),
                Step::Assistant(format!("a{i}")),
            ]
        })
        .collect();
    let full = history(&steps);
    let options = LlmOptions::new("m");
    let claude = Probe::claude();
    for upto in (1..full.len()).step_by(97) {
        assert_eq!(
            claude.session("long", &full[..upto], &options),
            claude.whole(&full[..upto], &options)
        );
    }
}
