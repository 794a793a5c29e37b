//! [`list_files()`] and [`read_file()`]: the workspace, read inside the
//! [`Sandbox`](super::Sandbox).

use std::fmt::Write as _;

use kesoku_core::ToolContext;
use kesoku_macros::tool;

use super::sandbox::{Entry, EntryKind, escape_name};
use super::{read_file_with, sandbox};

/// The most lines `read_file` returns by default.
const DEFAULT_LIMIT: usize = 2000;
/// The most entries `list_files` shows.
const MAX_ENTRIES: usize = 1000;
/// The most bytes of text either tool returns: a result is read by the
/// model whole, on every later step.
const MAX_OUTPUT: usize = 64 * 1024;

/// Lists a directory: one entry per line, directories ending in `/`,
/// files with their size in bytes. Names are escaped onto one line each
/// (`\n` for a newline, `\\` for a backslash).
///
/// # Arguments
/// * `dir` - The directory, relative to the working directory or the
///   session's staging directory, or absolute; the working directory if
///   omitted.
#[tool(
    crate = kesoku_core,
    register = false,
    targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp)
)]
pub async fn list_files(dir: Option<String>, context: &ToolContext) -> Result<String, String> {
    let sandbox = sandbox(context)?;
    let staging = context.workspace().map(std::path::Path::to_path_buf);
    let shown = dir.unwrap_or_else(|| ".".to_owned());
    tokio::task::spawn_blocking(move || {
        let listing = sandbox
            .list_dir(&shown, staging.as_deref())
            .map_err(|e| e.to_string())?;
        let mut lines: Vec<String> = listing
            .entries
            .into_iter()
            .map(|Entry { name, kind }| match kind {
                EntryKind::Dir => format!("{name}/"),
                EntryKind::File(size) => format!("{name} ({size} bytes)"),
                EntryKind::LinkOut => format!("{name} (a link leading outside the sandbox)"),
                EntryKind::BrokenLink => format!("{name} (a broken link)"),
                EntryKind::Special => format!("{name} (not a regular file)"),
                EntryKind::Unreadable(e) => format!("{name} (unreadable: {e})"),
            })
            .collect();
        lines.sort();
        let total = lines.len();
        let mut out = format!(
            "{} ({total} entries)\n",
            escape_name(listing.path.as_os_str())
        );
        let mut shown = 0;
        for line in lines.iter().take(MAX_ENTRIES) {
            if out.len() + line.len() >= MAX_OUTPUT {
                break;
            }
            out.push_str(line);
            out.push('\n');
            shown += 1;
        }
        if total > shown {
            let _ = writeln!(out, "... and {} more", total - shown);
        }
        Ok(out)
    })
    .await
    .map_err(|e| format!("listing failed: {e}"))?
}

/// Reads a text file, by lines.
///
/// # Arguments
/// * `path` - The file, relative to the working directory or the session's
///   staging directory, or absolute.
/// * `offset` - The first line to read, counting from 1.
/// * `limit` - The most lines to read; 2000 if omitted.
///
/// # Returns
/// The lines, each prefixed with its number, and a last line saying how
/// many the file has when not all were read.
#[tool(
    crate = kesoku_core,
    register = false,
    targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp)
)]
pub async fn read_file(
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
    context: &ToolContext,
) -> Result<String, String> {
    read_file_with(context, path, move |path, _, bytes| {
        let text = text_of(&bytes).ok_or_else(|| {
            let kind = infer::get(&bytes).map_or("binary data", |t| t.mime_type());
            format!(
                "'{path}' is not a text file ({kind}); use `analyze_media` to look at images, PDFs, audio or video"
            )
        })?;
        let first = usize::try_from(offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
        let limit = limit.map_or(DEFAULT_LIMIT, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let total = text.lines().count();
        let mut out = String::new();
        let mut shown = 0;
        let mut cut = false;
        for (i, line) in text.lines().enumerate().skip(first - 1).take(limit) {
            let room = MAX_OUTPUT.saturating_sub(out.len() + 8);
            if room == 0 {
                break;
            }
            if line.len() > room {
                // A line longer than what is left is cut at a character.
                let end = (0..=room).rev().find(|&e| line.is_char_boundary(e)).unwrap_or(0);
                let _ = writeln!(out, "{:>6}\t{}", i + 1, &line[..end]);
                shown += 1;
                cut = true;
                break;
            }
            let _ = writeln!(out, "{:>6}\t{line}", i + 1);
            shown += 1;
        }
        if cut {
            let _ = writeln!(out, "(the last line is cut: it is longer than a result may be)");
        }
        if shown < total {
            let _ = write!(out, "({shown} of {total} lines shown; read on with `offset`)");
        }
        Ok(out)
    })
    .await
}

/// `bytes` as text: UTF-8 without NUL bytes.
fn text_of(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}
