//! The demo agent's tools as an MCP server: over stdio by default (for
//! Claude Code, Claude Desktop and other clients that start their
//! servers), or over streamable HTTP with `--http ADDR`.
//!
//! ```text
//! cargo run --example mcp_server                       # stdio
//! cargo run --example mcp_server -- --http 127.0.0.1:8080   # http://127.0.0.1:8080/mcp
//! ```
//!
//! stdout carries the protocol only; logs go to stderr (`RUST_LOG=debug`).
//! `--otlp URL` (or `OTEL_EXPORTER_OTLP_ENDPOINT`), built with `--features
//! otel`, exports each call's spans: a call from a kesoku agent is a child
//! of the agent's tool span, in the agent's trace.

use std::process::ExitCode;

use clap::Parser;
use kesoku::llm::tools::Sandbox;
use kesoku::mcp::{HttpOptions, McpServer};
use kesoku::{State, ToolContext, ToolRegistry, tool};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

#[path = "demo/otlp.rs"]
mod otlp;
#[path = "demo/tools.rs"]
mod tools;

/// What this server is, for clients that ask.
#[derive(Clone, serde::Serialize, serde::Deserialize, kesoku::ToolArg)]
struct About {
    /// The server's name.
    name: String,
    /// Its version.
    version: String,
    /// The tools it serves.
    tools: Vec<String>,
}

/// Says what this server is: its name, version and tools.
#[tool(
    register = false,
    title = "About this server",
    read_only,
    idempotent,
    open_world = false
)]
fn about(about: State<About>) -> About {
    About::clone(&about.0)
}

/// Serves the demo's tools over MCP.
#[derive(Parser)]
struct Args {
    /// Serve streamable HTTP on this address (such as `127.0.0.1:8080`)
    /// instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Accept this `Host` besides the loopback names (behind a proxy).
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,
    /// Accept requests from this browser origin besides the server's own.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// How long a client may take to send a request's headers, in
    /// milliseconds (default 5,000; at most the read timeout).
    #[arg(long, value_name = "MS")]
    header_timeout_ms: Option<u64>,
    /// How long a client may take to send a request's body, in
    /// milliseconds (default 30,000).
    #[arg(long, value_name = "MS")]
    read_timeout_ms: Option<u64>,
    /// How many connections are served at once (default 256).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Export traces and metrics over OTLP/HTTP to this collector, such as
    /// `http://localhost:4318` (built with `--features otel`); a call from
    /// a kesoku agent continues the agent's trace.
    /// (Default: `OTEL_EXPORTER_OTLP_ENDPOINT`.)
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // A level in RUST_LOG (`debug`, `info`...), warnings by default.
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|l| l.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::WARN);
    let (exported, _exporting) = match otlp::layer("kesoku-mcp-server", args.otlp.as_deref()) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("mcp_server: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The level filters the log only: the exported spans are all kept.
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(level),
        )
        .with(exported)
        .init();

    let server = match server() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("mcp_server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match args.http {
        None => server.serve_stdio().await,
        Some(addr) => {
            let mut options = HttpOptions::default();
            for host in args.allow_host {
                options = options.allow_host(host);
            }
            for origin in args.allow_origin {
                options = options.allow_origin(origin);
            }
            if let Some(ms) = args.header_timeout_ms {
                options = options.header_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(ms) = args.read_timeout_ms {
                options = options.read_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(n) = args.max_connections {
                options = options.max_connections(n);
            }
            match server.bind_http(addr, options).await {
                Ok(http) => {
                    // The one line on stdout over HTTP: where to connect
                    // (tests read it to learn a port picked with `:0`).
                    println!("serving MCP on {}", http.url());
                    http.run().await
                }
                Err(e) => Err(e),
            }
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp_server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The demo's tools but `analyze_media`, which needs the agent's model (an
/// MCP client has its own), reading files under the working directory; and
/// `about`, whose result is structured. `delete_note` needs approval: the
/// server asks the client's user before each call (`elicitation/create`,
/// or an `input_required` result on 2026-07-28).
fn server() -> Result<McpServer, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    let mut registry = ToolRegistry::new();
    for tool in &tools::registry() {
        if tool.name() != "analyze_media" {
            registry.register(tool.clone()).map_err(|e| e.to_string())?;
        }
    }
    registry.register(about::TOOL).map_err(|e| e.to_string())?;
    let facts = About {
        name: "kesoku-demo".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        tools: registry.names().map(str::to_owned).collect(),
    };
    let context = ToolContext::new("mcp")
        .with_state(Sandbox::new(&cwd))
        .with_state(tools::Notebook::default())
        .with_state(facts);
    Ok(McpServer::builder(registry)
        .name("kesoku-demo", env!("CARGO_PKG_VERSION"))
        .instructions("The kesoku demo's tools: arithmetic, the time, notes, and reading files under the server's working directory. Deleting a note asks the user first.")
        .context(context)
        .build())
}
