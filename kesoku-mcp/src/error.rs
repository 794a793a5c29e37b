//! [`McpError`]: what can go wrong serving or importing over MCP.

/// An MCP server or client failure, naming what failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The HTTP address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake (or the session after it) failed.
    #[error("MCP session failed: {0}")]
    Handshake(String),
    /// The server command could not be started.
    #[error("cannot start the MCP server `{command}`: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// Connecting to a server, or its handshake, failed.
    #[error("cannot connect to the MCP server {server}: {reason}")]
    Connect {
        /// The server: its command or URL.
        server: String,
        /// Why.
        reason: String,
    },
    /// A request to a connected server failed.
    #[error("the MCP server {server} failed to answer `{method}`: {reason}")]
    Request {
        /// The server.
        server: String,
        /// The method, such as `tools/list`.
        method: &'static str,
        /// Why.
        reason: String,
    },
    /// The server process could not be waited for or killed as its
    /// connection was shut down.
    #[error("cannot end the MCP server {server}'s process: {source}")]
    Close {
        /// The server: its command.
        server: String,
        /// Why.
        source: std::io::Error,
    },
    /// An imported tool's name is taken by a local tool.
    #[error(
        "the MCP server {server} has a tool `{name}`, which the registry already has; import with a prefix (`ImportOptions::prefix`) to keep both"
    )]
    NameClash {
        /// The server.
        server: String,
        /// The tool name.
        name: String,
    },
    /// An imported tool could not be registered (a bad schema or name).
    #[error("cannot import tool `{name}` from the MCP server {server}: {reason}")]
    BadTool {
        /// The server.
        server: String,
        /// The tool, as the server names it.
        name: String,
        /// Why.
        reason: String,
    },
}
