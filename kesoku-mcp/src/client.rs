//! placeholder
pub struct ImportOptions; pub struct McpClient;
