//! MCP over streamable HTTP, on one path (`/mcp` by default), stateless so
//! that any instance behind a load balancer can answer any request.
//!
//! The checks that keep a local server from being reached by a web page:
//! the `Host` header must name an allowed host (DNS rebinding), a request
//! with an `Origin` header must come from an allowed origin (rmcp leaves
//! that check off unless asked; here it is always on), and a body over the
//! limit is refused before it is read whole.
//!
//! And the checks that keep it answering: a request's headers must arrive
//! within a few seconds and its body within a time limit, and at the
//! connection limit an idle connection, else the one longest in its
//! headers, is closed to make room (see `conns`); when every connection
//! is being served, a new one is turned away at once. So stalled clients
//! cannot hold every connection (or every file descriptor). Bodies rmcp
//! cannot parse are read by [`frame::read`] and answered with JSON-RPC errors, with the request's
//! id where it can be read, rather than rmcp's `415`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderMap, HeaderValue, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio_util::sync::CancellationToken;

mod conns;
use conns::{Io, Phase, Slots, Tracked};

use crate::error::McpError;
use crate::frame::{self, Frame, Skip};
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
///     .max_body_bytes(1 << 20)
///     .header_timeout(std::time::Duration::from_secs(2))
///     .read_timeout(std::time::Duration::from_secs(10))
///     .max_connections(1024);
/// assert_eq!(options.path(), "/mcp");
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct HttpOptions {
    path: String,
    hosts: Vec<String>,
    origins: Vec<String>,
    max_body: usize,
    header_timeout: Duration,
    read_timeout: Duration,
    max_connections: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            path: "/mcp".into(),
            hosts: Vec::new(),
            origins: Vec::new(),
            max_body: Self::DEFAULT_MAX_BODY,
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl HttpOptions {
    /// The default request body limit: 4 MiB.
    pub const DEFAULT_MAX_BODY: usize = 4 << 20;

    /// The default time a client has to send a request's headers: 5
    /// seconds.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

    /// The default time a client has to send a request's body: 30 seconds.
    pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default limit on connections open at once: 256, well below the
    /// usual limit of 1,024 file descriptors a process may hold.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

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

    /// How long a client may take to send a request's headers (default
    /// 5 s; never longer than the [read timeout](Self::read_timeout)),
    /// counted from when the server begins to wait for them: when the
    /// connection opens, or when the last answer on a kept-alive one was
    /// written. A connection that takes longer is closed without an
    /// answer; so a kept-alive connection left idle is closed after this
    /// long too. Headers take a client one
    /// write: a short deadline frees the slots of clients that trickle
    /// them, or send nothing, long before a body's deadline would.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kesoku::mcp::HttpOptions;
    ///
    /// // Clients on a slow link get longer.
    /// let _options = HttpOptions::default().header_timeout(Duration::from_secs(15));
    /// ```
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a client may take to send a request's body (default 30 s;
    /// its headers have the [header timeout](Self::header_timeout), and at
    /// most this long). A connection that stalls longer is answered 408,
    /// so a stalled client holds its connection no longer than this; so
    /// is one whose answer the client takes none of for as long (it
    /// stopped reading).
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// How many connections are served at once (default 256; at least
    /// one). A connection over the limit makes room by closing one that no
    /// request of its is being served on: an idle kept-alive connection
    /// (idle longest first), else the one that has been sending its
    /// headers longest (or sending nothing). When every connection is
    /// being served, it is answered 503 with `Retry-After` and closed at
    /// once, so the server never runs out of file descriptors, and is
    /// reachable again as soon as a connection closes.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
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
    route: Route,
    max_connections: usize,
    shutdown: CancellationToken,
}

/// What each request goes through.
struct Route {
    service: StreamableHttpService<McpServer, NeverSessionManager>,
    path: String,
    max_body: usize,
    read_timeout: Duration,
    header_timeout: Duration,
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

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
        let server = self.over_stateless_http();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        Ok(HttpServer {
            listener,
            addr: local,
            route: Route {
                service,
                path: options.path,
                max_body: options.max_body,
                read_timeout: options.read_timeout,
                header_timeout: options.header_timeout.min(options.read_timeout),
            },
            max_connections: options.max_connections,
            shutdown,
        })
    }
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .field("path", &self.route.path)
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
        format!("http://{addr}{}", self.route.path)
    }

    /// Cancelling it stops accepting connections and ends
    /// [`run`](Self::run).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Serves connections until shut down.
    pub async fn run(self) -> Result<(), McpError> {
        let read_timeout = self.route.read_timeout;
        let header_timeout = self.route.header_timeout;
        let route = Arc::new(self.route);
        let slots = Slots::new(self.max_connections);
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
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = self.shutdown.cancelled() => return Ok(()),
            };
            // A connection closed for room goes at once (its task wakes
            // and drops it): the wait is bounded all the same, as the
            // loop accepts no one meanwhile.
            let held = tokio::select! {
                held = slots.admit(ADMIT_WAIT) => held,
                () = self.shutdown.cancelled() => return Ok(()),
            };
            let Some(held) = held else {
                turn_away(&stream);
                continue;
            };
            let route = Arc::clone(&route);
            let conn = Arc::clone(held.conn());
            let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                // Set as hyper hands the request over, in the connection's
                // task: a connection is never closed for room while a
                // request of its is served.
                conn.set(Phase::Busy);
                let route = Arc::clone(&route);
                let conn = Arc::clone(&conn);
                async move {
                    let response = route.handle(req).await;
                    Ok::<_, Infallible>(response.map(|body| Tracked { body, conn }))
                }
            });
            tokio::spawn(async move {
                let conn = Arc::clone(held.conn());
                // A client that never finishes its headers, or leaves a
                // kept-alive connection idle, is dropped.
                {
                    let served = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(
                            TokioIo::new(Io::new(stream, Arc::clone(&conn), read_timeout)),
                            handler,
                        );
                    let mut served = std::pin::pin!(served);
                    tokio::select! {
                        ended = served.as_mut() => {
                            if let Err(e) = ended {
                                tracing::debug!(error = %e, "an MCP HTTP connection ended with an error");
                            }
                        }
                        () = conn.closing() => {
                            if conn.phase() == Phase::Busy {
                                // A request reached the service after all
                                // (just before this task woke): answered,
                                // then the connection closes.
                                served.as_mut().graceful_shutdown();
                                if let Err(e) = served.await {
                                    tracing::debug!(error = %e, "an MCP HTTP connection ended with an error");
                                }
                            } else {
                                // No request is being served: dropping cuts
                                // nothing off. (hyper's graceful shutdown would
                                // close an idle connection at once too, but
                                // wait out one in its headers.)
                                tracing::debug!("an MCP HTTP connection was closed to make room");
                            }
                        }
                    }
                }
                // The slot is given back once the connection is closed.
                drop(held);
            });
        }
    }
}

/// How long a new connection waits for one closed to make room for it:
/// one closed idle or in its headers goes at once; one that turned out to
/// be serving a request finishes it first, and the newcomer is turned
/// away rather than hold the accept loop.
const ADMIT_WAIT: Duration = Duration::from_millis(100);

/// Answers a connection over the limit with 503 and closes it, without
/// waiting on it: the answer fits the empty socket buffer.
fn turn_away(stream: &TcpStream) {
    const BODY: &str = "busy: too many connections, try again\n";
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.try_write(answer.as_bytes());
    // What the client already sent is read (up to 64 KiB, so that a fast
    // sender cannot hold the accept loop here), so that closing sends a FIN
    // after the answer rather than a reset that could discard it.
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        if !matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
    tracing::debug!("an MCP HTTP connection was turned away: too many open");
}

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The response, with the connection closed after it (its request was
/// not read to the end).
fn closing(mut response: Reply) -> Reply {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// Whether the body is declared JSON (what rmcp reads; it answers 415 for
/// the rest).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(JSON))
}

impl Route {
    async fn handle(&self, mut req: Request<Incoming>) -> Reply {
        if req.uri().path() != self.path {
            let body = format!("not found: MCP is served on {}\n", self.path);
            return closing(reply(StatusCode::NOT_FOUND, TEXT, body));
        }
        // Two Host headers are a 400 (RFC 9112 §3.2); two Origins are as
        // ambiguous, and rmcp would check only the first of either.
        for name in [HOST, ORIGIN] {
            if req.headers().get_all(&name).iter().nth(1).is_some() {
                let body = format!("bad request: more than one {name} header\n");
                return closing(reply(StatusCode::BAD_REQUEST, TEXT, body));
            }
        }
        // A target in absolute form names the host, and the Host header is
        // then ignored (RFC 9112 §3.2.2): rmcp checks the Host header, so
        // the target's host is put there.
        if let Some(authority) = req.uri().authority() {
            let Ok(host) = HeaderValue::from_str(authority.as_str()) else {
                return closing(reply(
                    StatusCode::BAD_REQUEST,
                    TEXT,
                    "bad request: the request target\n",
                ));
            };
            req.headers_mut().insert(HOST, host);
        }
        if req.method() != Method::POST {
            // rmcp answers without reading a body.
            return closing(self.service.handle(req).await);
        }
        // rmcp's Host and Origin checks come first, as they do in rmcp: a
        // refused request's body is not read, and is not answered here.
        if let Some(refused) = self.refused(&req).await {
            return closing(refused);
        }
        let (parts, body) = req.into_parts();
        let body = match self.read_body(body).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        if !is_json(&parts.headers) {
            return self
                .service
                .handle(Request::from_parts(parts, Full::new(body)))
                .await;
        }
        let (status, content_type, answer) = match frame::read(&body) {
            Frame::Message { text, .. } => {
                let req = Request::from_parts(parts, Full::new(Bytes::from(text)));
                return self.service.handle(req).await;
            }
            // An answer with the request's id is the request's answer;
            // without one, the request could not be read.
            Frame::Answer { text, has_id: true } => (StatusCode::OK, JSON, text),
            Frame::Answer {
                text,
                has_id: false,
            } => (StatusCode::BAD_REQUEST, JSON, text),
            Frame::Skip(Skip::Unreadable(why)) => (
                StatusCode::BAD_REQUEST,
                TEXT,
                format!("bad request: cannot read the message: {why}\n"),
            ),
            Frame::Skip(Skip::Empty | Skip::NotJson) => {
                (StatusCode::BAD_REQUEST, JSON, Frame::parse_error())
            }
        };
        reply(status, content_type, answer)
    }

    /// The body, read within the time and size limits.
    async fn read_body(&self, body: Incoming) -> Result<Bytes, Reply> {
        let too_large = || {
            let body = format!("payload too large: the limit is {} bytes\n", self.max_body);
            closing(reply(StatusCode::PAYLOAD_TOO_LARGE, TEXT, body))
        };
        if body.size_hint().lower() > self.max_body as u64 {
            return Err(too_large());
        }
        let read = Limited::new(body, self.max_body).collect();
        match tokio::time::timeout(self.read_timeout, read).await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.is::<LengthLimitError>() => Err(too_large()),
            Ok(Err(e)) => Err(closing(reply(
                StatusCode::BAD_REQUEST,
                TEXT,
                format!("bad request: cannot read the body: {e}\n"),
            ))),
            Err(_) => {
                tracing::warn!(timeout = ?self.read_timeout, "an MCP request body stalled");
                let body = format!(
                    "request timeout: the body did not arrive within {:?}\n",
                    self.read_timeout
                );
                Err(closing(reply(StatusCode::REQUEST_TIMEOUT, TEXT, body)))
            }
        }
    }

    /// rmcp's response if its Host and Origin checks refuse `req`. rmcp
    /// runs them first on every request, then answers a method it does not
    /// serve with 405: a PUT with the same headers and no body asks it.
    async fn refused<B>(&self, req: &Request<B>) -> Option<Reply> {
        let mut probe = Request::new(Full::new(Bytes::new()));
        *probe.method_mut() = Method::PUT;
        probe.uri_mut().clone_from(req.uri());
        probe.headers_mut().clone_from(req.headers());
        let response = self.service.handle(probe).await;
        (response.status() != StatusCode::METHOD_NOT_ALLOWED).then_some(response)
    }
}
