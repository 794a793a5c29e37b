//! [`McpServer`]: a [`ToolRegistry`](kesoku_core::ToolRegistry) as an MCP
//! server. `tools/list` gives each tool's listing, computed once;
//! `tools/call` goes through [`ToolRunner::execute`], so validation,
//! coercion, timeouts, panics and the context behave as they do for a
//! model.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use kesoku_core::{Message, RegistryRef, ToolContext, ToolRequest, ToolRunner};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

use crate::approval::{Asker, Transport, Verdict};
use crate::convert;

/// Serves a tool registry over MCP: [`serve_stdio`](Self::serve_stdio),
/// or [`bind_http`](Self::bind_http) for streamable HTTP.
///
/// Cheap to clone: clones share the tools, the runner and the count of
/// calls in flight.
///
/// ```
/// use kesoku::mcp::McpServer;
/// use kesoku::{ToolRegistry, tool};
///
/// /// Adds two integers.
/// ///
/// /// # Arguments
/// /// * `a` - The first integer.
/// /// * `b` - The second integer.
/// #[tool(register = false, read_only)]
/// fn calculate_sum(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// let mut tools = ToolRegistry::new();
/// tools.register(calculate_sum::TOOL).unwrap();
/// let server = McpServer::builder(tools)
///     .name("my-tools", "1.0.0")
///     .instructions("Arithmetic for the model.")
///     .build();
/// assert_eq!(server.tool_names().collect::<Vec<_>>(), ["calculate_sum"]);
/// assert_eq!(server.calls_in_flight(), 0);
/// ```
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
    /// Calls running now on this connection, so stdio can hold its end of
    /// input until they answer; each connection counts its own.
    in_flight: Arc<watch::Sender<usize>>,
    /// Whether a question can be sent to the client (not over stateless
    /// HTTP).
    transport: Transport,
}

struct Inner {
    runner: ToolRunner,
    /// The listings, in registry order (by name), made once.
    listings: Vec<McpTool>,
    by_name: HashMap<String, usize>,
    /// Whether each listed tool needs a person's approval, by listing.
    asks: Vec<bool>,
    asker: Asker,
    info: Implementation,
    instructions: Option<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.inner.info.name)
            .field("tools", &self.inner.listings.len())
            .finish_non_exhaustive()
    }
}

/// Builds an [`McpServer`].
#[must_use]
pub struct McpServerBuilder {
    registry: RegistryRef,
    name: String,
    version: String,
    instructions: Option<String>,
    context: ToolContext,
    timeout: Option<Duration>,
    approval_timeout: Duration,
    approval_key: Option<[u8; 32]>,
}

impl McpServerBuilder {
    /// The name and version the server gives clients (default: `kesoku`
    /// and this crate's version).
    pub fn name(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// What clients (and their models) are told about using the server.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// The context tools get: session id (default `mcp`), state,
    /// workspace. Each call gets its own cancellation token on top.
    pub fn context(mut self, context: ToolContext) -> Self {
        self.context = context;
        self
    }

    /// The time limit of tools that set none (default: the runner's,
    /// [`ToolRunner::DEFAULT_TIMEOUT`]).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long the client's user has to answer whether a tool that needs
    /// approval may run (default 10 minutes). Before protocol 2026-07-28
    /// the server waits that long for its `elicitation/create`; from
    /// 2026-07-28 an `input_required` question expires after it.
    /// At most a year: a longer one is taken as a year.
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// The key that seals approval questions sent as `input_required`
    /// results (protocol 2026-07-28), so that the answer is accepted only
    /// for the call it was asked for. Default: a random key per server.
    /// Instances behind one load balancer share a key, so that a client's
    /// answer may reach any of them; keep it secret.
    pub fn approval_key(mut self, key: [u8; 32]) -> Self {
        self.approval_key = Some(key);
        self
    }

    /// The server.
    pub fn build(self) -> McpServer {
        let listings: Vec<McpTool> = self.registry.iter().map(convert::listing).collect();
        let asks = self
            .registry
            .iter()
            .map(kesoku_core::Tool::needs_approval)
            .collect();
        let by_name = listings
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_string(), i))
            .collect();
        let mut runner = ToolRunner::new(self.registry, self.context);
        if let Some(t) = self.timeout {
            runner = runner.with_default_timeout(t);
        }
        McpServer {
            inner: Arc::new(Inner {
                runner,
                listings,
                by_name,
                asks,
                asker: Asker::new(self.approval_key, self.approval_timeout),
                info: Implementation::new(self.name, self.version),
                instructions: self.instructions,
            }),
            in_flight: Arc::new(watch::Sender::new(0)),
            transport: Transport::Duplex,
        }
    }
}

impl McpServer {
    /// How long a person has to answer an approval question, unless
    /// [`McpServerBuilder::approval_timeout`] says otherwise.
    pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

    /// A server for `registry` (`kesoku::default_registry()`, a
    /// `ToolRegistry` or an `Arc` of one) with the defaults.
    pub fn new(registry: impl Into<RegistryRef>) -> Self {
        Self::builder(registry).build()
    }

    /// Starts building a server for `registry`.
    pub fn builder(registry: impl Into<RegistryRef>) -> McpServerBuilder {
        McpServerBuilder {
            registry: registry.into(),
            name: "kesoku".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            context: ToolContext::new("mcp"),
            timeout: None,
            approval_timeout: McpServer::DEFAULT_APPROVAL_TIMEOUT,
            approval_key: None,
        }
    }

    /// The names of the tools served, sorted.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.inner.listings.iter().map(|t| t.name.as_ref())
    }

    /// How many calls are running now through this handle and the clones
    /// made before a connection started (each stdio or byte-stream
    /// connection counts its own).
    pub fn calls_in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// The same server with a count of calls of its own, for one
    /// connection.
    pub(crate) fn for_connection(&self) -> Self {
        McpServer {
            inner: Arc::clone(&self.inner),
            in_flight: Arc::new(watch::Sender::new(0)),
            transport: self.transport,
        }
    }

    /// The same server, knowing it answers over stateless HTTP, where no
    /// question can be sent to the client before protocol 2026-07-28.
    pub(crate) fn over_stateless_http(mut self) -> Self {
        self.transport = Transport::StatelessHttp;
        self
    }

    pub(crate) fn watch_in_flight(&self) -> watch::Receiver<usize> {
        self.in_flight.subscribe()
    }

    /// Runs one `tools/call` through the runner, with the request's
    /// cancellation token in the tool's context.
    async fn call(
        &self,
        name: &str,
        arguments: Value,
        id: String,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Message {
        let _running = InFlight::enter(&self.in_flight);
        let runner = &self.inner.runner;
        // A child of the base context's token, so that cancelling that one
        // (a shutdown) stops MCP calls too; the client's cancellation
        // cancels this call alone.
        let token = runner.context().cancellation().child_token();
        let context = runner.context().clone().with_cancellation(token.clone());
        let session = context.session_id().to_owned();
        let request = ToolRequest::new(id, name, arguments);
        let call = Message::tool_call(session, &request);
        let scoped = runner.scoped(context);
        let execute = scoped.execute(&request, &call, None);
        tokio::pin!(execute);
        tokio::select! {
            message = &mut execute => message,
            () = cancel.cancelled() => {
                token.cancel();
                execute.await
            }
        }
    }

    fn unknown_tool(&self, name: &str) -> ErrorData {
        let known: Vec<&str> = self.tool_names().collect();
        let list: Vec<String> = known.iter().map(|n| format!("`{n}`")).collect();
        let message = if list.is_empty() {
            format!("unknown tool `{name}`; this server has no tools")
        } else {
            format!("unknown tool `{name}`; the tools are {}", list.join(", "))
        };
        ErrorData::invalid_params(message, Some(serde_json::json!({ "tools": known })))
    }
}

/// Counts a call in flight for as long as it lives.
struct InFlight<'a>(&'a watch::Sender<usize>);

impl<'a> InFlight<'a> {
    fn enter(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.inner.info.clone());
        if let Some(text) = &self.inner.instructions {
            config = config.with_instructions(text.clone());
        }
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.listings.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        let i = *self.inner.by_name.get(name)?;
        Some(self.inner.listings[i].clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // An unknown tool is a protocol error (the client asked for
        // something that does not exist); every failure of a call that
        // ran, or could not start for its arguments, is a result the
        // model reads.
        let Some(&index) = self.inner.by_name.get(request.name.as_ref()) else {
            return Err(self.unknown_tool(&request.name));
        };
        let arguments = request.arguments.clone().map_or(Value::Null, Value::Object);
        // A tool that needs approval runs only on its user's yes, asked
        // through the client.
        // Not counted in flight while it asks: over stdio, an end of input
        // then ends the wait (rmcp cancels the call) rather than being
        // held back until the timeout, since no answer can come.
        if self.inner.asks[index] {
            match self
                .inner
                .asker
                .decide(&request, &arguments, &context, self.transport)
                .await
            {
                Verdict::Run => {}
                Verdict::Refuse(text) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into());
                }
                Verdict::Ask(question) => return Ok(CallToolResponse::InputRequired(*question)),
            }
        }
        let id = context.id.to_string();
        let span = crate::trace::server_span(&request.name, &id, &context.meta);
        let message = self
            .call(&request.name, arguments, id, context.ct.clone())
            .instrument(span.clone())
            .await;
        let result = convert::call_result(&message);
        if result.is_error == Some(true) {
            crate::trace::record_tool_error(&span);
        }
        Ok(result.into())
    }
}
