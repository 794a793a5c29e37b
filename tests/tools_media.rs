//! `analyze_media`: which block a file is sent to the model as (images
//! downscaled to 1024 px on the long side, PDFs and text as documents,
//! audio and video as media; anything else refused, naming its type),
//! the one model call it makes (one user message with the prompt, no
//! tools, no system prompt), what it returns (the model's text, with a
//! note when the provider could not take the block), and that it needs
//! the turn's model.
#![cfg(unix)]

use std::fs;
use std::io::Cursor;
use std::sync::{Arc, Mutex};

use image::{ImageFormat, RgbImage};
use kesoku::llm::tools::{Sandbox, TurnModel, analyze_media};
use kesoku::llm::{
    AssistantTurn, ContentBlock, ContentFallback, Llm, LlmError, LlmFuture, LlmOptions,
    ToolDeclaration, content_blocks,
};
use kesoku::{Message, Role, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use tempfile::TempDir;

const DEFAULT_PROMPT: &str = "Describe the content of this file in detail.";

/// One call the model received.
#[derive(Clone)]
struct Call {
    messages: Vec<Message>,
    tools: usize,
    options: LlmOptions,
}

/// A model that records its calls and answers `answer`, reporting
/// `fallbacks`.
struct Recorder {
    calls: Mutex<Vec<Call>>,
    answer: String,
    fallbacks: Vec<ContentFallback>,
}

impl Recorder {
    fn new(answer: &str) -> Self {
        Recorder {
            calls: Mutex::new(Vec::new()),
            answer: answer.to_owned(),
            fallbacks: Vec::new(),
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl Llm for Recorder {
    fn provider(&self) -> &'static str {
        "recorder"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.calls.lock().unwrap().push(Call {
            messages: messages.to_vec(),
            tools: tools.len(),
            options: options.clone(),
        });
        let turn = AssistantTurn::new(session_id, "recorder", self.answer.clone(), [])
            .with_fallbacks(self.fallbacks.clone());
        Box::pin(async move { Ok(turn) })
    }
}

/// A working directory, and `analyze_media` in a context on it whose
/// model is a [`Recorder`].
struct Harness {
    dir: TempDir,
    registry: ToolRegistry,
    ctx: ToolContext,
    model: Arc<Recorder>,
}

impl Harness {
    fn new() -> Self {
        Self::with(Recorder::new("It is a file."), LlmOptions::new("m"))
    }

    fn with(model: Recorder, options: LlmOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(model);
        let llm: Arc<dyn Llm> = model.clone();
        let ctx = ToolContext::new("s")
            .with_workspace(dir.path().join("staging"))
            .with_state(Sandbox::new(dir.path()))
            .with_state(TurnModel::new(llm, options));
        let mut registry = ToolRegistry::new();
        registry.register(analyze_media::TOOL).unwrap();
        Harness {
            dir,
            registry,
            ctx,
            model,
        }
    }

    fn write(&self, name: &str, bytes: &[u8]) {
        fs::write(self.dir.path().join(name), bytes).unwrap();
    }

    async fn call(&self, args: Value) -> Result<String, String> {
        self.registry
            .get("analyze_media")
            .unwrap()
            .call(args, &self.ctx)
            .await
            .map(|o| o.text())
            .map_err(|e| e.to_string())
    }

    /// Sends `name` with the default prompt: the one block the model got.
    async fn send(&self, name: &str) -> ContentBlock {
        let before = self.model.calls().len();
        let answer = self
            .call(json!({"path": name}))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(answer, self.model.answer);
        let calls = self.model.calls();
        assert_eq!(calls.len(), before + 1, "{name}: one model call");
        let call = calls.last().unwrap();
        assert_eq!(call.messages.len(), 1);
        let mut blocks = content_blocks(&call.messages[0]);
        assert_eq!(blocks.len(), 1, "{name}: {blocks:?}");
        blocks.pop().unwrap()
    }

    /// `analyze_media` on `name` fails with an error containing each of
    /// `needles`, and the model is not asked.
    async fn refused(&self, name: &str, needles: &[&str]) -> String {
        let e = self
            .call(json!({"path": name}))
            .await
            .expect_err("not refused");
        for needle in needles {
            assert!(e.contains(needle), "{name}: {e:?} lacks {needle:?}");
        }
        assert!(self.model.calls().is_empty(), "{name}: the model was asked");
        e
    }
}

/// A `width` x `height` picture: gradients and a checkerboard, so that
/// it has detail yet encodes (and decodes) quickly.
fn picture(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        let byte = |n: u32| u8::try_from(n % 256).unwrap();
        let check = if (x / 64 + y / 64) % 2 == 0 { 0 } else { 255 };
        image::Rgb([byte(x / 12), byte(y / 6), check])
    })
}

fn encode(img: &RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// The block as an image: its MIME type and bytes.
fn image_of(block: &ContentBlock) -> (&str, &[u8]) {
    match block {
        ContentBlock::Image { mime_type, data } => (mime_type, data),
        other => panic!("not an image: {}", kind(other)),
    }
}

fn kind(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => format!("text {text:?}"),
        ContentBlock::Image { mime_type, .. } => format!("image {mime_type}"),
        ContentBlock::Document { mime_type, .. } => format!("document {mime_type}"),
        ContentBlock::Media { mime_type, .. } => format!("media {mime_type}"),
    }
}

/// A minimal PCM WAV file: 16 samples of silence.
fn wav() -> Vec<u8> {
    let data = [0u8; 32];
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + 32u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&8000u32.to_le_bytes());
    out.extend_from_slice(&16000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&32u32.to_le_bytes());
    out.extend_from_slice(&data);
    out
}

const PDF: &[u8] = b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n\
2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n";

#[tokio::test]
async fn a_large_png_is_sent_downscaled_to_1024_px() {
    let h = Harness::new();
    let original = encode(&picture(3000, 1500), ImageFormat::Png);
    h.write("big.png", &original);
    let block = h.send("big.png").await;
    let (mime, data) = image_of(&block);
    assert_eq!(mime, "image/png");
    assert!(data.len() < original.len());
    let sent = image::load_from_memory(data).unwrap();
    assert_eq!((sent.width(), sent.height()), (1024, 512));
}

#[tokio::test]
async fn a_tall_image_is_downscaled_on_its_long_side() {
    let h = Harness::new();
    h.write("tall.png", &encode(&picture(600, 1200), ImageFormat::Png));
    let block = h.send("tall.png").await;
    let sent = image::load_from_memory(image_of(&block).1).unwrap();
    assert_eq!((sent.width(), sent.height()), (512, 1024));
}

#[tokio::test]
async fn a_large_jpeg_is_sent_downscaled() {
    let h = Harness::new();
    let original = encode(&picture(2048, 1024), ImageFormat::Jpeg);
    h.write("photo.jpg", &original);
    let block = h.send("photo.jpg").await;
    let (mime, data) = image_of(&block);
    assert!(mime == "image/jpeg" || mime == "image/png", "{mime}");
    assert!(data.len() < original.len());
    let sent = image::load_from_memory(data).unwrap();
    assert_eq!((sent.width(), sent.height()), (1024, 512));
}

#[tokio::test]
async fn a_small_image_is_sent_unchanged() {
    let h = Harness::new();
    let small = encode(&picture(10, 10), ImageFormat::Png);
    h.write("small.png", &small);
    let block = h.send("small.png").await;
    assert_eq!(
        block,
        ContentBlock::Image {
            mime_type: "image/png".to_owned(),
            data: small
        }
    );
    // At the limit, too: 1024 px is not over it.
    let edge = encode(&picture(1024, 40), ImageFormat::Png);
    h.write("edge.png", &edge);
    assert_eq!(
        image_of(&h.send("edge.png").await),
        ("image/png", &edge[..])
    );
    let jpeg = encode(&picture(10, 10), ImageFormat::Jpeg);
    h.write("small.jpg", &jpeg);
    assert_eq!(
        image_of(&h.send("small.jpg").await),
        ("image/jpeg", &jpeg[..])
    );
    let gif = encode(&picture(10, 10), ImageFormat::Gif);
    h.write("small.gif", &gif);
    assert_eq!(
        image_of(&h.send("small.gif").await),
        ("image/gif", &gif[..])
    );
    let webp = encode(&picture(10, 10), ImageFormat::WebP);
    h.write("small.webp", &webp);
    assert_eq!(
        image_of(&h.send("small.webp").await),
        ("image/webp", &webp[..])
    );
}

#[tokio::test]
async fn the_type_is_told_by_magic_bytes_before_the_extension() {
    let h = Harness::new();
    let png = encode(&picture(10, 10), ImageFormat::Png);
    // A PNG named as a PDF, and one with no telling name.
    h.write("fake.pdf", &png);
    h.write("picture.dat", &png);
    for name in ["fake.pdf", "picture.dat"] {
        assert_eq!(image_of(&h.send(name).await), ("image/png", &png[..]));
    }
    // A PDF named as a text file.
    h.write("report.txt", PDF);
    match h.send("report.txt").await {
        ContentBlock::Document {
            mime_type, data, ..
        } => {
            assert_eq!(mime_type, "application/pdf");
            assert_eq!(data, PDF);
        }
        other => panic!("{}", kind(&other)),
    }
}

#[tokio::test]
async fn a_pdf_goes_as_a_pdf_document() {
    let h = Harness::new();
    h.write("doc.pdf", PDF);
    match h.send("doc.pdf").await {
        ContentBlock::Document {
            mime_type,
            data,
            name,
        } => {
            assert_eq!(mime_type, "application/pdf");
            assert_eq!(data, PDF);
            assert!(
                name.is_none() || name.as_deref() == Some("doc.pdf"),
                "{name:?}"
            );
        }
        other => panic!("{}", kind(&other)),
    }
}

#[tokio::test]
async fn a_wav_goes_as_audio_media() {
    let h = Harness::new();
    let wav = wav();
    h.write("clip.wav", &wav);
    h.write("clip-no-extension", &wav);
    for name in ["clip.wav", "clip-no-extension"] {
        match h.send(name).await {
            ContentBlock::Media { mime_type, data } => {
                assert!(mime_type.starts_with("audio/"), "{mime_type}");
                assert_eq!(data, wav);
            }
            other => panic!("{name}: {}", kind(&other)),
        }
    }
}

#[tokio::test]
async fn without_magic_bytes_the_extension_tells_the_type() {
    let h = Harness::new();
    let bytes = b"not really a movie, but named as one";
    h.write("movie.mp4", bytes);
    match h.send("movie.mp4").await {
        ContentBlock::Media { mime_type, data } => {
            assert_eq!(mime_type, "video/mp4");
            assert_eq!(data, bytes);
        }
        other => panic!("{}", kind(&other)),
    }
}

#[tokio::test]
async fn text_goes_as_a_plain_text_document() {
    let h = Harness::new();
    let files: [(&str, &[u8]); 4] = [
        ("notes.txt", b"hello, world\n"),
        ("data.json", b"{\"a\": 1}\n"),
        ("main.rs", b"fn main() {}\n"),
        ("README", b"A readme with no extension.\n"),
    ];
    for (name, bytes) in files {
        h.write(name, bytes);
        match h.send(name).await {
            ContentBlock::Document {
                mime_type, data, ..
            } => {
                assert_eq!(mime_type, "text/plain", "{name}");
                assert_eq!(data, bytes, "{name}");
            }
            other => panic!("{name}: {}", kind(&other)),
        }
    }
}

#[tokio::test]
async fn a_zip_is_refused_naming_its_type() {
    let h = Harness::new();
    let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    zip.extend_from_slice(&[0u8; 40]);
    h.write("archive.zip", &zip);
    h.refused(
        "archive.zip",
        &["application/zip", "analyze_media cannot send"],
    )
    .await;
}

#[tokio::test]
async fn unknown_binary_is_refused_naming_its_type() {
    let h = Harness::new();
    let bytes: Vec<u8> = (0u8..=255).rev().chain(0u8..=255).collect();
    // Neither the bytes nor the extension say what it is.
    h.write("blob.qqqzz", &bytes);
    h.refused(
        "blob.qqqzz",
        &["application/octet-stream", "analyze_media cannot send"],
    )
    .await;
    // Binary under a text name is not sent as text.
    h.write("fake.txt", &bytes);
    h.refused("fake.txt", &["analyze_media cannot send"]).await;
}

#[tokio::test]
async fn a_broken_image_is_an_error() {
    let h = Harness::new();
    // A PNG signature and nothing of an image after it.
    h.write("broken.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRgarbage");
    h.refused("broken.png", &["broken.png"]).await;
}

/// CRC-32 of a PNG chunk's type and data.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(out: &mut Vec<u8>, kind: [u8; 4], data: &[u8]) {
    out.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
    let start = out.len();
    out.extend_from_slice(&kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

#[tokio::test]
async fn a_tiny_file_declaring_a_huge_image_is_refused_without_decoding_it() {
    // A valid PNG header for 100,000 x 100,000 RGB pixels (30 GB decoded),
    // with one tiny compressed row: a decompression bomb's shape.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, *b"IHDR", &ihdr);
    // zlib: a stored, empty final block.
    chunk(
        &mut png,
        *b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
        ],
    );
    chunk(&mut png, *b"IEND", &[]);
    assert!(png.len() < 100);
    let h = Harness::new();
    h.write("bomb.png", &png);
    h.refused(
        "bomb.png",
        &["'bomb.png' is a 100000 x 100000 image, over the 40 megapixels"],
    )
    .await;
}

#[tokio::test]
async fn the_model_is_asked_once_with_the_prompt_alone() {
    let mut options = LlmOptions::new("vision-model");
    options.system = Some("You are a careful agent.".to_owned());
    let h = Harness::with(Recorder::new("A red square."), options);
    h.write("notes.txt", b"some notes\n");

    // The default prompt.
    let answer = h.call(json!({"path": "notes.txt"})).await.unwrap();
    assert_eq!(answer, "A red square.");
    // A prompt of the caller's.
    let answer = h
        .call(json!({"path": "notes.txt", "prompt": "What is written?"}))
        .await
        .unwrap();
    assert_eq!(answer, "A red square.");

    let calls = h.model.calls();
    assert_eq!(calls.len(), 2, "one model call per use");
    for (call, prompt) in calls.iter().zip([DEFAULT_PROMPT, "What is written?"]) {
        assert_eq!(call.tools, 0, "no tools are offered");
        assert_eq!(call.options.system, None, "no system prompt");
        assert_eq!(call.options.model, "vision-model");
        assert_eq!(call.messages.len(), 1);
        let message = &call.messages[0];
        assert_eq!(message.role, Role::User);
        assert_eq!(message.content, prompt);
        match &content_blocks(message)[..] {
            [
                ContentBlock::Document {
                    mime_type, data, ..
                },
            ] => {
                assert_eq!(mime_type, "text/plain");
                assert_eq!(data, b"some notes\n");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn the_tool_returns_the_models_text() {
    let text = "Line one.\nLine two, with \"quotes\" and ünïcödé.";
    let h = Harness::with(Recorder::new(text), LlmOptions::new("m"));
    h.write("a.txt", b"a\n");
    assert_eq!(h.call(json!({"path": "a.txt"})).await.unwrap(), text);
}

#[tokio::test]
async fn a_block_the_provider_could_not_take_is_noted() {
    let mut model = Recorder::new("I see a note saying an image was left out.");
    model.fallbacks = vec![ContentFallback {
        provider: "recorder",
        kind: "image",
        mime_type: "image/png".to_owned(),
        message_id: "m1".to_owned(),
    }];
    let h = Harness::with(model, LlmOptions::new("m"));
    h.write("pic.png", &encode(&picture(10, 10), ImageFormat::Png));
    let answer = h.call(json!({"path": "pic.png"})).await.unwrap();
    assert!(
        answer.starts_with("I see a note saying an image was left out."),
        "{answer}"
    );
    assert!(answer.contains("did not see"), "{answer}");
    assert!(answer.contains("pic.png"), "{answer}");
    assert_eq!(h.model.calls().len(), 1);

    // Without fallbacks, no note.
    let h = Harness::new();
    h.write("pic.png", &encode(&picture(10, 10), ImageFormat::Png));
    let answer = h.call(json!({"path": "pic.png"})).await.unwrap();
    assert_eq!(answer, "It is a file.");
}

#[tokio::test]
async fn without_the_turns_model_it_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), b"a\n").unwrap();
    let ctx = ToolContext::new("s").with_state(Sandbox::new(dir.path()));
    let mut registry = ToolRegistry::new();
    registry.register(analyze_media::TOOL).unwrap();
    let e = registry
        .get("analyze_media")
        .unwrap()
        .call(json!({"path": "a.txt"}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("turn's model"), "{e}");
}

#[test]
fn the_fixture_wav_is_a_wav() {
    let w = wav();
    assert_eq!(&w[..4], b"RIFF");
    assert_eq!(&w[8..12], b"WAVE");
    assert_eq!(
        u32::from_le_bytes(w[4..8].try_into().unwrap()) as usize,
        w.len() - 8
    );
}

#[tokio::test]
async fn an_image_over_40_megapixels_is_refused_by_its_header() {
    // 8,000 x 6,000 (48 MP): refused from the header, before decoding.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&8_000u32.to_be_bytes());
    ihdr.extend_from_slice(&6_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut png, *b"IHDR", &ihdr);
    chunk(
        &mut png,
        *b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
        ],
    );
    chunk(&mut png, *b"IEND", &[]);
    let h = Harness::new();
    h.write("wide.png", &png);
    h.refused(
        "wide.png",
        &["'wide.png' is a 8000 x 6000 image, over the 40 megapixels"],
    )
    .await;
}
