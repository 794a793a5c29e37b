//! Fitting a long session into the model's context window, without
//! changing what is stored: a request's size, estimated per message and
//! calibrated by what the provider counted last time; the strategies that
//! choose which past turns the model is still shown ([`Compaction`]); and
//! where a view may be cut (only where a user's prompt starts a turn, so a
//! tool call and its result, and the parts of one reply, stay together).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kesoku_core::{Message, MessageType, Role, keys};
use kesoku_llm::{Llm, LlmError, LlmOptions, PROVIDER_KEY, Usage};

/// Metadata key, on a reply's first message beside its usage: the
/// agent's uncalibrated estimate of the request that produced it, so that
/// the ratio of the provider's count to it calibrates the next estimate,
/// whichever worker makes it.
pub(crate) const ESTIMATE: &str = "request_estimate";

/// What an image, audio or document block is counted, whatever its bytes
/// (providers count a picture by its size in tiles, not its encoding).
const MEDIA_TOKENS: u64 = 1_600;
/// What each message costs beyond its text (role, framing, ids).
const MESSAGE_TOKENS: u64 = 8;
/// The smallest estimate a provider's count calibrates.
const CALIBRATE_FROM: u64 = 1_000;

/// When the estimated request passes this share of the window (less the
/// reply's room), the view is compacted...
pub(crate) const COMPACT_AT: f64 = 0.8;
/// ...down to this share: far enough below that the view's start then
/// stays put for many steps, so its encoding is reused (the backends'
/// prefix caches) and compacting is rare.
pub(crate) const COMPACT_TO: f64 = 0.5;

/// The agent's raw estimate of the tokens `m` adds to a request: about one
/// token per four bytes of what is sent of it, a fixed count per media
/// block. Calibrated per session by [`calibration`].
pub(crate) fn estimate(m: &Message) -> u64 {
    let mut bytes = 0_u64;
    if m.kind == MessageType::ToolCall {
        bytes += len(m.meta_str(keys::TOOL_NAME).unwrap_or_default());
        bytes += m.metadata.get(keys::ARGUMENTS).map_or(0, json_len);
    } else {
        bytes += len(&m.content);
        bytes += m.metadata.get(keys::TOOL_RESULT).map_or(0, json_len);
    }
    // Provider fields replayed with the message (Gemini's signatures).
    bytes += m.metadata.get(PROVIDER_KEY).map_or(0, json_len);
    let mut media = 0;
    if let Some(serde_json::Value::Array(blocks)) = m.metadata.get(keys::CONTENT_BLOCKS) {
        for block in blocks {
            match block.get("text").and_then(serde_json::Value::as_str) {
                Some(text) => bytes += len(text),
                None => media += MEDIA_TOKENS,
            }
        }
    }
    bytes / 4 + media + MESSAGE_TOKENS
}

fn len(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX)
}

/// The length of `value` as JSON, without building the text.
pub(crate) fn json_len(value: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The provider's count over the agent's estimate, from a reply's first
/// message that holds both; bounded, so one odd count cannot make every
/// later estimate absurd.
pub(crate) fn calibration(m: &Message) -> Option<f64> {
    let counted = Usage::of(m)?.input_tokens;
    let estimated = m.metadata.get(ESTIMATE)?.as_u64()?;
    // A small request's count is mostly what the provider adds itself
    // (its own instructions for tools): it says little of the messages.
    if counted == 0 || estimated < CALIBRATE_FROM {
        return None;
    }
    #[allow(clippy::cast_precision_loss)] // Token counts, far below 2^52.
    Some((counted as f64 / estimated as f64).clamp(0.25, 4.0))
}

/// Whether `m` is a summary of the turns before it ([`keys::SUMMARY`]).
pub(crate) fn is_summary(m: &Message) -> bool {
    m.role == Role::System && m.metadata.contains_key(keys::SUMMARY)
}

/// Whether `m` starts a turn: a user's prompt.
fn starts_turn(m: &Message) -> bool {
    m.role == Role::User
}

/// How many messages a view starts with that are never dropped: the
/// session's own system messages, before anything else.
pub(crate) fn lead(view: &[Message]) -> usize {
    view.iter()
        .take_while(|m| m.role == Role::System && !is_summary(m))
        .count()
}

/// Where each turn starts in `view`, oldest first, up to and including
/// `current` (the index of the turn being run).
pub(crate) fn turn_starts(view: &[Message], current: usize) -> Vec<usize> {
    let lead = lead(view);
    let mut starts: Vec<usize> = (lead..current).filter(|&i| starts_turn(&view[i])).collect();
    starts.push(current);
    starts
}

/// How an agent fits a session that grew past the model's context window
/// ([`AgentBuilder::compaction`](super::AgentBuilder::compaction)). The
/// store is never changed: only the view the model is sent.
///
/// In every strategy the view keeps the session's leading system messages
/// and the turn being run whole, and is cut only where a user's prompt
/// starts a turn, so a tool call and its result (and the parts of one
/// reply, with their signatures) are kept or dropped together.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Compaction {
    /// Never compact: a session past the window fails its turn with
    /// [`LlmError::ContextOverflow`].
    Off,
    /// Drop the oldest whole turns until the rest fits (the default).
    #[default]
    DropOldestTurns,
    /// Summarize the turns it drops through the model, once: the summary
    /// is stored as a marked message ([`keys::SUMMARY`]), and later views
    /// (on any worker) start from it.
    Summarize,
    /// A strategy of your own.
    Custom(Arc<dyn CompactionStrategy>),
}

impl Compaction {
    /// A strategy of your own.
    pub fn custom(strategy: impl CompactionStrategy + 'static) -> Self {
        Compaction::Custom(Arc::new(strategy))
    }
}

impl fmt::Debug for Compaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compaction::Off => f.write_str("Off"),
            Compaction::DropOldestTurns => f.write_str("DropOldestTurns"),
            Compaction::Summarize => f.write_str("Summarize"),
            Compaction::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// What a [`CompactionStrategy`] returns, boxed.
pub type CompactionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Compacted, LlmError>> + Send + 'a>>;

/// A way to choose what of a long session the model is still shown.
///
/// ```
/// use kesoku_agent::{Compacted, CompactionFuture, CompactionRequest, CompactionStrategy};
///
/// /// Keeps only the turn being run.
/// struct OnlyTheLastTurn;
///
/// impl CompactionStrategy for OnlyTheLastTurn {
///     fn compact<'a>(&'a self, request: CompactionRequest<'a>) -> CompactionFuture<'a> {
///         Box::pin(async move { Ok(Compacted::keep_from(request.current_turn())) })
///     }
/// }
/// let agent = kesoku_agent::Agent::builder(kesoku_llm::ScriptedLlm::from_json(serde_json::json!([])).unwrap())
///     .compaction(kesoku_agent::Compaction::custom(OnlyTheLastTurn))
///     .build()
///     .unwrap();
/// # drop(agent);
/// ```
pub trait CompactionStrategy: Send + Sync {
    /// Chooses where the view starts, and may give a summary of what it
    /// drops. The agent cuts at the turn start at or before
    /// [`Compacted::keep_from`], so no choice can split a call from its
    /// result.
    fn compact<'a>(&'a self, request: CompactionRequest<'a>) -> CompactionFuture<'a>;
}

/// What a [`CompactionStrategy`] is asked to compact.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct CompactionRequest<'a> {
    /// The session.
    pub session: &'a str,
    /// The view as the model would be sent it, oldest first.
    pub messages: &'a [Message],
    /// Each message's estimated tokens, calibrated.
    pub tokens: &'a [u64],
    /// Where each turn starts in `messages`, oldest first; the last is the
    /// turn being run, which is always kept.
    pub turns: &'a [usize],
    /// The tokens the kept messages (and a summary) should fit in.
    pub target: u64,
    /// The agent's model and options, to summarize with.
    pub llm: &'a dyn Llm,
    /// The agent's model options.
    pub options: &'a LlmOptions,
}

impl CompactionRequest<'_> {
    /// Where the turn being run starts.
    #[must_use]
    pub fn current_turn(&self) -> usize {
        self.turns.last().copied().unwrap_or(0)
    }

    /// The oldest turn start from which the messages fit `budget` tokens
    /// (with the session's leading system messages); the turn being run if
    /// none does.
    #[must_use]
    pub fn keep_fitting(&self, budget: u64) -> usize {
        let lead: u64 = self.tokens[..lead(self.messages)].iter().sum();
        let mut kept = lead;
        let mut from = self.messages.len();
        let mut choice = self.current_turn();
        for &start in self.turns.iter().rev() {
            kept += self.tokens[start..from].iter().sum::<u64>();
            from = start;
            if kept > budget && start != self.current_turn() {
                break;
            }
            choice = start;
        }
        choice
    }
}

impl fmt::Debug for CompactionRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactionRequest")
            .field("session", &self.session)
            .field("messages", &self.messages.len())
            .field("turns", &self.turns)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// A [`CompactionStrategy`]'s choice.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compacted {
    /// The index in [`CompactionRequest::messages`] the view keeps from
    /// (cut at the turn start at or before it).
    pub keep_from: usize,
    /// A summary of what is dropped, stored and shown to the model first.
    pub summary: Option<String>,
    /// The tokens making the summary cost, stored with it.
    pub usage: Usage,
}

impl Compacted {
    /// Keeps the view from `index`, with no summary.
    #[must_use]
    pub fn keep_from(index: usize) -> Self {
        Compacted {
            keep_from: index,
            summary: None,
            usage: Usage::default(),
        }
    }

    /// Builder: a summary of what is dropped.
    #[must_use]
    pub fn with_summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// Builder: the tokens making the summary cost (counted in
    /// [`Agent::usage`](super::Agent::usage)).
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }
}

/// [`Compaction::DropOldestTurns`].
pub(crate) struct DropOldest;

impl CompactionStrategy for DropOldest {
    fn compact<'a>(&'a self, request: CompactionRequest<'a>) -> CompactionFuture<'a> {
        Box::pin(async move { Ok(Compacted::keep_from(request.keep_fitting(request.target))) })
    }
}

/// The most of a dropped message a summary request quotes...
const QUOTE_BYTES: usize = 2_000;
/// ...and so the most tokens it costs there.
const QUOTE_TOKENS: u64 = QUOTE_BYTES as u64 / 2;

/// [`Compaction::Summarize`]: the kept turns take most of the target, the
/// summary the rest; the model is sent the dropped turns as a transcript
/// (the latest that fit, after any earlier summary), so no call or result
/// is sent out of its pair.
pub(crate) struct Summarize;

impl CompactionStrategy for Summarize {
    fn compact<'a>(&'a self, request: CompactionRequest<'a>) -> CompactionFuture<'a> {
        Box::pin(async move {
            let keep_from = request.keep_fitting(request.target / 10 * 7);
            let lead = lead(request.messages);
            // Nothing to summarize but an earlier summary: not asked again.
            let first = lead + usize::from(request.messages.get(lead).is_some_and(is_summary));
            if keep_from <= first {
                return Ok(Compacted::keep_from(keep_from));
            }
            // The latest dropped messages that fit half the target, read
            // as a transcript; an earlier summary first, whatever its
            // place.
            let dropped = &request.messages[lead..keep_from];
            let mut budget = request.target / 2;
            let mut first = dropped.len();
            // Each costs at most what is quoted of it.
            let quoted = |i: usize| request.tokens[lead + i].min(QUOTE_TOKENS);
            while first > 0 && quoted(first - 1) <= budget {
                first -= 1;
                budget -= quoted(first);
            }
            let mut transcript = String::new();
            if let Some(earlier) = dropped[..first].iter().find(|m| is_summary(m)) {
                transcript.push_str(&earlier.content);
                transcript.push_str("\n\n");
            }
            for m in &dropped[first..] {
                quote(&mut transcript, m);
            }
            let prompt = format!(
                "Summarize the conversation below for your own later use, in under 300 words: \
                 what the user wants, what was found or decided, the tool results that still \
                 matter, and what is left open. Write only the summary.\n\n{transcript}"
            );
            let ask = [Message::new(
                request.session,
                Role::User,
                MessageType::Text,
                prompt,
            )];
            let mut options = request.options.clone();
            options.system = None;
            options.output = None;
            let turn = request
                .llm
                .complete(request.session, &ask, &[], &options)
                .await?;
            Ok(Compacted::keep_from(keep_from)
                .with_summary(turn.text)
                .with_usage(turn.usage))
        })
    }
}

/// Appends `m` to a transcript, as a line a model reads.
fn quote(out: &mut String, m: &Message) {
    use std::fmt::Write as _;
    let who = match (m.role, m.kind) {
        (_, MessageType::ToolCall) => "tool call",
        (_, MessageType::ToolResult) | (Role::Tool, _) => "tool result",
        (Role::User, _) => "user",
        (Role::Assistant, _) => "assistant",
        (Role::System, _) => "note",
    };
    let text = if m.kind == MessageType::ToolCall {
        format!(
            "{}({})",
            m.meta_str(keys::TOOL_NAME).unwrap_or_default(),
            m.metadata
                .get(keys::ARGUMENTS)
                .map(ToString::to_string)
                .unwrap_or_default()
        )
    } else {
        m.content.clone()
    };
    let mut cut = text.len().min(QUOTE_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = if cut < text.len() { " […]" } else { "" };
    let _ = writeln!(out, "{who}: {}{more}", &text[..cut]);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kesoku_core::{Message, MessageType, Role, ToolRequest};
    use kesoku_llm::{AssistantTurn, Llm, LlmError, LlmFuture, LlmOptions, ToolDeclaration};
    use serde_json::json;

    use super::{CompactionRequest, CompactionStrategy, Summarize, estimate, turn_starts};

    /// A model that keeps what it is asked and answers a summary.
    #[derive(Default)]
    struct Keeps(Mutex<String>);

    impl Llm for Keeps {
        fn provider(&self) -> &'static str {
            "keeps"
        }

        fn complete<'a>(
            &'a self,
            session_id: &'a str,
            messages: &'a [Message],
            _tools: &'a [ToolDeclaration],
            _options: &'a LlmOptions,
        ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
            *self.0.lock().unwrap() = messages[0].content.clone();
            Box::pin(async move { Ok(AssistantTurn::new(session_id, "keeps", "SUMMARY", [])) })
        }
    }

    /// A big tool result among the turns dropped does not end the
    /// transcript: each is quoted in part, and costs what is quoted.
    #[test]
    fn a_summary_request_quotes_every_dropped_message_in_part() {
        let call = Message::tool_call("s", &ToolRequest::new("c1", "fetch", json!({"url": "x"})));
        let mut view = vec![
            Message::new("s", Role::User, MessageType::Text, "What do the pages say?"),
            call.clone(),
            Message::new("s", Role::Tool, MessageType::ToolResult, "x".repeat(40_000))
                .with_parent(&call.id),
            Message::new("s", Role::Assistant, MessageType::Text, "They say x."),
        ];
        for n in 0..3 {
            view.push(Message::new(
                "s",
                Role::User,
                MessageType::Text,
                format!("Then {n}?"),
            ));
            view.push(Message::new(
                "s",
                Role::Assistant,
                MessageType::Text,
                "y".repeat(2_000),
            ));
        }
        let current = view.len() - 2;
        let tokens: Vec<u64> = view.iter().map(estimate).collect();
        let turns = turn_starts(&view, current);
        let model = Keeps::default();
        let options = LlmOptions::new("m");
        let request = CompactionRequest {
            session: "s",
            messages: &view,
            tokens: &tokens,
            turns: &turns,
            target: 3_000,
            llm: &model,
            options: &options,
        };
        let chosen = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(Summarize.compact(request))
            .unwrap();
        assert!(chosen.keep_from >= 4, "the big turn is dropped: {chosen:?}");
        assert_eq!(chosen.summary.as_deref(), Some("SUMMARY"));
        let asked = model.0.lock().unwrap().clone();
        assert!(asked.contains("user: What do the pages say?"), "{asked}");
        assert!(asked.contains("tool call: fetch("), "{asked}");
        assert!(asked.contains("tool result: xxx"), "{asked}");
        assert!(asked.contains("[…]"), "the result is cut: {asked}");
        assert!(asked.contains("assistant: They say x."), "{asked}");
        assert!(asked.len() < 12_000, "{} bytes asked", asked.len());
    }
}
