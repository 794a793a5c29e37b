//! MCP over streamable HTTP, on one path (`/mcp` by default), stateless so
//! that any instance behind a load balancer can answer any request.
//!
//! The checks that keep a local server from being reached by a web page:
//! the `Host` header must name an allowed host (DNS rebinding), a request
//! with an `Origin` header must come from an allowed origin (rmcp leaves
//! that check off unless asked; here it is always on), and a body over the
//! limit is refused before it is read whole.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio_util::sync::CancellationToken;

use crate::error::McpError;
use crate::server::McpServer;

/// How the HTTP transport is set up. The defaults suit a server on
/// loopback; a server behind a proxy names its public host and origins.
///
/// ```
/// use kesoku::mcp::HttpOptions;
///
/// let options = HttpOptions::default()
///     .allow_host("tools.example.com")
///     .allow_origin("https://app.example.com")
///     .max_body_bytes(1 << 20);
/// assert_eq!(options.path(), "/mcp");
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct HttpOptions {
    path: String,
    hosts: Vec<String>,
    origins: Vec<String>,
    max_body: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            path: "/mcp".into(),
            hosts: Vec::new(),
            origins: Vec::new(),
            max_body: Self::DEFAULT_MAX_BODY,
        }
    }
}

impl HttpOptions {
    /// The default request body limit: 4 MiB.
    pub const DEFAULT_MAX_BODY: usize = 4 << 20;

    /// The path MCP is served on (default `/mcp`; a leading `/` is added
    /// if missing); others get 404.
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        self.path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        self
    }

    /// The path MCP is served on.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Accepts `Host: host` (or `host:port`) besides the loopback names
    /// `localhost`, `127.0.0.1` and `::1`, which are always accepted.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into());
        self
    }

    /// Accepts requests from a browser origin (`https://app.example.com`,
    /// `http://localhost:*` for any port) besides the server's own loopback
    /// origins. A request with any other `Origin` is refused with 403; one
    /// with none (not from a browser) is accepted.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.origins.push(origin.into());
        self
    }

    /// Refuses request bodies over `bytes` with 413.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    fn config(&self, port: u16, shutdown: CancellationToken) -> StreamableHttpServerConfig {
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        hosts.extend(self.hosts.iter().cloned());
        let mut origins = vec![
            format!("http://localhost:{port}"),
            format!("http://127.0.0.1:{port}"),
            format!("http://[::1]:{port}"),
        ];
        origins.extend(self.origins.iter().cloned());
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(self.max_body)
            // No sessions: any instance answers any request.
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_cancellation_token(shutdown)
    }
}

/// A bound MCP HTTP server: [`run`](Self::run) serves until
/// [`shutdown`](Self::shutdown_token) is cancelled.
#[must_use = "call `run()` to serve"]
pub struct HttpServer {
    listener: TcpListener,
    addr: SocketAddr,
    path: String,
    service: StreamableHttpService<McpServer, NeverSessionManager>,
    shutdown: CancellationToken,
}

impl McpServer {
    /// Binds `addr` (`127.0.0.1:8080`; port 0 picks a free one) for MCP
    /// over streamable HTTP.
    pub async fn bind_http(
        self,
        addr: impl ToSocketAddrs + std::fmt::Display,
        options: HttpOptions,
    ) -> Result<HttpServer, McpError> {
        let shown = addr.to_string();
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| McpError::Bind {
                addr: shown.clone(),
                source,
            })?;
        let local = listener.local_addr().map_err(|source| McpError::Bind {
            addr: shown,
            source,
        })?;
        let shutdown = CancellationToken::new();
        let config = options.config(local.port(), shutdown.child_token());
        let server = self;
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        Ok(HttpServer {
            listener,
            addr: local,
            path: options.path,
            service,
            shutdown,
        })
    }
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL clients on this machine connect to, such as
    /// `http://127.0.0.1:8080/mcp` (for a server bound to all interfaces,
    /// its loopback address; others use the host name they were allowed).
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        format!("http://{addr}{}", self.path)
    }

    /// Cancelling it stops accepting connections and ends
    /// [`run`](Self::run).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Serves connections until shut down.
    pub async fn run(self) -> Result<(), McpError> {
        let path: Arc<str> = self.path.into();
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    // A connection that failed before it was accepted
                    // (reset, out of descriptors for a moment) is that
                    // client's problem, not the server's.
                    // Out of descriptors, say: wait before trying again
                    // rather than spin.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting an MCP connection failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = self.shutdown.cancelled() => return Ok(()),
            };
            let service = self.service.clone();
            let path = Arc::clone(&path);
            let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                let path = Arc::clone(&path);
                async move { Ok::<_, Infallible>(route(&service, &path, req).await) }
            });
            tokio::spawn(async move {
                // A client that never finishes its headers is dropped.
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(std::time::Duration::from_secs(30))
                    .serve_connection(TokioIo::new(stream), handler);
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "an MCP HTTP connection ended with an error");
                }
            });
        }
    }
}

async fn route(
    service: &StreamableHttpService<McpServer, NeverSessionManager>,
    path: &str,
    req: Request<Incoming>,
) -> Response<BoxBody<Bytes, Infallible>> {
    if req.uri().path() != path {
        let body = format!("not found: MCP is served on {path}\n");
        let mut response = Response::new(http_body_util::Full::new(Bytes::from(body)).boxed());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    service.handle(req).await
}
