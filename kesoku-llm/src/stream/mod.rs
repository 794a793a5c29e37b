//! Streaming: [`StreamEvent`]s as a reply is written, ending with the same
//! [`AssistantTurn`] `complete` returns for that reply.
//!
//! A provider's stream decoder ([`StreamDecoder`]) reads each server-sent
//! event, says what it added, and rebuilds the reply as the one-shot
//! response body would have been; the wire format's one-shot decoder then
//! reads that body. So a streamed turn and a completed one go through the
//! same decoding, and are the same turn.

use std::mem;

use futures_util::stream::BoxStream;
use serde_json::Value;

use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::time::Instant;

use crate::error::LlmError;
use crate::turn::{AssistantTurn, StopReason, Usage};

/// One thing that happened in a streamed reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More of the answer's text.
    Text(String),
    /// More of the model's visible reasoning (thinking), where the provider
    /// streams it.
    Thought(String),
    /// A tool call begins.
    ToolCallStart {
        /// Its position among the reply's calls, from 0.
        index: usize,
        /// The provider's call id (empty when the provider gives none).
        id: String,
        /// The tool's name, as the model called it.
        name: String,
    },
    /// More of a tool call's arguments, as JSON text.
    ToolCallArguments {
        /// The call's position, as in [`ToolCallStart`](Self::ToolCallStart).
        index: usize,
        /// The piece.
        delta: String,
    },
    /// A tool call is complete.
    ToolCallEnd {
        /// The call's position.
        index: usize,
    },
    /// Tokens used so far (providers send it once or several times).
    Usage(Usage),
    /// Why the model stopped.
    Stop(StopReason),
    /// The whole turn: the last event, the same turn
    /// [`complete`](crate::Llm::complete) returns for this reply. A stream
    /// that ends without it ended in error.
    Done(AssistantTurn),
}

/// A stream of events of one reply, borrowing the call's inputs.
pub type EventStream<'a> = BoxStream<'a, Result<StreamEvent, LlmError>>;

/// Where a streamed reply is, after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More is to come.
    More,
    /// The reply is whole, but the provider may still send something
    /// (OpenAI's usage chunk after the finish reason, Gemini's last usage):
    /// read on until the end, and a failure from here on loses nothing.
    Complete,
    /// The provider's last event: stop reading now (a server or proxy
    /// may hold the connection open after it).
    End,
}

/// One provider's reader of a streamed reply: it takes each server-sent
/// event, pushes what it added to `out`, and at the end gives back the
/// reply as the provider's one-shot response body.
pub(crate) trait StreamDecoder: Default + Send {
    /// Reads one event (`event` is the SSE event name, empty when none).
    fn event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Progress, StreamError>;

    /// The reply as the one-shot response body.
    fn into_body(self) -> Value;
}

/// Why a stream could not be read; the backend names the provider.
#[derive(Debug)]
pub(crate) enum StreamError {
    /// The provider sent an error event.
    Provider(String),
    /// The provider refused the request as longer than the model's
    /// context window, in an error event.
    ContextOverflow(String),
    /// An event that does not read.
    Malformed(String),
    /// An event held more bytes than the limit (given).
    TooLarge(usize),
}

/// A streamed reply read from its bytes, with no I/O: the body's chunks go
/// in as they come, the [`StreamEvent`]s they add come out, and at the end
/// the reply is the provider's one-shot body. The backend reads a
/// response with it, and the tests and fuzz harness replay recorded
/// streams through the same code.
#[derive(Debug)]
pub(crate) struct Reader<D> {
    sse: sse::Parser,
    /// Events parsed from the current chunk (kept for its allocation).
    parsed: Vec<sse::Event>,
    decoder: D,
    complete: bool,
    ended: bool,
}

impl<D: StreamDecoder> Reader<D> {
    /// A reader whose server-sent events may hold `max_event_bytes` each.
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Reader {
            sse: sse::Parser::new(max_event_bytes),
            parsed: Vec::new(),
            decoder: D::default(),
            complete: false,
            ended: false,
        }
    }

    /// Reads a chunk of the body, pushing what its events add to `out`
    /// (what came before an error included). Once the reply is whole, what
    /// fails after it is extra and ends the reading instead (it cannot undo
    /// the reply).
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        if self.ended {
            return Ok(());
        }
        let parsed = self.sse.feed(chunk, &mut self.parsed);
        let mut events = mem::take(&mut self.parsed);
        let decoded = self.decode(&events, out);
        events.clear();
        self.parsed = events;
        decoded?;
        match parsed {
            Err(sse::TooLarge { limit }) if !self.ended => self.fail(StreamError::TooLarge(limit)),
            _ => Ok(()),
        }
    }

    fn decode(
        &mut self,
        events: &[sse::Event],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        for event in events {
            if self.ended {
                break;
            }
            match self.decoder.event(&event.name, &event.data, out) {
                Ok(Progress::More) => {}
                Ok(Progress::Complete) => self.complete = true,
                // Nothing follows the last event; a server may still hold
                // the connection open.
                Ok(Progress::End) => {
                    self.complete = true;
                    self.ended = true;
                }
                Err(e) => self.fail(e)?,
            }
        }
        Ok(())
    }

    /// An error: the reading's, unless the reply is whole already.
    fn fail(&mut self, e: StreamError) -> Result<(), StreamError> {
        if self.complete {
            tracing::debug!(error = ?e, "a failure after the reply was whole");
            self.ended = true;
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Whether the reply is whole.
    pub(crate) fn complete(&self) -> bool {
        self.complete
    }

    /// Whether nothing more is to be read: the provider's last event came,
    /// or something after the reply was whole failed.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// The reply as the one-shot response body.
    pub(crate) fn into_body(self) -> Value {
        self.decoder.into_body()
    }
}

/// The events of a turn known whole, for backends that do not stream:
/// the text, each call start to end, usage, the stop reason, and the turn.
pub(crate) fn events_of(turn: AssistantTurn) -> Vec<StreamEvent> {
    let mut out = Vec::with_capacity(turn.calls.len() * 3 + 4);
    if !turn.text.is_empty() {
        out.push(StreamEvent::Text(turn.text.clone()));
    }
    for (index, call) in turn.tool_calls().enumerate() {
        out.push(StreamEvent::ToolCallStart {
            index,
            id: call.id.clone(),
            name: call.name.clone(),
        });
        let arguments = match &call.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        out.push(StreamEvent::ToolCallArguments {
            index,
            delta: arguments,
        });
        out.push(StreamEvent::ToolCallEnd { index });
    }
    out.push(StreamEvent::Usage(turn.usage));
    out.push(StreamEvent::Stop(turn.stop_reason.clone()));
    out.push(StreamEvent::Done(turn));
    out
}

pub(crate) mod claude;
pub(crate) mod gemini;
pub(crate) mod openai;
pub(crate) mod responses;
pub(crate) mod sse;

/// Parses an event's JSON, or says which event did not parse.
fn parse(event: &str, data: &str) -> Result<Value, StreamError> {
    serde_json::from_str(data).map_err(|e| {
        let name = if event.is_empty() { "an event" } else { event };
        StreamError::Malformed(format!("{name} is not JSON ({e})"))
    })
}

/// `events`, failing with [`LlmError::CallTimeout`] once `limit` has
/// passed since they were first asked for: a server that keeps sending
/// (if only keep-alive comments, which the read timeout counts as life)
/// cannot hold a call longer.
pub(crate) fn within<'a>(
    events: EventStream<'a>,
    limit: Duration,
    provider: &'static str,
) -> EventStream<'a> {
    let state = (events, None::<Instant>);
    Box::pin(futures_util::stream::unfold(
        state,
        move |(mut events, deadline)| async move {
            let deadline = deadline.or_else(|| Instant::now().checked_add(limit));
            let next = match deadline {
                Some(at) => tokio::time::timeout_at(at, events.next()).await,
                // Too far off to be a time: no limit.
                None => Ok(events.next().await),
            };
            match next {
                Ok(Some(event)) => Some((event, (events, deadline))),
                Ok(None) => None,
                Err(_) => {
                    // Nothing follows the error.
                    let ended: EventStream<'a> = Box::pin(futures_util::stream::empty());
                    Some((
                        Err(LlmError::CallTimeout { provider, limit }),
                        (ended, deadline),
                    ))
                }
            }
        },
    ))
}

/// A stream's own error as the call's error.
pub(crate) fn stream_error(provider: &'static str, e: StreamError) -> LlmError {
    match e {
        StreamError::Provider(message) => LlmError::Stream {
            provider,
            message: format!("the provider reported an error mid-stream: {message}"),
        },
        StreamError::ContextOverflow(message) => LlmError::ContextOverflow {
            provider,
            tokens: None,
            limit: None,
            message,
        },
        StreamError::Malformed(message) => LlmError::Stream { provider, message },
        StreamError::TooLarge(limit) => LlmError::EventTooLarge { provider, limit },
    }
}
