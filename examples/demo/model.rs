//! The demo's model: the offline script, or a real provider configured
//! from the environment.

use std::sync::LazyLock;
use std::time::Duration;

use clap::ValueEnum as _;
use kesoku::Message;
use kesoku::llm::{
    AssistantTurn, ClaudeLlm, EventStream, GeminiLlm, Llm, LlmError, LlmFuture, LlmOptions,
    OpenAiLlm, ScriptedLlm, ToolDeclaration,
};
use kesoku::store::{MessageLog as _, SqliteStore};

use crate::Provider;

/// The offline model's script: turns played in order for each session.
const SCRIPT: &str = include_str!("script.json");
/// The script, read once.
static SCRIPT_VALUE: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::from_str(SCRIPT).expect("script.json is JSON"));
/// How many of the script's turns play the showcase; then comes the typed
/// answer that follows it (`record.rs`), then the research assistant's
/// call and the answer quoting it (`composed.rs`), and the rest answer any
/// later prompt.
const SHOWCASE_TURNS: usize = 8;
/// The turns after the typed answer that play the composed showcase.
const COMPOSED_TURNS: usize = 2;
/// The script's replies up to the showcase's pause for approval (its
/// `delete_note` call): a session left there resumes after them.
const SHOWCASE_PAUSE: usize = 5;
/// The sample image `analyze_media` looks at offline.
pub(crate) const SAMPLE: &[u8] = include_bytes!("sample.png");
/// The prompt of the offline showcase.
pub(crate) const SHOWCASE: &str = "What are 2 + 40 and 7 + 8, and the time in Tokyo? Check 40 + 2, \
                        note the sums, and tell me what sample.png shows.";

/// The real provider's model, or `None` offline.
pub(crate) fn real_model(provider: Option<Provider>) -> Result<Option<Model>, String> {
    let llm: Box<dyn Llm> = match provider {
        None => return Ok(None),
        Some(Provider::Anthropic) => Box::new(
            ClaudeLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
        Some(Provider::Gemini) => Box::new(
            GeminiLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
        Some(Provider::Openai) => Box::new(
            OpenAiLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
    };
    Ok(Some(Model {
        inner: llm,
        delay: Duration::ZERO,
    }))
}

/// The offline model: the showcase, or, for a named session that already
/// has messages (resumed in a new process), only the script's closing
/// turns; answering after `delay_ms`.
pub(crate) async fn offline_model(
    store: &SqliteStore,
    session: &str,
    named: bool,
    delay_ms: u64,
) -> Result<Model, String> {
    let history = if named {
        store.history(session).await.map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };
    // Left at the showcase's pause: the script goes on from there.
    let paused = history
        .iter()
        .any(|m| m.role == kesoku::Role::User && m.status == kesoku::Status::AwaitingApproval);
    let script = if history.is_empty() {
        SCRIPT_VALUE.clone()
    } else {
        // A resumed showcase plays its last turns, without the typed
        // answer (asked for only after a showcase run whole).
        let turns = SCRIPT_VALUE
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let showcase_rest = if paused {
            turns
                .get(SHOWCASE_PAUSE..SHOWCASE_TURNS)
                .unwrap_or_default()
        } else {
            &[]
        };
        let later = turns
            .get(SHOWCASE_TURNS + 1 + COMPOSED_TURNS..)
            .unwrap_or_default();
        showcase_rest.iter().chain(later).cloned().collect()
    };
    let model = ScriptedLlm::from_json(script).map_err(|e| e.to_string())?;
    Ok(Model {
        inner: Box::new(model),
        delay: Duration::from_millis(delay_ms),
    })
}

/// `KESOKU_PROVIDER`, if set and not empty.
pub(crate) fn env_provider() -> Result<Option<Provider>, String> {
    let Some(value) = env_nonempty("KESOKU_PROVIDER") else {
        return Ok(None);
    };
    Provider::from_str(&value, true).map(Some).map_err(|_| {
        format!(
            "KESOKU_PROVIDER is `{value}`, which is not a provider: use anthropic, gemini or openai"
        )
    })
}

pub(crate) fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A real provider's HTTP limits: a model call that gets no answer ends
/// within minutes, with the error, instead of waiting on every retry.
fn http_options() -> kesoku::llm::HttpOptions {
    kesoku::llm::HttpOptions {
        request_timeout: Duration::from_secs(120),
        max_retries: 2,
        ..Default::default()
    }
}

/// A model chosen at run time, answering after `delay` (`--delay-ms`,
/// offline only).
pub(crate) struct Model {
    pub(crate) inner: Box<dyn Llm>,
    pub(crate) delay: Duration,
}

impl Llm for Model {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }

    fn default_model(&self) -> &str {
        self.inner.default_model()
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            self.inner
                .complete(session_id, messages, tools, options)
                .await
        })
    }

    // A real provider streams (the delay is offline only, where the
    // scripted model does not).
    fn stream<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> EventStream<'a> {
        self.inner.stream(session_id, messages, tools, options)
    }

    fn streams(&self) -> bool {
        self.delay.is_zero() && self.inner.streams()
    }

    fn output_dialect(&self) -> Option<kesoku::lowering::Dialect> {
        self.inner.output_dialect()
    }
}
