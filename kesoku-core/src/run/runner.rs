//! [`ToolRunner`]: runs the calls a model asks for, with the seed system's
//! lifecycle (parse, check for interruption, validate, inject, run) and
//! always answers with one `tool_result` [`Message`] per call.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::span;
use futures_util::stream::FuturesOrdered;
use serde_json::Map;
use tokio::sync::{
    OwnedRwLockReadGuard, OwnedRwLockWriteGuard, OwnedSemaphorePermit, RwLock, Semaphore,
};
use tracing::Instrument;

use crate::schema::tree::quote_list;
use crate::session::message::{Message, MessageType, Role, Status, keys};
use crate::session::request::{ArgumentsParseError, ToolRequest};
use crate::tool::context::ToolContext;
use crate::tool::decode::{PrepareError, RawArgs};
use crate::tool::def::Tool;
use crate::tool::error::ToolError;
use crate::tool::invocation::Invocation;
use crate::tool::output::ToolOutput;
use crate::tool::registry::ToolRegistry;

/// The interruption check: `true` once a newer user message arrived.
type IsInterrupted<'a> = Option<&'a (dyn Fn() -> bool + Send + Sync)>;

/// A registry the runner can hold: the `'static` default one, or a shared
/// explicit one.
#[derive(Clone)]
pub enum RegistryRef {
    /// A registry that lives forever, such as [`default_registry`](crate::default_registry).
    Static(&'static ToolRegistry),
    /// A shared registry.
    Shared(Arc<ToolRegistry>),
}

impl std::ops::Deref for RegistryRef {
    type Target = ToolRegistry;
    fn deref(&self) -> &ToolRegistry {
        match self {
            RegistryRef::Static(r) => r,
            RegistryRef::Shared(r) => r,
        }
    }
}

impl From<&'static ToolRegistry> for RegistryRef {
    fn from(r: &'static ToolRegistry) -> Self {
        RegistryRef::Static(r)
    }
}

impl From<Arc<ToolRegistry>> for RegistryRef {
    fn from(r: Arc<ToolRegistry>) -> Self {
        RegistryRef::Shared(r)
    }
}

impl From<ToolRegistry> for RegistryRef {
    fn from(r: ToolRegistry) -> Self {
        RegistryRef::Shared(Arc::new(r))
    }
}

/// What kind of failure a tool result reports, in its metadata as
/// `error_kind`, so an agent loop can react without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments were not JSON.
    InvalidJson,
    /// The arguments' JSON was cut off.
    TruncatedJson,
    /// A newer user message arrived before the call started.
    Interrupted,
    /// No tool has that name.
    UnknownTool,
    /// The arguments did not fit the schema.
    InvalidArguments,
    /// An injected parameter could not be produced.
    Injection,
    /// The tool ran past its timeout.
    Timeout,
    /// The context was cancelled while the tool waited.
    Cancelled,
    /// The tool panicked.
    Panic,
    /// The tool returned an error.
    Failed,
}

impl ErrorKind {
    /// The `snake_case` name written to the metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidJson => "invalid_json",
            ErrorKind::TruncatedJson => "truncated_json",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::Injection => "injection",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Panic => "panic",
            ErrorKind::Failed => "failed",
        }
    }

    fn of(e: &ToolError) -> Self {
        match e {
            ToolError::Args(_) => ErrorKind::InvalidArguments,
            ToolError::Inject { .. } => ErrorKind::Injection,
            ToolError::Panicked { .. } => ErrorKind::Panic,
            ToolError::Timeout { .. } => ErrorKind::Timeout,
            ToolError::Cancelled { .. } => ErrorKind::Cancelled,
            _ => ErrorKind::Failed,
        }
    }
}

/// Runs tool calls.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use kesoku_core::{DynamicTool, Message, ToolContext, ToolOutput, ToolRegistry, ToolRequest, ToolRunner};
/// use serde_json::json;
///
/// let mut registry = ToolRegistry::new();
/// registry.register(DynamicTool::new("double", "Doubles n.",
///     json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
///     |args, _| async move { Ok(ToolOutput::new(json!(args["n"].as_i64().unwrap_or(0) * 2))) },
/// ).unwrap()).unwrap();
///
/// let runner = ToolRunner::new(registry, ToolContext::new("session-1"));
/// let request = ToolRequest::new("call_1", "double", json!({"n": 21}));
/// let call = Message::tool_call("session-1", &request);
/// let result = runner.execute(&request, &call, None).await;
/// assert_eq!(result.content, "42");
/// assert_eq!(result.parent_id.as_deref(), Some(call.id.as_str()));
/// # });
/// ```
pub struct ToolRunner {
    registry: RegistryRef,
    context: ToolContext,
    default_timeout: Duration,
    max_concurrency: usize,
    /// Sequential tools take it exclusively; every other call shares it.
    exclusive: Arc<RwLock<()>>,
    /// Whether any tool is sequential: without one the lock is never needed.
    has_sequential: bool,
    /// The tools with a cap of their own (`#[tool(max_parallel = N)]`):
    /// their calls take a permit here instead of a place in the batch's
    /// window. Empty for most registries.
    lanes: Arc<HashMap<String, Arc<Semaphore>>>,
    /// Whether each call's span carries its arguments and result.
    capture_content: bool,
}

impl fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRunner")
            .field("tools", &self.registry.len())
            .field("context", &self.context)
            .field("default_timeout", &self.default_timeout)
            .field("max_concurrency", &self.max_concurrency)
            .finish_non_exhaustive()
    }
}

impl ToolRunner {
    /// The timeout of tools that set none.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
    /// How many calls of one batch run at once by default.
    pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

    /// A runner over `registry` (`kesoku::default_registry()`, a
    /// `ToolRegistry`, or an `Arc` of one), calling tools with `context`.
    pub fn new(registry: impl Into<RegistryRef>, context: ToolContext) -> Self {
        let registry: RegistryRef = registry.into();
        let has_sequential = registry.iter().any(Tool::is_sequential);
        let lanes = registry
            .iter()
            .filter_map(|t| {
                let cap = usize::try_from(t.max_parallel()?).unwrap_or(usize::MAX);
                Some((t.name().to_owned(), Arc::new(Semaphore::new(cap.max(1)))))
            })
            .collect();
        ToolRunner {
            has_sequential,
            lanes: Arc::new(lanes),
            registry,
            context,
            default_timeout: Self::DEFAULT_TIMEOUT,
            max_concurrency: Self::DEFAULT_MAX_CONCURRENCY,
            exclusive: Arc::new(RwLock::new(())),
            capture_content: false,
        }
    }

    /// Sets the timeout for tools without `#[tool(timeout = ...)]`.
    #[must_use]
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets how many calls of a batch run at once (at least 1).
    #[must_use]
    pub fn with_max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    /// Whether each call's span (`execute_tool {name}`) carries its
    /// arguments and result (`gen_ai.tool.call.arguments`,
    /// `gen_ai.tool.call.result`). Off by default: they may hold what
    /// users said.
    #[must_use]
    pub fn with_content_capture(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }

    /// A runner that shares this one's registry, settings and sequential
    /// lock (so `sequential` tools still run alone across both), calling
    /// tools with `context` instead: one per request, when each request has
    /// its own cancellation token or session. Cheap: nothing is copied but
    /// handles.
    ///
    /// ```
    /// use kesoku_core::{ToolContext, ToolRegistry, ToolRunner};
    ///
    /// let runner = ToolRunner::new(ToolRegistry::new(), ToolContext::new("base"));
    /// let call = runner.scoped(ToolContext::new("client-7"));
    /// assert_eq!(call.context().session_id(), "client-7");
    /// ```
    #[must_use]
    pub fn scoped(&self, context: ToolContext) -> ToolRunner {
        ToolRunner {
            registry: self.registry.clone(),
            context,
            default_timeout: self.default_timeout,
            max_concurrency: self.max_concurrency,
            exclusive: Arc::clone(&self.exclusive),
            has_sequential: self.has_sequential,
            lanes: Arc::clone(&self.lanes),
            capture_content: self.capture_content,
        }
    }

    /// The context every call receives.
    pub fn context(&self) -> &ToolContext {
        &self.context
    }

    /// The registry calls are looked up in.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Runs one call and returns its `tool_result` message; never fails:
    /// every error becomes a result the model can read.
    pub async fn execute(
        &self,
        request: &ToolRequest,
        tool_call: &Message,
        is_interrupted: Option<&(dyn Fn() -> bool + Send + Sync)>,
    ) -> Message {
        let span = span::call(request, self.capture_content);
        let started = Instant::now();
        let outcome = self
            .run(request, &tool_call.id, is_interrupted)
            .instrument(span.clone())
            .await;
        let elapsed = started.elapsed();
        let outcome_name = match &outcome {
            Ok(_) => "ok",
            Err(e) => e.kind.as_str(),
        };
        let result = package(request, tool_call, outcome, elapsed);
        span::ended(&span, outcome_name, elapsed, &result, self.capture_content);
        result
    }

    /// Runs the calls of one model turn concurrently (at most
    /// `max_concurrency` at once; `sequential` tools alone; a tool with
    /// `max_parallel = N` at most N at once, counted apart from the
    /// others) and returns exactly one result per call, in call order.
    ///
    /// `is_interrupted` is asked as each call starts, so calls that start
    /// after a newer user message arrived are skipped cleanly.
    pub async fn execute_all(
        &self,
        calls: &[(ToolRequest, Message)],
        is_interrupted: Option<&(dyn Fn() -> bool + Send + Sync)>,
    ) -> Vec<Message> {
        if !self.lanes.is_empty() {
            return self.execute_in_lanes(calls, is_interrupted).await;
        }
        // A hand-driven window rather than `stream::iter(..).map(..)
        // .buffered(..)`: a closure there borrows with a lifetime the
        // compiler cannot prove `Send` for all lifetimes, which made this
        // future impossible to `tokio::spawn` (see `tests/spawn.rs`).
        let mut pending = FuturesOrdered::new();
        let mut waiting = calls.iter();
        for (request, call) in waiting.by_ref().take(self.max_concurrency) {
            pending.push_back(self.execute(request, call, is_interrupted));
        }
        let mut results = Vec::with_capacity(calls.len());
        while let Some(result) = pending.next().await {
            results.push(result);
            if let Some((request, call)) = waiting.next() {
                pending.push_back(self.execute(request, call, is_interrupted));
            }
        }
        results
    }

    /// [`execute_all`](Self::execute_all) when some tools have caps of
    /// their own: every call is started, and waits for a place in the
    /// batch (uncapped tools) or in its tool's lane (capped ones), in call
    /// order, as tokio's semaphores are fair.
    async fn execute_in_lanes(
        &self,
        calls: &[(ToolRequest, Message)],
        is_interrupted: IsInterrupted<'_>,
    ) -> Vec<Message> {
        let batch = Semaphore::new(self.max_concurrency);
        let mut pending: FuturesOrdered<_> = calls
            .iter()
            .map(|(request, call)| self.execute_in_batch(&batch, request, call, is_interrupted))
            .collect();
        let mut results = Vec::with_capacity(calls.len());
        while let Some(result) = pending.next().await {
            results.push(result);
        }
        results
    }

    async fn execute_in_batch(
        &self,
        batch: &Semaphore,
        request: &ToolRequest,
        call: &Message,
        is_interrupted: IsInterrupted<'_>,
    ) -> Message {
        // A capped tool's lane is taken in `run`; the batch's window is
        // for the others. The batch semaphore is never closed.
        let _place = if self.lanes.contains_key(&request.name) {
            None
        } else {
            batch.acquire().await.ok()
        };
        self.execute(request, call, is_interrupted).await
    }

    /// A permit of `tool`'s lane if it has one: at once if free, else once
    /// one frees (or the context is cancelled).
    async fn enter_lane(
        &self,
        tool: &str,
        is_interrupted: IsInterrupted<'_>,
    ) -> Result<Option<OwnedSemaphorePermit>, CallError> {
        let Some(lane) = self.lanes.get(tool) else {
            return Ok(None);
        };
        if let Ok(permit) = Arc::clone(lane).try_acquire_owned() {
            return Ok(Some(permit));
        }
        let cancel = self.context.cancellation();
        let permit = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ToolError::Cancelled { tool: tool.into() }.into()),
            permit = Arc::clone(lane).acquire_owned() => permit.ok(),
        };
        // A call that waited for its lane starts only now.
        if is_interrupted.is_some_and(|f| f()) {
            return Err(CallError::interrupted(tool));
        }
        Ok(permit)
    }

    /// Steps 1 to 5 of the lifecycle.
    async fn run(
        &self,
        request: &ToolRequest,
        call_id: &str,
        is_interrupted: IsInterrupted<'_>,
    ) -> Result<ToolOutput, CallError> {
        let interrupted = || is_interrupted.is_some_and(|f| f());
        let (tool, invocation) = self.prepare_either(request, call_id, &interrupted)?;
        let name = tool.name();
        // 5. Run, within the tool's own cap if it has one, alone if it is
        // sequential, under its timeout.
        let lane = self.enter_lane(name, is_interrupted).await?;
        let cancel = self.context.cancellation();
        let exclusive = tool.is_sequential();
        // Uncontended, the lock is one atomic step; only a wait needs to
        // race cancellation (whose waiter costs a mutex).
        let guard = if !self.has_sequential {
            Guard::None
        } else if let Some(guard) = self.try_lock(exclusive) {
            guard
        } else {
            let guard = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ToolError::Cancelled { tool: name.into() }.into()),
                guard = self.lock(exclusive) => guard,
            };
            // A call that waited for a sequential tool starts only now.
            if interrupted() {
                return Err(CallError::interrupted(name));
            }
            guard
        };
        let limit = tool.timeout().unwrap_or(self.default_timeout);
        // A sync tool keeps its thread after a timeout, so it keeps the
        // guard and its lane too: nothing sequential starts, and no more
        // of its calls, until it really ended.
        let (invocation, _held) = match invocation {
            Invocation::Blocking(call) => (
                Invocation::Blocking(Box::new(move || {
                    let _held = (guard, lane);
                    call()
                })),
                None,
            ),
            other @ Invocation::Async(_) => (other, Some((guard, lane))),
        };
        let mut run = std::pin::pin!(invocation.run(name));
        // Most tools finish on their first poll: they need no timer and no
        // cancellation waiter, which are most of the cost of a fast call.
        let first = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
        let result = match first {
            Poll::Ready(result) => result,
            Poll::Pending => tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ToolError::Cancelled { tool: name.into() }),
                result = tokio::time::timeout(limit, run) => result
                    .unwrap_or_else(|_| Err(ToolError::Timeout { tool: name.into(), limit })),
            },
        };
        result.map_err(CallError::from)
    }

    /// Steps 1 to 4: the fast path, else the validating one. The
    /// interruption check is asked at most once between them (a fast path
    /// that gave up after asking leaves its answer to the slow one).
    fn prepare_either(
        &self,
        request: &ToolRequest,
        call_id: &str,
        is_interrupted: &dyn Fn() -> bool,
    ) -> Prepared<'_> {
        let answer = Cell::new(None);
        let interrupted = || {
            if let Some(answer) = answer.get() {
                return answer;
            }
            let now = is_interrupted();
            answer.set(Some(now));
            now
        };
        // The fast path runs under `catch_unwind`; a panic of the caller's
        // own check must not pass for the tool's, so it is carried out.
        let check_panic = Cell::new(None);
        let guarded = || {
            std::panic::catch_unwind(AssertUnwindSafe(interrupted)).unwrap_or_else(|payload| {
                check_panic.set(Some(payload));
                true
            })
        };
        let fast = self.prepare_fast(request, &guarded);
        if let Some(payload) = check_panic.take() {
            std::panic::resume_unwind(payload);
        }
        match fast {
            Some(prepared) => prepared,
            None => self.prepare(request, call_id, &interrupted),
        }
    }

    /// Steps 1 to 4 at once, for a known tool whose arguments decode
    /// strictly into its parameters (see `decode.rs`). `None` when they do
    /// not: [`prepare`](Self::prepare) then reports why, step by step.
    fn prepare_fast(
        &self,
        request: &ToolRequest,
        interrupted: &dyn Fn() -> bool,
    ) -> Option<Prepared<'_>> {
        let tool = self.registry.get(&request.name)?;
        let args = RawArgs::of(&request.arguments);
        // Decoding runs user code (`Deserialize` impls, defaults,
        // extractors). If it panics, the validating path runs it again,
        // after validation: what it reports (an argument error, or the
        // panic) is then what the slow path alone would have reported.
        let fast = std::panic::catch_unwind(AssertUnwindSafe(|| {
            tool.prepare_fast(args, &self.context, interrupted)
        }))
        .unwrap_or(Err(PrepareError::Malformed));
        match fast {
            Ok(invocation) => Some(Ok((tool, invocation))),
            Err(e) if e.is_argument_error() => None,
            Err(PrepareError::Inject(e)) => Some(Err((*e).into())),
            Err(_) => Some(Err(CallError::interrupted(tool.name()))),
        }
    }

    /// Steps 1 to 4, one after the other, each with its own error.
    fn prepare(
        &self,
        request: &ToolRequest,
        call_id: &str,
        interrupted: &dyn Fn() -> bool,
    ) -> Prepared<'_> {
        // 1. Parse.
        let args = request.parse_arguments().map_err(|e| {
            let kind = match e {
                ArgumentsParseError::Truncated { .. } => ErrorKind::TruncatedJson,
                _ => ErrorKind::InvalidJson,
            };
            CallError::new(kind, e.to_string())
        })?;
        // 2. Interruption, checked now that this call is about to start.
        if interrupted() {
            return Err(CallError::interrupted(&request.name));
        }
        // 3. Validate: the tool, then its arguments (in `prepare`).
        let tool = self.lookup(&request.name)?;
        let name = tool.name();
        // 4. Inject: `prepare` decodes the arguments and the injected
        // parameters. It runs user code (`Deserialize` impls, extractors,
        // defaults), so a panic there is caught like one in the tool.
        let prepared = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if tool.needs_tool_call_id() {
                let ctx = self.context.clone().with_tool_call_id(call_id);
                tool.prepare(args.into_owned(), &ctx)
            } else {
                tool.prepare(args.into_owned(), &self.context)
            }
        }))
        .unwrap_or_else(|payload| Err(ToolError::panicked(name, &*payload)));
        Ok((tool, prepared?))
    }

    /// Shared for ordinary calls, exclusive for sequential ones, if free now.
    fn try_lock(&self, exclusive: bool) -> Option<Guard> {
        let lock = Arc::clone(&self.exclusive);
        if exclusive {
            lock.try_write_owned().ok().map(Guard::Write)
        } else {
            lock.try_read_owned().ok().map(Guard::Read)
        }
    }

    /// Waits for the lock.
    async fn lock(&self, exclusive: bool) -> Guard {
        let lock = Arc::clone(&self.exclusive);
        if exclusive {
            Guard::Write(lock.write_owned().await)
        } else {
            Guard::Read(lock.read_owned().await)
        }
    }

    fn lookup(&self, name: &str) -> Result<&Tool, CallError> {
        self.registry.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.registry.names().collect();
            let hint = crate::suggest::suggest(name, names.iter().copied())
                .map(|m| format!("; did you mean `{m}`?"))
                .unwrap_or_default();
            let available = if names.is_empty() {
                "no tools are available".to_owned()
            } else {
                format!("available tools: {}", quote_list(&names))
            };
            CallError::new(
                ErrorKind::UnknownTool,
                format!("unknown tool `{name}`{hint}; {available}"),
            )
        })
    }
}

/// A call ready to run, or the error result to answer with.
type Prepared<'a> = Result<(&'a Tool, Invocation), CallError>;

/// Why a call produced no output: what its error result says.
struct CallError {
    kind: ErrorKind,
    message: String,
}

impl CallError {
    fn new(kind: ErrorKind, message: String) -> Self {
        CallError { kind, message }
    }

    fn interrupted(tool: &str) -> Self {
        CallError::new(
            ErrorKind::Interrupted,
            format!(
                "the call to `{tool}` was aborted because a newer user message arrived; it did not run"
            ),
        )
    }
}

impl From<ToolError> for CallError {
    fn from(e: ToolError) -> Self {
        CallError::new(ErrorKind::of(&e), e.to_string())
    }
}

/// Holds the sequential lock for the length of a call.
enum Guard {
    /// No tool is sequential, so nothing needs excluding.
    None,
    Read(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Write(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// Step 6: the `tool_result` message.
fn package(
    request: &ToolRequest,
    tool_call: &Message,
    outcome: Result<ToolOutput, CallError>,
    elapsed: Duration,
) -> Message {
    let mut metadata = Map::with_capacity(5);
    metadata.insert(keys::TOOL_NAME.into(), request.name.clone().into());
    metadata.insert(keys::CALL_ID.into(), request.id.clone().into());
    let content = match outcome {
        Ok(output) => {
            let text = output.text();
            if !output.blocks.is_empty() {
                // Blocks serialize infallibly (strings and base64).
                let blocks = serde_json::to_value(&output.blocks).unwrap_or_default();
                metadata.insert(keys::CONTENT_BLOCKS.into(), blocks);
            }
            metadata.insert(keys::TOOL_RESULT.into(), output.value);
            text
        }
        Err(CallError { kind, message }) => {
            metadata.insert(keys::TOOL_ERROR.into(), message.clone().into());
            metadata.insert(keys::ERROR_KIND.into(), kind.as_str().into());
            format!("Error: {message}")
        }
    };
    #[allow(clippy::cast_possible_truncation)]
    metadata.insert(
        keys::DURATION_MS.into(),
        (elapsed.as_micros() as u64 / 1000).into(),
    );
    Message {
        id: crate::session::message::new_id(),
        session_id: tool_call.session_id.clone(),
        sender: request.name.clone(),
        role: Role::Tool,
        kind: MessageType::ToolResult,
        status: Status::Responded,
        content,
        metadata,
        timestamp: chrono::Utc::now(),
        parent_id: Some(tool_call.id.clone()),
    }
}
