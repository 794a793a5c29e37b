//! [`McpClient`]: a connection to an MCP server (a command over stdio, or
//! a streamable HTTP URL) whose tools become [`DynamicTool`]s in a
//! registry, called by an agent like local ones.
//!
//! An imported tool's arguments are checked against its schema here, with
//! path-named errors, before anything is sent. A call has a time limit
//! (five minutes by default); a call dropped (time limit, interruption,
//! cancellation) sends `notifications/cancelled` to the server; a server
//! that dies mid-call gives an error result naming it, at once.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use kesoku_core::{DynamicTool, LiveRegistry, ToolError, ToolHints, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ServerNotification, SubscriptionFilter, Tool as McpTool,
};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::watch;

use crate::child::{Ended, ServerProcess};
use crate::convert;
use crate::error::McpError;

/// How long a handshake or a listing may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Which protocol generation to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Protocol {
    /// 2026-07-28's `server/discover`, falling back to the `initialize`
    /// handshake for servers that do not know it.
    #[default]
    Auto,
    /// The `initialize` handshake (2025-11-25) only.
    Legacy,
}

/// How a server's tools are imported.
///
/// ```
/// use std::time::Duration;
/// use kesoku::mcp::ImportOptions;
///
/// let options = ImportOptions::new().prefix("files_").timeout(Duration::from_secs(30));
/// assert_eq!(options.local_name("read"), "files_read");
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ImportOptions {
    prefix: String,
    timeout: Duration,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            prefix: String::new(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

impl ImportOptions {
    /// A remote call's default time limit: five minutes.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

    /// No prefix, five-minute calls.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names each imported tool `prefix` + its remote name, so tools of the
    /// same name on two servers, or here, can live side by side.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// A remote call's time limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The local name of remote tool `remote`: the prefix, then the name
    /// with each character a model provider would refuse replaced by `_`
    /// (MCP allows `.` and 128 characters; kesoku keeps to what every
    /// provider accepts).
    pub fn local_name(&self, remote: &str) -> String {
        let mut name: String = self
            .prefix
            .chars()
            .chain(remote.chars())
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            name.insert(0, '_');
        }
        // All ASCII by now, so any length is a character boundary.
        name.truncate(64);
        name
    }
}

/// The client side's handler: counts list-changed notifications of the
/// `initialize` generation (2026-07-28 ones come through a subscription).
#[derive(Clone)]
struct Handler {
    changed: Arc<watch::Sender<u64>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("kesoku", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.send_modify(|v| *v += 1);
    }
}

/// A connection to an MCP server.
///
/// ```no_run
/// # async fn f() -> Result<(), kesoku::mcp::McpError> {
/// use kesoku::mcp::{ImportOptions, McpClient};
///
/// let client = McpClient::stdio(tokio::process::Command::new("my-mcp-server")).await?;
/// let mut tools = kesoku::ToolRegistry::new();
/// let names = client.import(&mut tools, &ImportOptions::new()).await?;
/// println!("imported {names:?} from {}", client.server());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// The command or URL, for messages.
    server: String,
    service: RunningService<RoleClient, Handler>,
    changed: Arc<watch::Sender<u64>>,
    /// The server's process, over stdio.
    process: Option<ServerProcess>,
}

impl Drop for Inner {
    /// The last clone gone: the connection ends (the service's own drop
    /// closes the server's stdin), and the server gets its time to exit.
    fn drop(&mut self) {
        if let Some(process) = &self.process {
            process.end_in_background(McpClient::CLOSE_GRACE, &self.server);
        }
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.server)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Starts `command` and speaks MCP over its stdin and stdout (its
    /// stderr is this process's).
    pub async fn stdio(command: tokio::process::Command) -> Result<Self, McpError> {
        Self::stdio_with(command, Protocol::Auto).await
    }

    /// Like [`stdio`](Self::stdio), with the protocol generation chosen.
    pub async fn stdio_with(
        mut command: tokio::process::Command,
        protocol: Protocol,
    ) -> Result<Self, McpError> {
        // The program only: its arguments may hold secrets, and this name
        // is in errors a model reads.
        let shown = command
            .as_std()
            .get_program()
            .to_string_lossy()
            .into_owned();
        let server = format!("`{shown}`");
        // Killed if never ended otherwise (its runtime gone first); ended
        // gracefully by `close`, `shutdown` and the last clone's drop.
        command
            .kill_on_drop(true)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let spawn_error = |source| McpError::Spawn {
            command: shown.clone(),
            source,
        };
        let mut child = command.spawn().map_err(spawn_error)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(spawn_error(std::io::Error::other(
                "its stdin or stdout is not a pipe",
            )));
        };
        let process = ServerProcess::new(child);
        Self::connect(server, (stdout, stdin), protocol, Some(process)).await
    }

    /// Connects to a streamable HTTP server at `url`
    /// (`http://127.0.0.1:8080/mcp`).
    pub async fn http(url: &str) -> Result<Self, McpError> {
        Self::http_with(url, Protocol::Auto).await
    }

    /// Like [`http`](Self::http), with the protocol generation chosen.
    pub async fn http_with(url: &str, protocol: Protocol) -> Result<Self, McpError> {
        // reqwest is built without a default TLS provider (kesoku picks
        // ring); rmcp builds its client at once, even for `http://`.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        Self::connect(url.to_owned(), transport, protocol, None).await
    }

    /// Speaks MCP over any byte streams (a socket, a pipe, an in-memory
    /// duplex); `server` names the other end in messages.
    pub async fn io<R, W>(
        server: impl Into<String>,
        input: R,
        output: W,
        protocol: Protocol,
    ) -> Result<Self, McpError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        Self::connect(server.into(), (input, output), protocol, None).await
    }

    async fn connect<T, E, A>(
        server: String,
        transport: T,
        protocol: Protocol,
        process: Option<ServerProcess>,
    ) -> Result<Self, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let changed = Arc::new(watch::Sender::new(0));
        let handler = Handler {
            changed: Arc::clone(&changed),
        };
        let lifecycle = match protocol {
            Protocol::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            Protocol::Legacy => ClientLifecycleMode::Initialize,
        };
        let connected = tokio::time::timeout(
            REQUEST_TIMEOUT,
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await;
        let service = match connected {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                return Err(McpError::Connect {
                    server,
                    reason: e.to_string(),
                });
            }
            Err(_) => {
                return Err(McpError::Connect {
                    server,
                    reason: format!("no handshake within {REQUEST_TIMEOUT:?}"),
                });
            }
        };
        let client = McpClient {
            inner: Arc::new(Inner {
                server,
                service,
                changed,
                process,
            }),
        };
        client.listen_for_changes().await;
        Ok(client)
    }

    /// On 2026-07-28, list-changed notifications come through a
    /// subscription; a server that offers none has nothing to announce.
    async fn listen_for_changes(&self) {
        if self.protocol_version().as_deref() != Some(ProtocolVersion::V_2026_07_28.as_str()) {
            return;
        }
        let announces = self.inner.service.peer_info().is_some_and(|info| {
            info.capabilities
                .tools
                .as_ref()
                .is_some_and(|t| t.list_changed == Some(true))
        });
        if !announces {
            return;
        }
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.peer().listen(filter),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Err(_) => {
                tracing::warn!(server = %self.inner.server, "the list-changed subscription was not acknowledged");
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(server = %self.inner.server, error = %e, "no list-changed subscription");
                return;
            }
        };
        let changed = Arc::clone(&self.inner.changed);
        let server = self.inner.server.clone();
        tokio::spawn(async move {
            loop {
                match subscription.next().await {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                        changed.send_modify(|v| *v += 1);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(server = %server, error = %e, "the list-changed subscription ended; imported tools no longer follow the server");
                        return;
                    }
                }
            }
        });
    }

    /// The command or URL of the server.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// The protocol version agreed with the server.
    pub fn protocol_version(&self) -> Option<String> {
        self.inner
            .service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.inner.service.peer()
    }

    /// A receiver that sees a new value each time the server says its
    /// tool list changed.
    pub fn list_changes(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// The server's tools, as it lists them (rmcp's model type: name it
    /// through a dependency on `rmcp` 3.11).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let listed = tokio::time::timeout(REQUEST_TIMEOUT, self.peer().list_all_tools()).await;
        let reason = match listed {
            Ok(Ok(tools)) => return Ok(tools),
            Ok(Err(e)) => describe(&e),
            Err(_) => format!("no answer within {REQUEST_TIMEOUT:?}"),
        };
        Err(McpError::Request {
            server: self.inner.server.clone(),
            method: "tools/list",
            reason,
        })
    }

    /// The server's tools as dynamic tools, named by `options`. A tool
    /// that cannot be imported (its schema does not compile, say) is left
    /// out with a warning naming it and why; the others are still given.
    /// Two remote names that become one local name are an error.
    ///
    /// The tools hold the connection: it lasts while any of them does.
    pub async fn tools(&self, options: &ImportOptions) -> Result<Vec<DynamicTool>, McpError> {
        let listed = self.list_tools().await?;
        let mut tools: Vec<DynamicTool> = Vec::with_capacity(listed.len());
        let mut from: Vec<&str> = Vec::with_capacity(listed.len());
        for remote in &listed {
            match self.tool(remote, options) {
                Ok(tool) => {
                    if let Some(i) = tools.iter().position(|t| t.name() == tool.name()) {
                        return Err(McpError::BadTool {
                            server: self.inner.server.clone(),
                            name: remote.name.to_string(),
                            reason: format!(
                                "its local name `{}` is also that of `{}`; import with a prefix or rename one on the server",
                                tool.name(),
                                from[i]
                            ),
                        });
                    }
                    from.push(&remote.name);
                    tools.push(tool);
                }
                Err(e) => tracing::warn!(error = %e, "an MCP tool was not imported"),
            }
        }
        Ok(tools)
    }

    /// Adds the server's tools to `registry`. A name the registry already
    /// has is an error, and nothing is added then; a prefix in `options`
    /// avoids it. Returns the local names.
    ///
    /// The tools are fixed once imported; [`import_live`](Self::import_live)
    /// follows the server's list-changed notifications.
    pub async fn import(
        &self,
        registry: &mut ToolRegistry,
        options: &ImportOptions,
    ) -> Result<Vec<String>, McpError> {
        let tools = self.tools(options).await?;
        self.add(registry, tools)
    }

    /// Adds the server's tools to `registry` and keeps them in step with
    /// the server: each time it says its list changed, the tools imported
    /// from it are replaced by its new list. Returns the names imported
    /// now. A later clash with a local tool keeps the local one and logs a
    /// warning.
    ///
    /// The updates stop when the registry is dropped or the connection
    /// ends; the connection lasts while the registry holds its tools.
    pub async fn import_live(
        &self,
        registry: &LiveRegistry,
        options: ImportOptions,
    ) -> Result<Vec<String>, McpError> {
        // Subscribed before listing, so a change in between is not missed.
        let mut changes = self.list_changes();
        let tools = self.tools(&options).await?;
        let names = registry.update(|r| self.add(r, tools))?;
        // Weak both ways: the registry's tools hold the connection, and
        // the task must not hold the registry (or the connection would
        // outlive every user of it).
        let client = Arc::downgrade(&self.inner);
        let registry = registry.downgrade();
        let mut imported = names.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let (Some(inner), Some(registry)) = (client.upgrade(), registry.upgrade()) else {
                    return;
                };
                let client = McpClient { inner };
                match client.refresh(&registry, &options, &imported).await {
                    Ok(now) => imported = now,
                    Err(e) => {
                        tracing::warn!(server = %client.inner.server, error = %e, "updating the imported tools failed");
                    }
                }
            }
        });
        Ok(names)
    }

    async fn refresh(
        &self,
        registry: &LiveRegistry,
        options: &ImportOptions,
        imported: &[String],
    ) -> Result<Vec<String>, McpError> {
        let tools = self.tools(options).await?;
        registry.update(|r| {
            for name in imported {
                r.remove(name);
            }
            let mut added = Vec::new();
            for tool in tools {
                let name = tool.name().to_owned();
                match r.register(tool) {
                    Ok(_) => added.push(name),
                    Err(e) => {
                        tracing::warn!(server = %self.inner.server, tool = %name, error = %e, "an updated tool was not imported");
                    }
                }
            }
            Ok::<_, McpError>(added)
        })
    }

    /// All or nothing: every name is checked before any is added.
    fn add(
        &self,
        registry: &mut ToolRegistry,
        tools: Vec<DynamicTool>,
    ) -> Result<Vec<String>, McpError> {
        let names: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
        if let Some(taken) = names.iter().find(|n| registry.get(n).is_some()) {
            return Err(McpError::NameClash {
                server: self.inner.server.clone(),
                name: taken.clone(),
            });
        }
        for tool in tools {
            let name = tool.name().to_owned();
            registry.register(tool).map_err(|e| McpError::BadTool {
                server: self.inner.server.clone(),
                name,
                reason: e.to_string(),
            })?;
        }
        Ok(names)
    }

    /// One remote tool as a dynamic tool whose calls go to the server.
    fn tool(&self, remote: &McpTool, options: &ImportOptions) -> Result<DynamicTool, McpError> {
        let local = options.local_name(&remote.name);
        let schema = Value::Object((*remote.input_schema).clone());
        let description = remote.description.as_deref().unwrap_or_default().to_owned();
        let call = RemoteCall {
            client: Arc::clone(&self.inner),
            remote: Arc::from(remote.name.as_ref()),
            timeout: options.timeout,
        };
        let mut tool = DynamicTool::new(local, description, schema, move |args, _ctx| {
            let call = call.clone();
            async move { call.run(args).await }
        })
        .map_err(|e| McpError::BadTool {
            server: self.inner.server.clone(),
            name: remote.name.to_string(),
            reason: e.to_string(),
        })?
        // The runner's limit too, so a call through an agent is dropped
        // (and cancelled on the server) at the same moment.
        .with_timeout(options.timeout);
        if let Some(out) = &remote.output_schema {
            tool = tool.with_output_schema(Value::Object((**out).clone()));
        }
        let title = remote
            .title
            .clone()
            .or_else(|| remote.annotations.as_ref().and_then(|a| a.title.clone()));
        if let Some(title) = title {
            tool = tool.with_title(title);
        }
        if let Some(a) = &remote.annotations {
            let mut hints = ToolHints::new();
            hints.read_only = a.read_only_hint;
            hints.destructive = a.destructive_hint;
            hints.idempotent = a.idempotent_hint;
            hints.open_world = a.open_world_hint;
            tool = tool.with_hints(hints);
        }
        Ok(tool)
    }

    /// How long [`close`](Self::close), and the last clone's drop, give a
    /// stdio server to exit once its stdin is closed, before it is killed.
    pub const CLOSE_GRACE: Duration = Duration::from_secs(5);

    /// Ends the connection; over stdio, the server's stdin is closed, and
    /// the process, given [`CLOSE_GRACE`](Self::CLOSE_GRACE) to exit (to
    /// flush its telemetry, say), is killed after it: on a task of the
    /// runtime, without waiting ([`shutdown`](Self::shutdown) waits).
    pub fn close(&self) {
        self.inner.service.cancellation_token().cancel();
        if let Some(process) = &self.inner.process {
            process.end_in_background(Self::CLOSE_GRACE, &self.inner.server);
        }
    }

    /// Ends the connection and waits for it: over stdio, the server's
    /// stdin is closed and it is given `grace` to exit, then killed.
    /// Imported tools fail from then on.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kesoku::mcp::McpError> {
    /// use kesoku::mcp::McpClient;
    ///
    /// let client = McpClient::stdio(tokio::process::Command::new("my-mcp-server")).await?;
    /// // ... import its tools, run an agent ...
    /// client.shutdown(McpClient::CLOSE_GRACE).await?;
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> Result<(), McpError> {
        self.inner.service.cancellation_token().cancel();
        let Some(process) = &self.inner.process else {
            return Ok(());
        };
        let ended = process.end(grace).await.map_err(|source| McpError::Close {
            server: self.inner.server.clone(),
            source,
        })?;
        if ended == Ended::Killed {
            tracing::warn!(server = %self.inner.server, ?grace, "the MCP server did not exit once its stdin was closed; it was killed");
        }
        Ok(())
    }
}

/// What one imported tool's calls need: the connection itself (held, so
/// that it lasts while the tool does) and the remote name.
#[derive(Clone)]
struct RemoteCall {
    client: Arc<Inner>,
    remote: Arc<str>,
    timeout: Duration,
}

impl RemoteCall {
    async fn run(&self, args: Value) -> Result<kesoku_core::ToolOutput, ToolError> {
        let Value::Object(arguments) = args else {
            return Err(ToolError::Failed(
                "the arguments must be a JSON object".into(),
            ));
        };
        let mut params =
            CallToolRequestParams::new(self.remote.to_string()).with_arguments(arguments);
        crate::trace::inject(&mut params.meta);
        // Dropping this future (the limit below, the runner's, an
        // interruption) sends `notifications/cancelled` to the server.
        let peer = self.client.service.peer();
        let server = &self.client.server;
        let answer = tokio::time::timeout(self.timeout, peer.call_tool(params)).await;
        let result = match answer {
            Err(_) => {
                return Err(ToolError::Failed(format!(
                    "the MCP server {server} did not answer `{}` within {:?}; the call was cancelled",
                    self.remote, self.timeout
                )));
            }
            Ok(Err(e)) => {
                return Err(ToolError::Failed(format!(
                    "the MCP server {server} failed on `{}`: {}",
                    self.remote,
                    describe(&e)
                )));
            }
            Ok(Ok(result)) => result,
        };
        convert::remote_output(result).map_err(ToolError::Failed)
    }
}

/// A service error in words a model (and a person) can act on.
fn describe(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportClosed => {
            "the connection closed (the server exited or went away)".to_owned()
        }
        ServiceError::McpError(data) => {
            format!("it answered with error {}: {}", data.code.0, data.message)
        }
        ServiceError::Timeout { timeout } => format!("no answer within {timeout:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::ImportOptions;

    #[test]
    fn local_names_are_what_every_provider_accepts() {
        let plain = ImportOptions::new();
        assert_eq!(plain.local_name("fs.read"), "fs_read");
        assert_eq!(plain.local_name("9lives"), "_9lives");
        let long = plain.local_name(&"a".repeat(128));
        assert_eq!(long.len(), 64);
        let odd = ImportOptions::new().prefix("é.");
        assert_eq!(odd.local_name("x"), "__x");
        assert_eq!(ImportOptions::new().prefix("srv_").local_name("x"), "srv_x");
    }
}
