//! MCP both ways for kesoku, through rmcp, the official Rust SDK.
//!
//! - [`McpServer`] serves a tool registry: `tools/list` with each tool's
//!   schema lowered for MCP, its output schema and its hints; `tools/call`
//!   through the same [`ToolRunner`](kesoku_core::ToolRunner) a model's
//!   calls go through. Over stdio ([`McpServer::serve_stdio`]) or
//!   streamable HTTP ([`McpServer::bind_http`]); the `initialize`
//!   handshake of 2025-06-18 and 2025-11-25, and 2026-07-28's
//!   `server/discover`, whichever the client speaks.
//! - [`McpClient`] connects to a server (a command over stdio, or a URL)
//!   and imports its tools into a registry as dynamic tools, so an agent
//!   calls them as it calls local ones.
//!
//! Most users reach this as `kesoku::mcp`.

// The modules form layers: each uses only modules on lines above its own.
//
// 1. leaves:     error, convert, json_scan (a JSON text scanned without recursion),
//                approval (asking the client's user before a tool runs),
//                trace (the trace context a request's `_meta` carries),
//                child (a stdio server's process and its graceful end)
// 2. frame:      frame (reading one JSON-RPC message; json_scan)
// 3. server:     server (convert, approval)
// 4. transports: stdio (server, frame, error), http (server, frame, error)
// 5. client:     client (convert, error, child)
mod approval;
mod child;
mod client;
mod convert;
mod error;
mod frame;
mod http;
mod json_scan;
mod server;
mod stdio;
mod trace;

pub use client::{ImportOptions, McpClient, Protocol};
pub use error::McpError;
pub use http::{HttpOptions, HttpServer};
pub use server::{McpServer, McpServerBuilder};
