//! The MCP server processes the tests speak to: the fixture
//! `tests/support/mcp_test_server.rs` and `examples/mcp_server` over HTTP.

#[path = "example.rs"]
mod example;
pub(crate) use example::example;

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub(crate) fn fixture() -> Command {
    Command::new(example("mcp_test_server"))
}

/// `examples/mcp_server --http 127.0.0.1:0`, and the URL it printed.
pub(crate) async fn http_server() -> (Child, String) {
    http_server_with(Command::new(example("mcp_server")), &[]).await
}

/// `command` (which runs `examples/mcp_server`) with `--http 127.0.0.1:0`
/// and `options`, started; the URL it printed.
pub(crate) async fn http_server_with(mut command: Command, options: &[&str]) -> (Child, String) {
    let mut child = command
        .args(["--http", "127.0.0.1:0"])
        .args(options)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut line).await.expect("a line");
    // Kept reading, so a later line does not meet a closed pipe.
    tokio::spawn(async move { tokio::io::copy(&mut reader, &mut tokio::io::sink()).await });
    let url = line
        .trim()
        .strip_prefix("serving MCP on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}
