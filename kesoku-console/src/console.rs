//! [`Console`]: the router over an agent, its guard, its pages, and the
//! server bound to an address.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kesoku_agent::Agent;

use crate::api::{self, Shared};
use crate::auth::{self, Keys, Refused};
use crate::events;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// What the page may load and run: its own script and style alone (an
/// injected `<script>` or inline handler would not run even if one got
/// in), nothing framed, nothing posted elsewhere.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A web console over an [`Agent`]'s store: its sessions (status, last
/// activity), a session's history as a conversation and its turn as it
/// runs (server-sent events), a box for a new prompt and a button to
/// interrupt, and every call waiting for a person, to approve or deny.
///
/// It asks every request for a random token ([`token`](Self::token),
/// printed in [`Running::url`] once): the URL carries it the first time,
/// then a cookie (`HttpOnly`, `SameSite=Strict`). A change (a prompt, an
/// interruption, a decision) must also come from the console's own page:
/// its Origin, and the CSRF token the page was given.
///
/// In the agent's process a prompt's turn runs here (`send`), and so
/// does a turn a decision makes ready; [`posting`](Self::posting) only
/// posts them, for the workers serving the store (a console in a process
/// of its own, over the same `SQLite` file or `PostgreSQL` database).
///
/// ```no_run
/// # async fn run(agent: kesoku_agent::Agent) -> std::io::Result<()> {
/// use kesoku_console::Console;
///
/// let running = Console::new(&agent).bind("127.0.0.1:0".parse().unwrap()).await?;
/// println!("open {}", running.url());
/// running.wait().await
/// # }
/// ```
#[derive(Clone)]
pub struct Console {
    agent: Agent,
    keys: Keys,
    runs_turns: bool,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("runs_turns", &self.runs_turns)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// A console over `agent`, with a fresh random token.
    pub fn new(agent: &Agent) -> Console {
        Console {
            agent: agent.clone(),
            keys: Keys {
                token: auth::secret(),
                csrf: auth::secret(),
            },
            runs_turns: true,
        }
    }

    /// Prompts and decided turns are only posted, for the workers that
    /// serve the store (`Agent::serve`, here or elsewhere); interrupting
    /// reaches only turns of this process.
    #[must_use]
    pub fn posting(mut self) -> Self {
        self.runs_turns = false;
        self
    }

    /// The token every request needs.
    pub fn token(&self) -> &str {
        &self.keys.token
    }

    /// The console as an axum [`Router`], to serve as you like (`bind`
    /// serves it on an address).
    pub fn router(&self) -> Router {
        let shared = Arc::new(Shared {
            agent: self.agent.clone(),
            keys: self.keys.clone(),
            runs_turns: self.runs_turns,
        });
        Router::new()
            .route("/", get(index))
            .route(
                "/app.js",
                get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }),
            )
            .route(
                "/style.css",
                get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
            )
            .route("/api/sessions", get(api::sessions))
            .route("/api/sessions/{id}/messages", get(api::messages))
            .route("/api/sessions/{id}/events", get(events::events))
            .route("/api/sessions/{id}/prompt", post(api::prompt))
            .route("/api/sessions/{id}/interrupt", post(api::interrupt))
            .route("/api/approvals", get(api::approvals))
            .route("/api/approvals/{id}", post(api::decide))
            .layer(middleware::from_fn_with_state(Arc::clone(&shared), guard))
            .with_state(shared)
    }

    /// Serves the console on `addr` (loopback unless you say otherwise),
    /// until the returned [`Running`] is dropped.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(&self, addr: SocketAddr) -> std::io::Result<Running> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let router = self.router();
        let task = tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(Running {
            url: format!("http://{addr}/?token={}", self.keys.token),
            addr,
            task,
        })
    }
}

/// A console being served; dropping it stops the server.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    url: String,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to open, token included (print it for the person only).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until the server stops.
    ///
    /// # Errors
    /// When serving failed.
    pub async fn wait(mut self) -> std::io::Result<()> {
        match (&mut self.task).await {
            Ok(served) => served,
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every request needs the token; a change, the page's Origin and CSRF
/// token. The page's URL may carry the token once: it is then kept in a
/// cookie, and the token dropped from the address bar.
async fn guard(State(c): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let page = req.method() == Method::GET && req.uri().path() == "/";
    let query_token = page
        .then(|| token_in(req.uri().query().unwrap_or_default()))
        .flatten();
    if !c.keys.admits(req.headers(), query_token.as_deref()) {
        return (
            StatusCode::UNAUTHORIZED,
            "the console needs its token: open the URL it printed when it started",
        )
            .into_response();
    }
    if req.method() != Method::GET
        && req.method() != Method::HEAD
        && let Err(Refused(status, why)) = c.keys.allows_change(req.headers())
    {
        return (status, why).into_response();
    }
    if query_token.is_some() {
        return Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, "/")
            .header(header::SET_COOKIE, c.keys.cookie())
            .body(Body::empty())
            .unwrap_or_default();
    }
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The `token` of a query string.
fn token_in(query: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v.to_owned())
}

/// The page, with its CSRF token (hex, so nothing to escape).
async fn index(State(c): State<Arc<Shared>>) -> Response {
    let page = INDEX.replace("{{CSRF}}", &c.keys.csrf);
    asset_owned(page, "text/html; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn asset_owned(body: String, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
