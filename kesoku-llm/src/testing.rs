//! Record a real session once, replay it in CI (the `testing` feature).
//!
//! [`RecordingTransport`] sits over a real transport and writes each
//! request and its answer to a cassette, a JSON Lines file; a
//! [`ReplayTransport`] answers the same requests from it, in order,
//! without a network, and fails a request that is not the one recorded.
//! No header of a request is written, so no key is.
//!
//! [`CaptureTransport`] answers every request with one reply and keeps
//! what was sent: for tests of the requests themselves.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use kesoku_core::{Message, MessageType, Role};
//! use kesoku_llm::testing::{RecordingTransport, ReplayTransport};
//! use kesoku_llm::{
//!     ClaudeLlm, HttpRequest, HttpResponse, HttpTransport, Llm, LlmFuture, LlmOptions,
//!     TransportError,
//! };
//!
//! // Stands in for the provider here; in a real recording, leave the
//! // backend's default transport under the recorder.
//! struct Provider;
//! impl HttpTransport for Provider {
//!     fn send(&self, _: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
//!         let reply = serde_json::json!({
//!             "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
//!             "content": [{"type": "text", "text": "Hello!"}],
//!             "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}
//!         });
//!         Box::pin(async move { Ok(HttpResponse::json(200, &reply)) })
//!     }
//! }
//!
//! let dir = tempfile::tempdir().unwrap();
//! let cassette = dir.path().join("hello.jsonl");
//! let history = [Message::new("s", Role::User, MessageType::Text, "Hi")];
//! let options = LlmOptions::new("m");
//!
//! let recorded = ClaudeLlm::new("key").with_transport(RecordingTransport::new(Provider, &cassette));
//! let live = recorded.complete("s", &history, &[], &options).await.unwrap();
//!
//! let replay = Arc::new(ReplayTransport::open(&cassette).unwrap());
//! let replayed = ClaudeLlm::new("key").with_transport(Arc::clone(&replay));
//! let again = replayed.complete("s", &history, &[], &options).await.unwrap();
//! assert_eq!((again.text, again.usage), (live.text, live.usage));
//! assert_eq!(replay.remaining(), 0);
//! # });
//! ```

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::future::LlmFuture;
use crate::http::{HttpBody, HttpRequest, HttpResponse, HttpTransport, TransportError};

/// One request and what came back, as a line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Interaction {
    method: String,
    /// Path and query: the host differs between a recording and a replay.
    path: String,
    /// The body: JSON as JSON, anything else as text.
    request: Value,
    #[serde(flatten)]
    answer: Answer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Answer {
    Response {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<String>,
        /// The body as text, or `body_base64` when it is not UTF-8.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body_base64: Option<String>,
    },
    /// The transport failed: replayed as the same failure.
    Error { error: String },
}

/// Why a cassette cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassetteError {
    /// The file cannot be read or written.
    #[error("cassette {}", path.display())]
    Io {
        /// The cassette.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a recorded interaction.
    #[error("cassette {}, line {line}", path.display())]
    Line {
        /// The cassette.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

/// A transport that passes each request to `inner` and writes it, with
/// its answer, to a cassette that a [`ReplayTransport`] can play.
///
/// An interaction is written when its answer's body has been read to its
/// end (or dropped), in the order the requests were sent; the file is
/// written anew each time, so it always holds every finished interaction.
/// A failure to write it is the error of the body's last read.
pub struct RecordingTransport<T> {
    inner: T,
    tape: Arc<Tape>,
}

impl<T> std::fmt::Debug for RecordingTransport<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingTransport")
            .field("path", &self.tape.path)
            .finish_non_exhaustive()
    }
}

/// The cassette being written: a slot per request, in the order sent.
#[derive(Debug)]
struct Tape {
    path: PathBuf,
    slots: Mutex<Vec<Option<Interaction>>>,
}

impl Tape {
    fn reserve(&self) -> usize {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.push(None);
        slots.len() - 1
    }

    fn fill(&self, slot: usize, interaction: Interaction) -> Result<(), CassetteError> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots[slot] = Some(interaction);
        let mut text = String::new();
        for i in slots.iter().flatten() {
            // An Interaction is plain data: serializing it cannot fail.
            text.push_str(&serde_json::to_string(i).unwrap_or_default());
            text.push('\n');
        }
        std::fs::write(&self.path, text).map_err(|source| CassetteError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

impl<T: HttpTransport> RecordingTransport<T> {
    /// Records what goes through `inner` to the cassette at `path`
    /// (replaced).
    pub fn new(inner: T, path: impl AsRef<Path>) -> Self {
        RecordingTransport {
            inner,
            tape: Arc::new(Tape {
                path: path.as_ref().to_owned(),
                slots: Mutex::new(Vec::new()),
            }),
        }
    }

    async fn record(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let slot = self.tape.reserve();
        let method = request.method.to_string();
        let path = request.path().to_owned();
        let body = request
            .json()
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
        let head = |answer| Interaction {
            method: method.clone(),
            path: path.clone(),
            request: body.clone(),
            answer,
        };
        match self.inner.send(request).await {
            Err(e) => {
                let error = e.to_string();
                self.tape
                    .fill(slot, head(Answer::Error { error }))
                    .map_err(|w| TransportError::Other(Arc::new(w)))?;
                Err(e)
            }
            Ok(response) => {
                let header = |name| {
                    response
                        .headers
                        .get(name)
                        .and_then(|v: &HeaderValue| v.to_str().ok())
                        .map(str::to_owned)
                };
                let content_type = header(http::header::CONTENT_TYPE);
                let retry_after = header(http::header::RETRY_AFTER);
                let status = response.status.as_u16();
                let taping = Taping {
                    body: response.body,
                    read: Vec::new(),
                    tape: Arc::clone(&self.tape),
                    slot,
                    pending: Some(head(Answer::Response {
                        status,
                        content_type,
                        retry_after,
                        body: None,
                        body_base64: None,
                    })),
                };
                Ok(HttpResponse::new(
                    response.status,
                    response.headers,
                    taping.boxed(),
                ))
            }
        }
    }
}

impl<T: HttpTransport> HttpTransport for RecordingTransport<T> {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        Box::pin(self.record(request))
    }
}

/// A response body passed through, kept, and written when it ends.
struct Taping {
    body: HttpBody,
    read: Vec<u8>,
    tape: Arc<Tape>,
    slot: usize,
    /// The interaction, until it is written.
    pending: Option<Interaction>,
}

impl Taping {
    fn write(&mut self) -> Result<(), CassetteError> {
        let Some(mut interaction) = self.pending.take() else {
            return Ok(());
        };
        if let Answer::Response {
            body, body_base64, ..
        } = &mut interaction.answer
        {
            match String::from_utf8(std::mem::take(&mut self.read)) {
                Ok(text) => *body = Some(text),
                Err(e) => {
                    *body_base64 =
                        Some(base64::engine::general_purpose::STANDARD.encode(e.as_bytes()));
                }
            }
        }
        self.tape.fill(self.slot, interaction)
    }
}

impl Stream for Taping {
    type Item = Result<Bytes, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.body.poll_next_unpin(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => self.read.extend_from_slice(chunk),
            Poll::Ready(None) => {
                if let Err(e) = self.write() {
                    return Poll::Ready(Some(Err(TransportError::Other(Arc::new(e)))));
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        next
    }
}

impl Drop for Taping {
    fn drop(&mut self) {
        // A body not read to its end (a stream the caller left) is kept as
        // far as it was read.
        if let Err(e) = self.write() {
            tracing::error!(error = %kesoku_core::ErrorChain(&e), "the cassette could not be written");
        }
    }
}

/// A transport that answers from a cassette written by a
/// [`RecordingTransport`]: each request gets the next recorded answer, if
/// it is the request recorded there (same method and path, and, unless
/// [`ignoring_bodies`](Self::ignoring_bodies), the same JSON body);
/// otherwise it fails with [`TransportError::Replay`], naming the first
/// difference.
#[derive(Debug)]
pub struct ReplayTransport {
    path: PathBuf,
    interactions: Vec<Interaction>,
    next: Mutex<usize>,
    match_bodies: bool,
}

impl ReplayTransport {
    /// The cassette at `path`.
    ///
    /// # Errors
    /// When it cannot be read, or a line is not an interaction.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CassetteError> {
        let path = path.as_ref().to_owned();
        let text = std::fs::read_to_string(&path).map_err(|source| CassetteError::Io {
            path: path.clone(),
            source,
        })?;
        let mut interactions = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let interaction = serde_json::from_str(line).map_err(|source| CassetteError::Line {
                path: path.clone(),
                line: i + 1,
                source,
            })?;
            interactions.push(interaction);
        }
        Ok(ReplayTransport {
            path,
            interactions,
            next: Mutex::new(0),
            match_bodies: true,
        })
    }

    /// Answers by method and path alone, whatever the bodies sent.
    #[must_use]
    pub fn ignoring_bodies(mut self) -> Self {
        self.match_bodies = false;
        self
    }

    /// How many recorded answers were not asked for yet.
    pub fn remaining(&self) -> usize {
        let next = *self.next.lock().unwrap_or_else(PoisonError::into_inner);
        self.interactions.len() - next
    }

    fn answer(&self, request: &HttpRequest) -> Result<HttpResponse, TransportError> {
        let index = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let index = *next;
            if index < self.interactions.len() {
                *next += 1;
            }
            index
        };
        let cassette = self.path.display();
        let Some(recorded) = self.interactions.get(index) else {
            return Err(TransportError::Replay(format!(
                "cassette {cassette} has {} interactions; request {} to {} has none",
                self.interactions.len(),
                index + 1,
                request.path()
            )));
        };
        let differs = |what: String| {
            TransportError::Replay(format!(
                "request {} differs from the one recorded in {cassette}: {what}",
                index + 1
            ))
        };
        if recorded.method != request.method.as_str() || recorded.path != request.path() {
            return Err(differs(format!(
                "{} {}, recorded {} {}",
                request.method,
                request.path(),
                recorded.method,
                recorded.path
            )));
        }
        if self.match_bodies {
            let sent = request.json().unwrap_or_else(|_| {
                Value::String(String::from_utf8_lossy(&request.body).into_owned())
            });
            if let Some(at) = first_difference(&sent, &recorded.request, String::new()) {
                return Err(differs(format!("the body differs at `{at}`")));
            }
        }
        match &recorded.answer {
            Answer::Error { error } => Err(TransportError::Other(Arc::new(std::io::Error::other(
                error.clone(),
            )))),
            Answer::Response {
                status,
                content_type,
                retry_after,
                body,
                body_base64,
            } => {
                let mut headers = HeaderMap::new();
                for (name, value) in [
                    (http::header::CONTENT_TYPE, content_type),
                    (http::header::RETRY_AFTER, retry_after),
                ] {
                    if let Some(v) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                        headers.insert(name, v);
                    }
                }
                let bytes = match (body, body_base64) {
                    (Some(text), _) => Bytes::from(text.clone()),
                    (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .map_err(|e| differs(format!("its recorded body is not base64: {e}")))?
                        .into(),
                    (None, None) => Bytes::new(),
                };
                let status = StatusCode::from_u16(*status)
                    .map_err(|e| differs(format!("its recorded status is not one: {e}")))?;
                Ok(HttpResponse::whole(status, headers, bytes))
            }
        }
    }
}

impl HttpTransport for ReplayTransport {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        let answer = self.answer(&request);
        Box::pin(async move { answer })
    }
}

/// A transport that answers every request with one reply and keeps each
/// request sent: what a test of the requests themselves needs.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kesoku_core::{Message, MessageType, Role};
/// use kesoku_llm::testing::CaptureTransport;
/// use kesoku_llm::{Llm, LlmOptions, OpenAiLlm};
///
/// let capture = Arc::new(CaptureTransport::json(&serde_json::json!({
///     "choices": [{"message": {"role": "assistant", "content": "Hi!"}, "finish_reason": "stop"}]
/// })));
/// let llm = OpenAiLlm::new("key").with_transport(Arc::clone(&capture));
/// let history = [Message::new("s", Role::User, MessageType::Text, "Hello")];
/// llm.complete("s", &history, &[], &LlmOptions::new("gpt-x")).await.unwrap();
/// let sent = capture.last_json().unwrap();
/// assert_eq!(sent["model"], "gpt-x");
/// assert_eq!(capture.requests()[0].path(), "/v1/chat/completions");
/// # });
/// ```
#[derive(Debug)]
pub struct CaptureTransport {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    sent: Mutex<Vec<HttpRequest>>,
}

impl CaptureTransport {
    /// Answers every request `200 OK` with `reply` as JSON.
    #[must_use]
    pub fn json(reply: &Value) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        CaptureTransport::new(StatusCode::OK, headers, reply.to_string())
    }

    /// Answers every request with this status, headers and body (an
    /// event stream, say).
    #[must_use]
    pub fn new(status: StatusCode, headers: HeaderMap, body: impl Into<Bytes>) -> Self {
        CaptureTransport {
            status,
            headers,
            body: body.into(),
            sent: Mutex::new(Vec::new()),
        }
    }

    /// Every request sent, in order.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The body of the last request sent, parsed; `None` before any, or
    /// when it is not JSON.
    pub fn last_json(&self) -> Option<Value> {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.last().and_then(|r| r.json().ok())
    }

    /// Forgets the requests sent so far.
    pub fn clear(&self) {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl HttpTransport for CaptureTransport {
    fn send(&self, request: HttpRequest) -> LlmFuture<'_, Result<HttpResponse, TransportError>> {
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        let response = HttpResponse::whole(self.status, self.headers.clone(), self.body.clone());
        Box::pin(async move { Ok(response) })
    }
}

/// The JSON pointer of the first place where `a` and `b` differ.
fn first_difference(sent: &Value, recorded: &Value, at: String) -> Option<String> {
    match (sent, recorded) {
        (Value::Object(sent), Value::Object(recorded)) => {
            for (key, value) in sent {
                let here = format!("{at}/{key}");
                match recorded.get(key) {
                    Some(other) => {
                        if let Some(found) = first_difference(value, other, here) {
                            return Some(found);
                        }
                    }
                    None => return Some(here),
                }
            }
            recorded
                .keys()
                .find(|key| !sent.contains_key(*key))
                .map(|key| format!("{at}/{key}"))
        }
        (Value::Array(sent), Value::Array(recorded)) => {
            for (i, (value, other)) in sent.iter().zip(recorded).enumerate() {
                if let Some(found) = first_difference(value, other, format!("{at}/{i}")) {
                    return Some(found);
                }
            }
            (sent.len() != recorded.len())
                .then(|| format!("{at}/{}", sent.len().min(recorded.len())))
        }
        _ => (sent != recorded).then_some(if at.is_empty() { "/".to_owned() } else { at }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_by_its_pointer() {
        let a = json!({"messages": [{"content": "a"}, {"content": "b"}], "model": "m"});
        assert_eq!(first_difference(&a, &a.clone(), String::new()), None);
        let b = json!({"messages": [{"content": "a"}, {"content": "c"}], "model": "m"});
        assert_eq!(
            first_difference(&a, &b, String::new()).as_deref(),
            Some("/messages/1/content")
        );
        let c = json!({"messages": [{"content": "a"}], "model": "m"});
        assert_eq!(
            first_difference(&a, &c, String::new()).as_deref(),
            Some("/messages/1")
        );
        let d = json!({"messages": [{"content": "a"}, {"content": "b"}], "model": "m", "x": 1});
        assert_eq!(
            first_difference(&a, &d, String::new()).as_deref(),
            Some("/x")
        );
        assert_eq!(
            first_difference(&json!(1), &json!(2), String::new()).as_deref(),
            Some("/")
        );
    }
}
