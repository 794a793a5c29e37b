//! Built-in tools: [`analyze_media()`], which shows the turn's model a file,
//! and [`list_files()`] and [`read_file()`], which read the workspace. Each
//! reads only inside a [`Sandbox`].
//!
//! They are not in [`default_registry`](kesoku_core::default_registry):
//! add those you want.
//!
//! ```
//! use kesoku_core::ToolRegistry;
//! use kesoku_agent::tools::{analyze_media, list_files, read_file};
//!
//! let mut registry = ToolRegistry::new();
//! for tool in [analyze_media::TOOL, list_files::TOOL, read_file::TOOL] {
//!     registry.register(tool).unwrap();
//! }
//! assert!(registry.get("analyze_media").is_some());
//! ```

mod files;
mod media;
mod model;
mod sandbox;

pub use files::{list_files, read_file};
pub use media::analyze_media;
pub use model::TurnModel;
pub use sandbox::{DEFAULT_MAX_FILE_SIZE, Sandbox, SandboxError};

use std::sync::Arc;

use kesoku_core::ToolContext;

/// The sandbox of `context`, or one on the current directory.
fn sandbox(context: &ToolContext) -> Result<Arc<Sandbox>, String> {
    if let Some(s) = context.state::<Sandbox>() {
        return Ok(s);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| format!("no sandbox is set and the current directory is unknown: {e}"))?;
    Ok(Arc::new(Sandbox::new(cwd)))
}

/// Reads the file `path` names in the sandbox of `context` (up to the
/// size limit), on a blocking thread, and hands `then` the path as given,
/// the file's real path and its bytes, on that thread too (so decoding
/// them does not hold up the async workers).
async fn read_file_with<T: Send + 'static>(
    context: &ToolContext,
    path: String,
    then: impl FnOnce(&str, &std::path::Path, Vec<u8>) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let sandbox = sandbox(context)?;
    let staging = context.workspace().map(std::path::Path::to_path_buf);
    tokio::task::spawn_blocking(move || {
        let mut opened = sandbox
            .open_file(&path, staging.as_deref())
            .map_err(|e| e.to_string())?;
        let real = std::mem::take(&mut opened.path);
        let bytes = opened.read(&path).map_err(|e| e.to_string())?;
        then(&path, &real, bytes)
    })
    .await
    .map_err(|e| format!("reading a file failed: {e}"))?
}
