//! [`Backend`]: the one implementation of a model call, over a
//! [`WireFormat`]. It lowers the tools (cached per set), reads the history
//! once (or only what is new since the session's last request, see
//! `prefix.rs`), lets the format encode it, sends it through the [`Endpoint`] and
//! lets the format decode the answer.
//!
//! The public backends (`ClaudeLlm`, `OpenAiLlm`, `GeminiLlm`) are thin
//! wrappers declared with [`public_backend!`], which gives each the same
//! constructors, builder methods and [`Llm`](crate::Llm) implementation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use futures_util::StreamExt as _;

use kesoku_core::Message;
use serde_json::Value;

use crate::declaration::ToolDeclaration;
use crate::endpoint::{Endpoint, Streamed};
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history;
use crate::http::HttpBody;
use crate::key::ApiKey;
use crate::llm::LlmFuture;
use crate::options::LlmOptions;
use crate::prefix::{Prefix, Prefixes, keep_until, pairs_forward, unpaired_parent};
use crate::schemas::{LoweredTools, SchemaCache};
use crate::stream::{EventStream, Reader, StreamEvent, events_of, stream_error, within};
use crate::turn::AssistantTurn;
use crate::wire::{Output, Request, WireFormat};

/// A request ready to send, with the lowered tools its answer is read with.
struct Encoded {
    body: Vec<u8>,
    fallbacks: Vec<ContentFallback>,
    lowered: Arc<LoweredTools>,
}

/// A streamed call's answer: a stream, or (from a server that does not
/// stream) the whole reply.
enum Opened<F: WireFormat> {
    Stream(Box<Reading<F>>),
    Whole(Box<AssistantTurn>),
}

/// Where a streamed call is.
enum Step<'a, F: WireFormat> {
    /// Sending the request.
    Start(LlmFuture<'a, Result<Opened<F>, LlmError>>),
    /// Reading events.
    Reading(Box<Reading<F>>),
    /// The reply was read: its last events.
    Tail(VecDeque<StreamEvent>),
    Ended,
}

/// A streamed reply being read.
struct Reading<F: WireFormat> {
    body: HttpBody,
    reader: Reader<F::Decoder>,
    /// Events read but not given yet.
    pending: VecDeque<StreamEvent>,
    /// An error to give once `pending` is out (events read before it, in
    /// the same chunk, come first).
    failed: Option<LlmError>,
    lowered: Arc<LoweredTools>,
    fallbacks: Vec<ContentFallback>,
}

/// A provider backend: where and how to reach it, and its wire format.
#[derive(Debug)]
pub(crate) struct Backend<F> {
    pub(crate) format: F,
    pub(crate) endpoint: Endpoint,
    schemas: SchemaCache,
    /// Each session's history as already encoded.
    prefixes: Prefixes,
    /// Whether an `Unsupported` lowering finding fails the call.
    pub(crate) deny_unsupported: bool,
}

impl<F: WireFormat> Backend<F> {
    pub(crate) fn new(api_key: Option<ApiKey>, base_url: &str, format: F) -> Self {
        Backend::over(Endpoint::new(F::NAME, api_key, base_url), format)
    }

    /// Configured from the environment, as the provider's official SDK is.
    pub(crate) fn from_env() -> Result<Self, LlmError> {
        let endpoint =
            Endpoint::from_env(F::NAME, F::KEY_VARS, F::BASE_URL_VAR, F::DEFAULT_BASE_URL)?;
        Ok(Backend::over(endpoint, F::default()))
    }

    fn over(endpoint: Endpoint, format: F) -> Self {
        Backend {
            format,
            endpoint,
            schemas: SchemaCache::default(),
            prefixes: Prefixes::default(),
            deny_unsupported: false,
        }
    }

    /// What lowering `tools` for this provider changes: the set's cached
    /// lowering's report (lowered now if the set is new).
    pub(crate) fn lowering_report(
        &self,
        tools: &[ToolDeclaration],
    ) -> Arc<kesoku_core::lowering::LoweringReport> {
        let lowered = self.schemas.get(
            F::NAME,
            F::NAMES,
            self.format.schema_dialect(),
            tools,
            |t| self.format.sends_schema(t),
        );
        Arc::clone(&lowered.report)
    }

    /// The tools lowered for this provider, and the error to return
    /// instead when one cannot be represented and that is denied.
    fn lowered(&self, tools: &[ToolDeclaration]) -> Result<Arc<LoweredTools>, LlmError> {
        let lowered = self.schemas.get(
            F::NAME,
            F::NAMES,
            self.format.schema_dialect(),
            tools,
            |t| self.format.sends_schema(t),
        );
        if self.deny_unsupported
            && let Some(e) = lowered.report.unsupported().next()
        {
            return Err(LlmError::UnsupportedSchema {
                provider: F::NAME,
                tool: e.tool.clone(),
                path: e.path.clone(),
                reason: e.detail.clone(),
            });
        }
        Ok(lowered)
    }

    /// A typed answer's shape lowered for this provider, or the error
    /// that nothing is sent when the provider cannot take it.
    fn output<'o>(&self, output: &'o kesoku_core::OutputSchema) -> Result<Output<'o>, LlmError> {
        let lowered = output.lowered(self.format.output_dialect());
        if let Some(e) = lowered.report.unsupported().next() {
            return Err(LlmError::UnsupportedOutput {
                provider: F::NAME,
                output: output.name().to_owned(),
                path: e.path.clone(),
                reason: e.detail.clone(),
            });
        }
        Ok(Output {
            name: output.name(),
            schema: &lowered.schema,
        })
    }

    /// The request body. With a `session`, the wire messages kept from
    /// its last request are reused when `messages` start with them (see
    /// `prefix.rs`), and what this one adds is kept for the next.
    fn encode(
        &self,
        session: Option<&str>,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
        stream: bool,
    ) -> Result<Encoded, LlmError> {
        let lowered = self.lowered(tools)?;
        let system = options.system.as_deref();
        let session = session.filter(|_| self.format.keeps_prefix());
        let kept = session.and_then(|s| self.prefixes.take(s, &lowered, system, messages));
        let start = kept.as_ref().map_or(0, Prefix::len);
        let no_calls = HashMap::new();
        // The options' instructions are the first item, so a kept prefix
        // holds them.
        let read = history::read_from(
            if kept.is_some() { None } else { system },
            messages,
            start,
            kept.as_ref().map_or(&no_calls, |p| &p.calls),
        );
        let mut fallbacks = Vec::new();
        let wire = self
            .format
            .encode_history(&read.items, &lowered.names, &mut fallbacks);
        let output = options
            .output
            .as_ref()
            .map(|o| self.output(o))
            .transpose()?;
        let request = Request {
            tools,
            lowered: &lowered,
            options,
            output,
            previous: wire.previous,
        };
        let mut system_texts: Vec<&str> = kept
            .as_ref()
            .map(|p| p.system_texts.iter().map(String::as_str).collect())
            .unwrap_or_default();
        system_texts.extend(wire.system.iter().map(|&(_, t)| t));
        let fields = self.fields(&request, &system_texts, stream)?;

        let (body, new_from, starts) = Self::body(
            kept.as_ref().map(|p| p.json.as_slice()),
            &wire.messages,
            &fields,
        )?;

        let mut all_fallbacks = kept
            .as_ref()
            .map(|p| p.fallbacks.clone())
            .unwrap_or_default();
        all_fallbacks.extend(fallbacks.iter().cloned());

        if let Some(session) = session {
            match keep_until(&wire.messages, &read.items) {
                Some((k, cut)) if !pairs_forward(&read.items[..cut], kept.as_ref()) => {
                    let last_from = starts[k];
                    let mut prefix =
                        kept.unwrap_or_else(|| Prefix::new(Arc::clone(&lowered), system));
                    let until = read.at[cut];
                    let covered = &messages[prefix.len()..until];
                    let ids: HashSet<&str> = if fallbacks.is_empty() {
                        HashSet::new()
                    } else {
                        covered.iter().map(|m| m.id.as_str()).collect()
                    };
                    let json = &body[new_from..last_from];
                    let json = json.strip_prefix(b",").unwrap_or(json);
                    let json = json.strip_suffix(b",").unwrap_or(json);
                    prefix.extend(
                        covered,
                        json,
                        wire.system
                            .iter()
                            .filter(|&&(i, _)| i < cut)
                            .map(|&(_, t)| t),
                        fallbacks
                            .into_iter()
                            .filter(|f| ids.contains(f.message_id.as_str())),
                        read.items[..cut].iter().filter_map(unpaired_parent),
                    );
                    self.prefixes.put(session, prefix);
                }
                _ => {
                    if let Some(prefix) = kept {
                        self.prefixes.put(session, prefix);
                    }
                }
            }
        }
        Ok(Encoded {
            body,
            fallbacks: all_fallbacks,
            lowered,
        })
    }

    /// The body: the kept prefix's JSON, then the new wire messages, then
    /// the other fields. Returns it with where the new messages start, and
    /// where each of them does.
    fn body(
        kept: Option<&[u8]>,
        messages: &[(usize, Value)],
        fields: &serde_json::Map<String, Value>,
    ) -> Result<(Vec<u8>, usize, Vec<usize>), LlmError> {
        let mut body = Vec::with_capacity(kept.map_or(0, <[u8]>::len) + 256 * (messages.len() + 4));
        body.extend_from_slice(b"{\"");
        body.extend_from_slice(F::HISTORY_KEY.as_bytes());
        body.extend_from_slice(b"\":[");
        if let Some(json) = kept {
            body.extend_from_slice(json);
        }
        let new_from = body.len();
        let mut starts = Vec::with_capacity(messages.len());
        for (_, m) in messages {
            if body.last() != Some(&b'[') {
                body.push(b',');
            }
            starts.push(body.len());
            serde_json::to_writer(&mut body, m).map_err(|e| Self::unencodable(&e))?;
        }
        body.push(b']');
        for (key, value) in fields {
            body.push(b',');
            serde_json::to_writer(&mut body, key).map_err(|e| Self::unencodable(&e))?;
            body.push(b':');
            serde_json::to_writer(&mut body, value).map_err(|e| Self::unencodable(&e))?;
        }
        body.push(b'}');
        Ok((body, new_from, starts))
    }

    /// The body's fields besides the history, asking for a stream when
    /// `stream`, with the options' provider parameters merged in last.
    fn fields(
        &self,
        request: &Request<'_>,
        system: &[&str],
        stream: bool,
    ) -> Result<serde_json::Map<String, Value>, LlmError> {
        let params = &request.options.provider_params;
        if params.contains_key(F::HISTORY_KEY) {
            return Err(LlmError::Config {
                provider: F::NAME,
                message: format!(
                    "the provider parameter `{}` is the history's own key; the history is the messages the call is given",
                    F::HISTORY_KEY
                ),
            });
        }
        let mut fields = self.format.encode_body(request, system);
        if stream {
            self.format.stream_fields(&mut fields);
        }
        crate::options::merge_params(&mut fields, params);
        Ok(fields)
    }

    fn unencodable(e: &serde_json::Error) -> LlmError {
        LlmError::Config {
            provider: F::NAME,
            message: format!("cannot encode the request: {e}"),
        }
    }

    /// The credential the format fetches for each request (a token
    /// provider's), if it has one.
    async fn fresh_credential(&self) -> Result<Option<ApiKey>, LlmError> {
        match self.format.fresh_credential() {
            Some(fetch) => fetch.await.map(Some),
            None => Ok(None),
        }
    }

    /// One call: encode, send, decode.
    pub(crate) async fn complete(
        &self,
        session_id: &str,
        messages: &[Message],
        tools: &[ToolDeclaration],
        options: &LlmOptions,
    ) -> Result<AssistantTurn, LlmError> {
        let call = async {
            let request = self.encode(Some(session_id), messages, tools, options, false)?;
            let fresh = self.fresh_credential().await?;
            let secret = fresh.as_ref().map(ApiKey::expose).or(self.endpoint.key());
            let headers = self.format.auth_headers(secret);
            let path = self.format.path(options);
            let body = self
                .endpoint
                .post(&path, &headers, request.body, secret)
                .await?;
            let mut turn = self
                .format
                .decode(session_id, &body, &request.lowered.names)?;
            turn.fallbacks = request.fallbacks;
            Ok(turn)
        };
        match self.endpoint.options().call_timeout {
            Some(limit) => {
                tokio::time::timeout(limit, call)
                    .await
                    .unwrap_or(Err(LlmError::CallTimeout {
                        provider: F::NAME,
                        limit,
                    }))
            }
            None => call.await,
        }
    }

    /// One streamed call: encode (as for `complete`, plus the provider's
    /// streaming fields), send, and read the events as they come; the last
    /// is the turn `complete` would give for the same reply.
    pub(crate) fn stream<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> EventStream<'a> {
        let start = async move {
            let request = self.encode(Some(session_id), messages, tools, options, true)?;
            let fresh = self.fresh_credential().await?;
            let secret = fresh.as_ref().map(ApiKey::expose).or(self.endpoint.key());
            let headers = self.format.auth_headers(secret);
            let path = self.format.stream_path(options);
            let body = match self
                .endpoint
                .post_stream(&path, &headers, request.body, secret)
                .await?
            {
                Streamed::Events(body) => body,
                // A compatible server that ignored the request for a
                // stream: its answer is read as `complete` reads it.
                Streamed::Whole(body) => {
                    let mut turn = self
                        .format
                        .decode(session_id, &body, &request.lowered.names)?;
                    turn.fallbacks = request.fallbacks;
                    return Ok(Opened::Whole(Box::new(turn)));
                }
            };
            Ok(Opened::Stream(Box::new(Reading::<F> {
                body,
                reader: Reader::new(self.endpoint.options().max_event_bytes),
                pending: VecDeque::new(),
                failed: None,
                lowered: request.lowered,
                fallbacks: request.fallbacks,
            })))
        };
        let state: Step<'a, F> = Step::Start(Box::pin(start));
        let events = Box::pin(futures_util::stream::unfold(state, move |state| {
            self.next_event(state, session_id)
        }));
        match self.endpoint.options().call_timeout {
            Some(limit) => within(events, limit, F::NAME),
            None => events,
        }
    }

    /// One step of a streamed call: the next event, and what is left.
    async fn next_event<'a>(
        &'a self,
        mut state: Step<'a, F>,
        session_id: &'a str,
    ) -> Option<(Result<StreamEvent, LlmError>, Step<'a, F>)> {
        loop {
            match state {
                Step::Start(start) => match start.await {
                    Ok(Opened::Stream(reading)) => state = Step::Reading(reading),
                    Ok(Opened::Whole(turn)) => state = Step::Tail(events_of(*turn).into()),
                    Err(e) => return Some((Err(e), Step::Ended)),
                },
                Step::Reading(mut r) => {
                    if let Some(event) = r.pending.pop_front() {
                        return Some((Ok(event), Step::Reading(r)));
                    }
                    if let Some(e) = r.failed.take() {
                        return Some((Err(e), Step::Ended));
                    }
                    let next = if r.reader.ended() {
                        None
                    } else {
                        r.body.next().await
                    };
                    match next {
                        Some(Ok(chunk)) => {
                            let mut out = Vec::new();
                            if let Err(e) = r.reader.feed(&chunk, &mut out) {
                                r.failed = Some(stream_error(F::NAME, e));
                            }
                            r.pending.extend(out);
                            state = Step::Reading(r);
                        }
                        Some(Err(e)) if !r.reader.complete() => {
                            let error = LlmError::Stream {
                                provider: F::NAME,
                                message: format!("the stream broke off: {e}"),
                            };
                            return Some((Err(error), Step::Ended));
                        }
                        // A reply that never said it was complete may be
                        // missing anything, a call's arguments included: it
                        // is an error, never a turn.
                        None if !r.reader.complete() => {
                            let error = LlmError::Stream {
                                provider: F::NAME,
                                message: "the stream ended before the reply was complete".into(),
                            };
                            return Some((Err(error), Step::Ended));
                        }
                        // The end, or a failure after the reply was whole.
                        Some(Err(_)) | None => {
                            let Reading {
                                reader,
                                lowered,
                                fallbacks,
                                ..
                            } = *r;
                            let body = reader.into_body();
                            let turn = match self.format.decode(session_id, &body, &lowered.names) {
                                Ok(mut turn) => {
                                    turn.fallbacks = fallbacks;
                                    turn
                                }
                                Err(e) => return Some((Err(e), Step::Ended)),
                            };
                            let tail = [
                                StreamEvent::Usage(turn.usage),
                                StreamEvent::Stop(turn.stop_reason.clone()),
                                StreamEvent::Done(turn),
                            ];
                            state = Step::Tail(tail.into_iter().collect());
                        }
                    }
                }
                Step::Tail(mut tail) => {
                    let event = tail.pop_front()?;
                    return Some((Ok(event), Step::Tail(tail)));
                }
                Step::Ended => return None,
            }
        }
    }
}

/// Declares a public backend: a wrapper around [`Backend`] over a wire
/// format, with the constructors, builder methods and [`Llm`](crate::Llm)
/// implementation every backend has. `env` names the variables
/// `from_env` reads, for its documentation.
macro_rules! public_backend {
    ($(#[$attr:meta])* $name:ident($format:ty), env: $env:literal) => {
        $(#[$attr])*
        #[derive(Debug)]
        pub struct $name(crate::backend::Backend<$format>);

        impl $name {
            /// A backend with this key and the default address.
            pub fn new(api_key: impl Into<String>) -> Self {
                let key = Some(crate::key::ApiKey::new(api_key));
                $name(crate::backend::Backend::new(
                    key,
                    <$format as crate::wire::WireFormat>::DEFAULT_BASE_URL,
                    <$format>::default(),
                ))
            }

            #[doc = concat!("A backend configured from ", $env, ", as the official SDK is.")]
            pub fn from_env() -> Result<Self, crate::error::LlmError> {
                crate::backend::Backend::from_env().map($name)
            }
        }

        crate::backend::backend_methods!(
            $name($format),
            concat!("kesoku_llm::", stringify!($name), "::new(\"key\")")
        );
    };
}

/// The builder methods and [`Llm`](crate::Llm) implementation every public
/// backend has, for a wrapper around [`Backend`] over a wire format (one
/// with constructors of its own, such as Azure's, declares its struct and
/// uses this alone).
macro_rules! backend_methods {
    ($name:ident($format:ty), $new:expr) => {
        impl $name {

            /// Sets the base address (for proxies and compatible servers).
            #[must_use]
            pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
                self.0.endpoint.set_base_url(&url.into());
                self
            }

            /// Sets timeouts, the retry policy (from its retry fields) and
            /// the limits of one call.
            #[must_use]
            pub fn with_http_options(mut self, options: crate::http_options::HttpOptions) -> Self {
                self.0.endpoint.set_http_options(options);
                self
            }

            /// What lowering `tools` to this provider's schema dialect
            /// changes, tool by tool, with JSON paths: what a call with
            /// them would log (once per set) or, with
            /// [`deny_unsupported_schemas`](Self::deny_unsupported_schemas),
            /// refuse. A set is lowered once and kept (the last 16 sets),
            /// so asking again, or calling with the same tools, reuses it:
            /// the same `Arc`.
            pub fn lowering_report(
                &self,
                tools: &[crate::declaration::ToolDeclaration],
            ) -> std::sync::Arc<kesoku_core::lowering::LoweringReport> {
                self.0.lowering_report(tools)
            }

            /// What lowering a typed answer's schema to this provider's
            /// structured-output mode changes, with JSON paths; an
            /// `Unsupported` finding makes a call asking for it fail
            /// before anything is sent. Lowered once per shape and kept.
            ///
            /// ```
            #[doc = concat!("let model = ", $new, ";")]
            /// let output = kesoku_core::OutputSchema::new("Point", serde_json::json!({
            ///     "type": "object",
            ///     "properties": {"x": {"type": "integer", "minimum": 0}},
            ///     "required": ["x"],
            ///     "additionalProperties": false,
            /// })).unwrap();
            /// let report = model.output_report(&output);
            /// assert!(!report.has_unsupported());
            /// for entry in report {
            ///     println!("{entry}"); // answer `Point` at ...: what changed and why
            /// }
            /// ```
            pub fn output_report<'o>(
                &self,
                output: &'o kesoku_core::OutputSchema,
            ) -> &'o kesoku_core::lowering::LoweringReport {
                &output.lowered(crate::wire::WireFormat::output_dialect(&self.0.format)).report
            }

            /// Sets when a request is tried again (the last of this and
            /// [`with_http_options`](Self::with_http_options) wins).
            #[must_use]
            pub fn with_retry_policy(mut self, policy: crate::retry::RetryPolicy) -> Self {
                self.0.endpoint.set_retry_policy(policy);
                self
            }

            /// Sends every request through `transport` instead of the
            /// default [`ReqwestTransport`](crate::ReqwestTransport): another
            /// client, a proxy, a recorder, a replay. The retry policy is
            /// still applied over it; `with_http_options` then changes
            /// the retries and limits, not the transport.
            #[must_use]
            pub fn with_transport(mut self, transport: impl crate::http::HttpTransport + 'static) -> Self {
                self.0.endpoint.set_transport(std::sync::Arc::new(transport));
                self
            }

            /// Whether a tool schema with a part this provider cannot
            /// represent fails the call with
            /// [`LlmError::UnsupportedSchema`](crate::LlmError::UnsupportedSchema)
            /// before anything is sent. Off by default: such a tool is
            /// sent as lowered, and the finding is logged (once per set of
            /// tools) as a `tracing` warning, as lossy ones are.
            #[must_use]
            pub fn deny_unsupported_schemas(mut self, deny: bool) -> Self {
                self.0.deny_unsupported = deny;
                self
            }
        }

        impl crate::llm::Llm for $name {
            fn provider(&self) -> &'static str {
                <$format as crate::wire::WireFormat>::NAME
            }

            fn default_model(&self) -> &str {
                <$format as crate::wire::WireFormat>::DEFAULT_MODEL
            }

            fn context_window(&self, model: &str) -> Option<u64> {
                <$format as crate::wire::WireFormat>::context_window(model)
            }

            fn output_dialect(&self) -> Option<kesoku_core::lowering::Dialect> {
                Some(crate::wire::WireFormat::output_dialect(&self.0.format))
            }

            fn base_url(&self) -> Option<&str> {
                Some(self.0.endpoint.base_url())
            }

            fn complete<'a>(
                &'a self,
                session_id: &'a str,
                messages: &'a [kesoku_core::Message],
                tools: &'a [crate::declaration::ToolDeclaration],
                options: &'a crate::options::LlmOptions,
            ) -> crate::llm::LlmFuture<'a, Result<crate::turn::AssistantTurn, crate::error::LlmError>>
            {
                Box::pin(self.0.complete(session_id, messages, tools, options))
            }

            fn stream<'a>(
                &'a self,
                session_id: &'a str,
                messages: &'a [kesoku_core::Message],
                tools: &'a [crate::declaration::ToolDeclaration],
                options: &'a crate::options::LlmOptions,
            ) -> crate::stream::EventStream<'a> {
                self.0.stream(session_id, messages, tools, options)
            }

            fn streams(&self) -> bool {
                true
            }
        }
    };
}

pub(crate) use {backend_methods, public_backend};
