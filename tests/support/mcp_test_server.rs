//! A test fixture, not an example: an MCP server over stdio with tools the
//! MCP tests need (a slow one, one with an image, one with an output
//! schema and hints). `tests/mcp.rs` starts it.
//!
//! `MCP_FIXTURE_PID_FILE`: where it writes its process id, so a test can
//! kill it mid-call. `MCP_FIXTURE_LOG`: a file it appends `cancelled
//! wait_ms` to when a call is cancelled by the client.

use std::io::Write as _;
use std::time::Duration;

use kesoku::mcp::McpServer;
use kesoku::{ContentBlock, ToolOutput, ToolRegistry, tool};

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool(register = false, read_only, idempotent)]
fn calculate_sum(a: i64, b: i64) -> i64 {
    a + b
}

/// Waits, then says how long it waited.
///
/// # Arguments
/// * `ms` - How long to wait, in milliseconds.
#[tool(register = false)]
async fn wait_ms(ms: u64) -> String {
    // Dropped before the end: the runner stopped the call, as it does when
    // the client cancels it.
    let guard = Unfinished;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    std::mem::forget(guard);
    format!("waited {ms} ms")
}

/// Logs `cancelled wait_ms` when dropped.
struct Unfinished;

impl Drop for Unfinished {
    fn drop(&mut self) {
        log("cancelled wait_ms");
    }
}

/// Draws a one-pixel picture.
#[tool(register = false)]
fn picture() -> ToolOutput {
    ToolOutput::new("a picture".into()).with_block(ContentBlock::image(
        "image/png",
        vec![0x89, b'P', b'N', b'G'],
    ))
}

/// Always fails.
#[tool(register = false)]
fn fail() -> Result<(), String> {
    Err("it broke".to_owned())
}

/// What `look_up` found.
#[derive(serde::Serialize, serde::Deserialize, kesoku::ToolArg)]
struct Found {
    /// The word looked up.
    word: String,
    /// How many letters it has.
    letters: u32,
}

/// Looks a word up.
///
/// # Arguments
/// * `word` - The word.
#[tool(register = false, title = "Look up", read_only, open_world = false)]
fn look_up(word: String) -> Found {
    #[allow(clippy::cast_possible_truncation)]
    let letters = word.chars().count() as u32;
    Found { word, letters }
}

fn log(line: &str) {
    if let Ok(path) = std::env::var("MCP_FIXTURE_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

#[tokio::main]
async fn main() {
    if let Ok(level) = std::env::var("RUST_LOG")
        && let Ok(level) = level.parse::<tracing_subscriber::filter::LevelFilter>()
    {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(level)
            .init();
    }
    if let Ok(path) = std::env::var("MCP_FIXTURE_PID_FILE") {
        std::fs::write(path, std::process::id().to_string()).expect("the pid file");
    }
    let mut registry = ToolRegistry::new();
    for tool in [
        calculate_sum::TOOL,
        wait_ms::TOOL,
        picture::TOOL,
        look_up::TOOL,
        fail::TOOL,
    ] {
        registry.register(tool).expect("distinct names");
    }
    let server = McpServer::builder(registry)
        .name("kesoku-fixture", "0.0.0")
        .build();
    if let Err(e) = server.serve_stdio().await {
        eprintln!("mcp_test_server: {e}");
        std::process::exit(1);
    }
}
