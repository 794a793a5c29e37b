//! [`AssistantTurn`]: what one model call returns, and [`TurnBuilder`],
//! the one place a turn is assembled from what a provider sent. A one-shot
//! decoder feeds it a whole response; a streamed reply is first rebuilt as
//! that response (`stream/mod.rs`), so it is read the same way.

use kesoku_core::{Message, MessageType, Role, Status, ToolRequest, keys};
use serde_json::{Map, Value};

use crate::fallback::ContentFallback;

/// Metadata key holding provider fields to replay exactly.
pub const PROVIDER_KEY: &str = "provider";

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// It hit a stop sequence.
    StopSequence,
    /// It refused, or a safety filter stopped it.
    Refusal,
    /// Anything else, as the provider named it.
    Other(String),
}

/// Tokens used by one model call, as the provider reported them.
///
/// `input_tokens` counts the whole request, cached or not, on every
/// provider (Claude reports the uncached part alone; its cached parts are
/// added back), so it is the request's size in the model's tokens. The
/// cache counts are parts of it, present when the provider reports them.
///
/// The agent stores each call's usage with the first message the call
/// produced ([`keys::USAGE`](kesoku_core::keys::USAGE)); [`Usage::of`]
/// reads it back, and a sum of usages is their total.
///
/// ```
/// use kesoku_llm::Usage;
///
/// let first = Usage::new(1_200, 80).with_cache(Some(1_000), None);
/// let second = Usage::new(1_400, 20);
/// let total: Usage = [first, second].into_iter().sum();
/// assert_eq!((total.input_tokens, total.output_tokens), (2_600, 100));
/// assert_eq!(total.cache_read_tokens, Some(1_000));
/// assert_eq!(total.to_string(), "2600 in (1000 from cache), 100 out");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens read: the whole request, cached parts included.
    pub input_tokens: u64,
    /// Tokens written, reasoning included.
    pub output_tokens: u64,
    /// Of the input, the tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Of the input, the tokens written to the prompt cache (Claude).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Of the output, the tokens the model spent reasoning, where the
    /// provider reports them apart (OpenAI's Responses API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// `input_tokens` read and `output_tokens` written, no cache counts.
    #[must_use]
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            cache_read_tokens: None,
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    }

    /// Builder: the cache counts, where the provider reports them.
    #[must_use]
    pub fn with_cache(mut self, read: Option<u64>, write: Option<u64>) -> Self {
        self.cache_read_tokens = read;
        self.cache_write_tokens = write;
        self
    }

    /// Builder: the reasoning tokens among the output, where the provider
    /// reports them.
    ///
    /// ```
    /// let usage = kesoku_llm::Usage::new(100, 40).with_reasoning(Some(30));
    /// assert_eq!(usage.to_string(), "100 in, 40 out (30 reasoning)");
    /// ```
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: Option<u64>) -> Self {
        self.reasoning_tokens = reasoning;
        self
    }

    /// Whether nothing was counted (a scripted model, a provider that
    /// sent no counts).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// The usage stored on `message` ([`keys::USAGE`](kesoku_core::keys::USAGE)),
    /// if it holds one that reads.
    ///
    /// ```
    /// use kesoku_llm::{AssistantTurn, Usage};
    ///
    /// let turn = AssistantTurn::new("s", "mock", "Hi.", []).with_usage(Usage::new(10, 2));
    /// let stored = turn.messages().next().unwrap();
    /// assert_eq!(Usage::of(stored), Some(Usage::new(10, 2)));
    /// ```
    #[must_use]
    pub fn of(message: &Message) -> Option<Usage> {
        serde_json::from_value(message.metadata.get(keys::USAGE)?.clone()).ok()
    }
}

/// Adds two optional counts: absent only when both are.
fn add_counts(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_tokens: add_counts(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens: add_counts(self.cache_write_tokens, other.cache_write_tokens),
            reasoning_tokens: add_counts(self.reasoning_tokens, other.reasoning_tokens),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |a, b| a + b)
    }
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in", self.input_tokens)?;
        match (self.cache_read_tokens, self.cache_write_tokens) {
            (Some(read), Some(write)) => {
                write!(f, " ({read} from cache, {write} written to it)")?;
            }
            (Some(read), None) => write!(f, " ({read} from cache)")?,
            (None, Some(write)) => write!(f, " ({write} written to cache)")?,
            (None, None) => {}
        }
        write!(f, ", {} out", self.output_tokens)?;
        if let Some(reasoning) = self.reasoning_tokens {
            write!(f, " ({reasoning} reasoning)")?;
        }
        Ok(())
    }
}

/// One call the model asked for, held once: the request to run and the
/// `tool_call` message that records it in the history, made together so
/// they cannot drift apart.
///
/// ```
/// use kesoku_core::{MessageType, ToolRequest};
/// use kesoku_llm::ToolCall;
///
/// let call = ToolCall::new("s", "scripted", ToolRequest::new("c1", "add", serde_json::json!({"a": 1})));
/// assert_eq!(call.request.id, "c1");
/// assert_eq!(call.message.kind, MessageType::ToolCall);
/// assert_eq!(call.message.meta_str("call_id"), Some("c1"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// What to run: the provider's call id, the tool's name, its arguments.
    pub request: ToolRequest,
    /// The call as a history message (`tool_call`, from the assistant).
    /// Provider fields that must be replayed verbatim sit in its metadata
    /// under [`PROVIDER_KEY`].
    pub message: Message,
}

impl ToolCall {
    /// The call of `request`, recorded as a `tool_call` message of
    /// `session_id` sent by `sender` (the provider's name).
    pub fn new(session_id: &str, sender: &str, request: ToolRequest) -> Self {
        let message = Message::tool_call(session_id, &request).with_sender(sender);
        ToolCall { request, message }
    }
}

/// One assistant turn: the model's text and the calls it asked for, each
/// call once, with the messages that record them.
///
/// ```
/// use kesoku_core::{MessageType, ToolRequest};
/// use kesoku_llm::{AssistantTurn, StopReason};
///
/// let turn = AssistantTurn::new("s", "scripted", "Let me add.", [
///     ToolRequest::new("c1", "add", serde_json::json!({"a": 1, "b": 2})),
/// ]);
/// assert_eq!(turn.stop_reason, StopReason::ToolUse);
/// // The turn as history: its text, then one message per call.
/// let kinds: Vec<_> = turn.messages().map(|m| m.kind).collect();
/// assert_eq!(kinds, [MessageType::Text, MessageType::ToolCall]);
/// assert_eq!(turn.tool_calls().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["add"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AssistantTurn {
    /// The text the model wrote (may be empty): the content of
    /// [`text_message`](Self::text_message) when there is one.
    pub text: String,
    /// The text as a history message: there is one when the model wrote
    /// text, or when it wrote nothing at all (an empty answer is still an
    /// answer). Provider fields to replay sit in its metadata under
    /// [`PROVIDER_KEY`]. Boxed, so that a turn stays small to move (in
    /// every [`StreamEvent`](crate::StreamEvent) it rides in).
    pub text_message: Option<Box<Message>>,
    /// The calls it asked for, in order, each with its message.
    pub calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
    /// Blocks of the request the provider could not take, sent as text notes.
    pub fallbacks: Vec<ContentFallback>,
    /// The provider's id of the response, when it gave one.
    pub response_id: Option<String>,
    /// The model that wrote the response, as the provider names it (a
    /// dated version of the one asked for, often), when it gave one.
    pub response_model: Option<String>,
}

impl AssistantTurn {
    /// A turn as `sender` (the provider's name) of `session_id` returns
    /// it: a text message when there is `text` or no call, then one
    /// [`ToolCall`] per request; stopped for [`StopReason::ToolUse`] when
    /// there are calls, else [`StopReason::EndTurn`]; no usage.
    ///
    /// ```
    /// use kesoku_llm::AssistantTurn;
    ///
    /// let turn = AssistantTurn::new("s", "mock", "Hello!", []);
    /// assert_eq!(turn.text, "Hello!");
    /// assert_eq!(turn.messages().count(), 1);
    /// assert!(turn.calls.is_empty());
    /// ```
    pub fn new(
        session_id: &str,
        sender: &str,
        text: impl Into<String>,
        requests: impl IntoIterator<Item = ToolRequest>,
    ) -> Self {
        let calls = requests
            .into_iter()
            .map(|r| ToolCall::new(session_id, sender, r))
            .collect();
        Self::of_calls(session_id, sender, text.into(), calls)
    }

    /// The turn of `text` and `calls`, as [`new`](Self::new) makes it.
    fn of_calls(session_id: &str, sender: &str, text: String, calls: Vec<ToolCall>) -> Self {
        let text_message = (!text.is_empty() || calls.is_empty()).then(|| {
            Box::new(
                Message::new(session_id, Role::Assistant, MessageType::Text, &*text)
                    .with_sender(sender)
                    .with_status(Status::Processed),
            )
        });
        let stop_reason = if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        AssistantTurn {
            text,
            text_message,
            calls,
            stop_reason,
            usage: Usage::default(),
            fallbacks: Vec::new(),
            response_id: None,
            response_model: None,
        }
    }

    /// Builder: sets why the model stopped.
    #[must_use]
    pub fn with_stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = stop_reason;
        self
    }

    /// Builder: sets the tokens used, and stores them on the turn's first
    /// message ([`keys::USAGE`](kesoku_core::keys::USAGE)) unless nothing
    /// was counted.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        if let Some(first) = self.messages_mut().next() {
            if usage.is_empty() {
                first.metadata.shift_remove(keys::USAGE);
            } else if let Ok(value) = serde_json::to_value(usage) {
                first.metadata.insert(keys::USAGE.into(), value);
            }
        }
        self
    }

    /// Builder: sets the blocks the provider could not take.
    #[must_use]
    pub fn with_fallbacks(mut self, fallbacks: Vec<ContentFallback>) -> Self {
        self.fallbacks = fallbacks;
        self
    }

    /// The turn as history messages, ready to append, in order: the text
    /// message (if any), then each call's message.
    pub fn messages(&self) -> impl Iterator<Item = &Message> {
        self.text_message
            .as_deref()
            .into_iter()
            .chain(self.calls.iter().map(|c| &c.message))
    }

    /// [`messages`](Self::messages), owned.
    pub fn into_messages(self) -> impl Iterator<Item = Message> {
        self.text_message
            .map(|m| *m)
            .into_iter()
            .chain(self.calls.into_iter().map(|c| c.message))
    }

    /// The requests of the calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolRequest> {
        self.calls.iter().map(|c| &c.request)
    }

    /// The calls as the runner takes them: each request with its message.
    ///
    /// ```
    /// use kesoku_core::ToolRequest;
    /// use kesoku_llm::AssistantTurn;
    ///
    /// let turn = AssistantTurn::new("s", "mock", "", [ToolRequest::new("c1", "add", serde_json::json!({}))]);
    /// let pairs = turn.call_pairs();
    /// assert_eq!(pairs[0].1.meta_str("call_id"), Some(pairs[0].0.id.as_str()));
    /// ```
    pub fn call_pairs(&self) -> Vec<(ToolRequest, Message)> {
        self.calls
            .iter()
            .map(|c| (c.request.clone(), c.message.clone()))
            .collect()
    }

    /// Every message of the turn, mutably (a decoder marks them all).
    pub(crate) fn messages_mut(&mut self) -> impl Iterator<Item = &mut Message> {
        self.text_message
            .as_deref_mut()
            .into_iter()
            .chain(self.calls.iter_mut().map(|c| &mut c.message))
    }
}

/// An assistant turn being read: text and calls in the order they came.
#[derive(Debug, Default)]
pub(crate) struct TurnBuilder {
    text: String,
    /// Provider fields of the text message.
    text_fields: Option<Map<String, Value>>,
    /// Each call, with its provider fields.
    calls: Vec<(ToolRequest, Option<Map<String, Value>>)>,
    usage: Usage,
}

impl TurnBuilder {
    pub(crate) fn push_text(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Sets a provider field of the text message, to be replayed with it.
    pub(crate) fn set_text_field(&mut self, key: &str, value: Value) {
        self.text_fields
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value);
    }

    pub(crate) fn push_call(&mut self, request: ToolRequest, fields: Option<Map<String, Value>>) {
        self.calls.push((request, fields));
    }

    pub(crate) fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }

    pub(crate) fn set_usage(&mut self, usage: Usage) {
        self.usage = usage;
    }

    /// The turn, with its history messages: a text message when there is
    /// text or nothing else, then one `tool_call` message per call.
    pub(crate) fn finish(
        self,
        session_id: &str,
        provider: &'static str,
        stop_reason: StopReason,
    ) -> AssistantTurn {
        let calls = self
            .calls
            .into_iter()
            .map(|(request, fields)| {
                let mut call = ToolCall::new(session_id, provider, request);
                if let Some(fields) = fields {
                    call.message
                        .metadata
                        .insert(PROVIDER_KEY.into(), Value::Object(fields));
                }
                call
            })
            .collect();
        let mut turn = AssistantTurn::of_calls(session_id, provider, self.text, calls)
            .with_stop_reason(stop_reason)
            .with_usage(self.usage);
        if let (Some(m), Some(fields)) = (&mut turn.text_message, self.text_fields) {
            m.metadata
                .insert(PROVIDER_KEY.into(), Value::Object(fields));
        }
        turn
    }
}
