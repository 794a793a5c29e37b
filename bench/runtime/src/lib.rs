//! Helpers shared by kesoku's run-time benchmarks: reading criterion's
//! estimates back, to print the ratios `docs/performance.md` quotes.

use std::path::PathBuf;

/// Where criterion writes its results.
pub fn criterion_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    target.join("criterion")
}

/// The median time, in nanoseconds, criterion measured for `group/id`.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// Where the network would be: a transport that drops each request body
/// it is given (after `black_box`, so building it is not optimized away)
/// and answers at once with the provider's shortest reply, one text.
#[derive(Debug, Clone, Copy)]
pub struct Sink {
    provider: &'static str,
}

impl Sink {
    /// A sink answering as `provider` does: `"claude"`, `"openai"`,
    /// `"responses"` (OpenAI's Responses API) or `"gemini"`.
    pub fn new(provider: &'static str) -> Sink {
        Sink { provider }
    }

    fn reply(self) -> serde_json::Value {
        match self.provider {
            "claude" => serde_json::json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}
            }),
            "openai" => serde_json::json!({
                "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
            }),
            "responses" => serde_json::json!({
                "id": "resp_1", "status": "completed",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]
            }),
            _ => serde_json::json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
            }),
        }
    }
}

impl kesoku::llm::HttpTransport for Sink {
    fn send(
        &self,
        request: kesoku::llm::HttpRequest,
    ) -> kesoku::llm::LlmFuture<'_, Result<kesoku::llm::HttpResponse, kesoku::llm::TransportError>>
    {
        std::hint::black_box(request.body);
        let reply = kesoku::llm::HttpResponse::json(200, &self.reply());
        Box::pin(async move { Ok(reply) })
    }
}

/// A model mocked where the network would be: each call is first a real
/// call of `backend` (whose transport should be a [`Sink`]: the request is
/// built in full and dropped), then the turn comes from `script`.
pub struct Encoded<L> {
    /// A real backend over a [`Sink`].
    pub backend: std::sync::Arc<dyn kesoku::llm::Llm>,
    /// What the model answers.
    pub script: L,
}

impl<L: kesoku::llm::Llm> kesoku::llm::Llm for Encoded<L> {
    fn provider(&self) -> &'static str {
        "Encoded"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [kesoku::Message],
        tools: &'a [kesoku::llm::ToolDeclaration],
        options: &'a kesoku::llm::LlmOptions,
    ) -> kesoku::llm::LlmFuture<'a, Result<kesoku::llm::AssistantTurn, kesoku::llm::LlmError>> {
        Box::pin(async move {
            let sent = self
                .backend
                .complete(session_id, messages, tools, options)
                .await?;
            std::hint::black_box(sent);
            self.script
                .complete(session_id, messages, tools, options)
                .await
        })
    }
}

/// The script of the store and compaction benches' model: for each
/// prompt, one call of `get_weather`, then the answer.
///
/// # Panics
/// Never: the script is a constant.
#[must_use]
pub fn weather_script() -> kesoku::llm::ScriptedLlm {
    kesoku::llm::ScriptedLlm::from_json(serde_json::json!([
        {"tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "It will be sunny in Paris."}
    ]))
    .expect("a valid script")
    .per_prompt()
}

/// A registry of the one tool [`weather_script`] calls.
///
/// # Panics
/// Never: the tool is a constant.
#[must_use]
pub fn weather_tools() -> std::sync::Arc<kesoku::ToolRegistry> {
    use serde_json::json;
    let mut tools = kesoku::ToolRegistry::new();
    let tool = kesoku::DynamicTool::new(
        "get_weather",
        "Reports the weather.",
        json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
            "additionalProperties": false
        }),
        |args, _| async move {
            Ok(kesoku::ToolOutput::new(
                json!({"sky": "sunny", "city": args["city"].clone()}),
            ))
        },
    )
    .expect("a valid tool");
    tools.register(tool).expect("one tool");
    std::sync::Arc::new(tools)
}

/// `n` stored messages (rounded down to a multiple of four) of past
/// rounds of session `session`: question, call, result, answer; every
/// call answered.
#[must_use]
pub fn weather_rounds(session: &str, n: usize) -> Vec<kesoku::Message> {
    use kesoku::{Message, MessageType, Role, Status, ToolRequest, keys};
    let mut out = Vec::with_capacity(n);
    for round in 0..n / 4 {
        let request = ToolRequest::new(
            format!("call_{round}"),
            "get_weather",
            serde_json::json!({"city": format!("city {round}")}),
        );
        let call = Message::tool_call(session, &request);
        let mut result = Message::new(
            session,
            Role::Tool,
            MessageType::ToolResult,
            format!("sunny in city {round}"),
        )
        .with_parent(call.id.clone())
        .with_status(Status::Responded);
        result
            .metadata
            .insert(keys::CALL_ID.into(), request.id.clone().into());
        result
            .metadata
            .insert(keys::TOOL_NAME.into(), request.name.into());
        let question = Message::new(
            session,
            Role::User,
            MessageType::Text,
            format!("Weather in city {round}?"),
        )
        .with_status(Status::Processed);
        let answer = Message::new(
            session,
            Role::Assistant,
            MessageType::Text,
            format!("It is sunny in city {round}."),
        );
        out.extend([question, call, result, answer]);
    }
    out
}

/// The runtime the agent benches run on: two workers, as many as the CI
/// machine's cores.
///
/// # Panics
/// If the runtime cannot start.
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Warm turns of the weather script on sessions of `n` stored messages:
/// each session is prefilled with [`weather_rounds`] and warmed by two
/// untimed turns, then plays `turns_per_session` timed turns (N grows by
/// four messages a turn) before a fresh one.
pub struct WarmSessions {
    store: std::sync::Arc<kesoku::store::MemoryStore>,
    n: usize,
    turns_per_session: u64,
    session: String,
    played: u64,
}

impl WarmSessions {
    /// Sessions of `n` messages in `store`, `turns_per_session` timed
    /// turns each.
    #[must_use]
    pub fn new(
        store: std::sync::Arc<kesoku::store::MemoryStore>,
        n: usize,
        turns_per_session: u64,
    ) -> Self {
        WarmSessions {
            store,
            n,
            turns_per_session,
            session: String::new(),
            played: turns_per_session,
        }
    }

    /// The time `iters` turns of `agent` (two model calls each) took, per
    /// step.
    ///
    /// # Panics
    /// If a turn fails or does not complete.
    pub async fn steps(&mut self, agent: &kesoku::llm::Agent, iters: u64) -> std::time::Duration {
        use kesoku::store::MessageLog as _;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut timed = std::time::Duration::ZERO;
        for _ in 0..iters {
            if self.played == self.turns_per_session {
                let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.session = format!("warm-{id}");
                for m in weather_rounds(&self.session, self.n) {
                    self.store.insert(&m).await.expect("prefill");
                }
                for _ in 0..2 {
                    agent
                        .send(&self.session, "And in Lyon?")
                        .await
                        .expect("a turn");
                }
                self.played = 0;
            }
            self.played += 1;
            let start = std::time::Instant::now();
            let outcome = agent
                .send(&self.session, "And in Paris?")
                .await
                .expect("a turn");
            timed += start.elapsed();
            assert_eq!(outcome.status, kesoku::llm::TurnStatus::Completed);
        }
        // Two model calls, two steps, per turn.
        timed / 2
    }
}
