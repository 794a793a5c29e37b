//! [`analyze_media()`]: shows the turn's model a file and returns what it
//! says.

use std::fmt::Write as _;
use std::io::Cursor;
use std::path::Path;

use image::ImageFormat;
use kesoku_core::{ContentBlock, ToolContext};
use kesoku_macros::tool;

use super::{TurnModel, read_file_with};

/// Images are shrunk to this many pixels on their long side, at most.
const MAX_SIDE: u32 = 1024;
/// The largest image decoded, on either side.
const MAX_DECODED_SIDE: u32 = 16_384;
/// The most memory decoding one image may take.
const MAX_DECODED_BYTES: u64 = 256 << 20;
/// The most pixels an image may have: decoding and shrinking a larger one
/// takes seconds and several times its decoded size.
const MAX_PIXELS: u64 = 40_000_000;

/// Looks at a file (an image, a PDF, audio, video or text) and answers a
/// question about it.
///
/// # Arguments
/// * `path` - The file, relative to the working directory or the session's
///   staging directory, or absolute.
/// * `prompt` - What to find out about it.
#[tool(
    crate = kesoku_core,
    register = false,
    targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp)
)]
pub async fn analyze_media(
    path: String,
    #[arg(default = "Describe the content of this file in detail.".to_owned())] prompt: String,
    context: &ToolContext,
) -> Result<String, String> {
    let model = context.state::<TurnModel>().ok_or(
        "analyze_media needs the turn's model, which this context does not carry (run it in an agent's turn, or put a `TurnModel` in the context's state)",
    )?;
    let shown = path.clone();
    let block = read_file_with(context, path, |path, real, bytes| {
        let name = real.file_name().map(|n| n.to_string_lossy().into_owned());
        block_of(path, real, bytes, name)
    })
    .await?;
    let kind = block_kind(&block);
    let turn = model
        .ask(context.session_id(), vec![block], &prompt)
        .await
        .map_err(|e| format!("the model could not look at '{shown}': {e}"))?;
    let mut answer = turn.text;
    if !turn.fallbacks.is_empty() {
        let notes: Vec<String> = turn
            .fallbacks
            .iter()
            .map(|f| format!("{} cannot take {} ({})", f.provider, f.kind, f.mime_type))
            .collect();
        let _ = write!(
            answer,
            "\n\n(Note: the model did not see '{shown}' as a {kind}: {}; it was sent a note in its place, so the answer above is not about the file's content.)",
            notes.join("; ")
        );
    }
    Ok(answer)
}

/// The block `bytes` go as; an error for a type no provider takes.
fn block_of(
    shown: &str,
    real: &Path,
    bytes: Vec<u8>,
    name: Option<String>,
) -> Result<ContentBlock, String> {
    let mime = mime_of(real, &bytes);
    let (top, _) = mime.split_once('/').unwrap_or((mime.as_str(), ""));
    match (top, mime.as_str()) {
        (_, "image/png" | "image/jpeg" | "image/gif" | "image/webp") => {
            let (mime, data) = shrink(shown, &mime, bytes)?;
            Ok(ContentBlock::Image {
                mime_type: mime,
                data,
            })
        }
        (_, "application/pdf") => Ok(ContentBlock::Document {
            mime_type: mime,
            data: bytes,
            name,
        }),
        ("audio" | "video", _) => Ok(ContentBlock::Media {
            mime_type: mime,
            data: bytes,
        }),
        _ if is_text(&mime, &bytes) => Ok(ContentBlock::Document {
            mime_type: "text/plain".to_owned(),
            data: bytes,
            name,
        }),
        _ => Err(format!(
            "'{shown}' is {mime}, which analyze_media cannot send; it sends images (PNG, JPEG, GIF, WebP), PDFs, audio, video and text"
        )),
    }
}

/// The MIME type: by magic bytes, else by extension, else unknown.
fn mime_of(path: &Path, bytes: &[u8]) -> String {
    if let Some(t) = infer::get(bytes) {
        return t.mime_type().to_owned();
    }
    mime_guess::from_path(path).first().map_or_else(
        || "application/octet-stream".to_owned(),
        |m| m.essence_str().to_owned(),
    )
}

/// Text a document block can carry: UTF-8 without NUL bytes, of a text
/// type or of none known.
fn is_text(mime: &str, bytes: &[u8]) -> bool {
    let textual = mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/toml"
                | "application/x-sh"
                | "application/octet-stream"
        );
    textual && !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// The image shrunk to `MAX_SIDE` on its long side, in its own format,
/// when that is smaller than `bytes`; else `bytes` as they are.
fn shrink(shown: &str, mime: &str, bytes: Vec<u8>) -> Result<(String, Vec<u8>), String> {
    let unreadable =
        |e: image::ImageError| format!("'{shown}' is not a readable image ({mime}): {e}");
    let format = ImageFormat::from_mime_type(mime).unwrap_or(ImageFormat::Png);
    // A small file can declare a huge image: the decoder stops at these
    // bounds instead of allocating what the header asks.
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DECODED_SIDE);
    limits.max_image_height = Some(MAX_DECODED_SIDE);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    let (width, height) = image::ImageReader::with_format(Cursor::new(&bytes), format)
        .into_dimensions()
        .map_err(unreadable)?;
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!(
            "'{shown}' is a {width} x {height} image, over the {} megapixels analyze_media decodes; send a smaller version",
            MAX_PIXELS / 1_000_000
        ));
    }
    let mut reader = image::ImageReader::with_format(Cursor::new(&bytes), format);
    reader.limits(limits);
    let img = reader.decode().map_err(unreadable)?;
    if img.width().max(img.height()) <= MAX_SIDE {
        return Ok((mime.to_owned(), bytes));
    }
    let small = img.resize(MAX_SIDE, MAX_SIDE, image::imageops::FilterType::Triangle);
    // GIF and WebP are re-encoded as PNG: the crate writes lossless WebP
    // only, and a GIF frame as PNG keeps its look.
    let (out_format, out_mime) = match format {
        ImageFormat::Jpeg => (ImageFormat::Jpeg, "image/jpeg"),
        _ => (ImageFormat::Png, "image/png"),
    };
    let mut out = Cursor::new(Vec::new());
    match small.write_to(&mut out, out_format) {
        Ok(()) if out.get_ref().len() < bytes.len() => Ok((out_mime.to_owned(), out.into_inner())),
        // Larger (or not encodable): the original goes, at its size.
        _ => Ok((mime.to_owned(), bytes)),
    }
}

fn block_kind(block: &ContentBlock) -> &'static str {
    match block {
        ContentBlock::Image { .. } => "image",
        ContentBlock::Document { .. } => "document",
        ContentBlock::Media { .. } => "media file",
        ContentBlock::Text { .. } => "text",
    }
}
