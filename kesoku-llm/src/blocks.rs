//! A message's content blocks, read where they are stored.
//!
//! Blocks sit in a message's metadata with their bytes as base64 text,
//! and every provider wants base64 text again. Decoding them into
//! [`ContentBlock`]s and encoding them back on every request would copy
//! and convert each attachment twice per call, and an agent re-sends its
//! whole history on every call. A [`Block`] borrows the stored text
//! instead; only a block sent as a text note, or as plain text, is
//! decoded.
//!
//! The stored form is [`ContentBlock`]'s serde form, and a list is read
//! exactly when `ContentBlock` would read it (canonical base64 included),
//! so the borrowed text is what encoding the decoded bytes would give.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kesoku_core::{ContentBlock, Message, keys};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The content blocks stored in a message's metadata; none when there are
/// none or they cannot be read.
pub fn content_blocks(message: &Message) -> Vec<ContentBlock> {
    message
        .metadata
        .get(keys::CONTENT_BLOCKS)
        // Read from the borrowed value: no copy of the metadata.
        .and_then(|v| Vec::<ContentBlock>::deserialize(v).ok())
        .unwrap_or_default()
}

/// One content block, borrowed from the message it is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block<'a> {
    /// Plain text.
    Text(&'a str),
    /// An image.
    Image(Binary<'a>),
    /// A document, with its file name if known.
    Document(Binary<'a>, Option<&'a str>),
    /// Audio or video.
    Media(Binary<'a>),
}

/// A binary block's MIME type and bytes, as the stored base64 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binary<'a> {
    pub(crate) mime_type: &'a str,
    /// Canonical standard base64, checked when the block was read.
    pub(crate) base64: &'a str,
}

impl Binary<'_> {
    /// The bytes (checked to decode when the block was read).
    pub(crate) fn bytes(&self) -> Vec<u8> {
        STANDARD.decode(self.base64).unwrap_or_default()
    }
}

impl Block<'_> {
    /// The block's kind, as [`ContentBlock::kind`] names it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Block::Text(_) => "text",
            Block::Image(_) => "image",
            Block::Document(..) => "document",
            Block::Media(_) => "media",
        }
    }

    /// The note sent instead of this block where `provider` cannot take it
    /// ([`ContentBlock::fallback_text`], which needs the bytes' size).
    pub(crate) fn fallback_text(&self, provider: &str) -> String {
        self.to_content_block().fallback_text(provider)
    }

    fn to_content_block(self) -> ContentBlock {
        match self {
            Block::Text(text) => ContentBlock::text(text),
            Block::Image(b) => ContentBlock::image(b.mime_type, b.bytes()),
            Block::Document(b, name) => ContentBlock::Document {
                mime_type: b.mime_type.to_owned(),
                data: b.bytes(),
                name: name.map(str::to_owned),
            },
            Block::Media(b) => ContentBlock::media(b.mime_type, b.bytes()),
        }
    }
}

/// The blocks of `message`; none when there are none or the list cannot be
/// read as [`ContentBlock`]s (then [`content_blocks`] reads none either).
/// `scratch` is reused to check the base64 of each block.
pub(crate) fn read<'a>(message: &'a Message, scratch: &mut Vec<u8>) -> Vec<Block<'a>> {
    let Some(stored) = message.metadata.get(keys::CONTENT_BLOCKS) else {
        return Vec::new();
    };
    let Some(list) = stored.as_array() else {
        return Vec::new();
    };
    list.iter()
        .map(|v| block(v.as_object()?, scratch))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// One stored block, if `ContentBlock` would read it.
fn block<'a>(m: &'a Map<String, Value>, scratch: &mut Vec<u8>) -> Option<Block<'a>> {
    let kind = m.get("type")?.as_str()?;
    if kind == "text" {
        return Some(Block::Text(m.get("text")?.as_str()?));
    }
    let binary = Binary {
        mime_type: m.get("mime_type")?.as_str()?,
        base64: m.get("data")?.as_str()?,
    };
    scratch.clear();
    STANDARD.decode_vec(binary.base64, scratch).ok()?;
    match kind {
        "image" => Some(Block::Image(binary)),
        "media" => Some(Block::Media(binary)),
        "document" => {
            let name = match m.get("name") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_str()?),
            };
            Some(Block::Document(binary, name))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kesoku_core::{MessageType, Role};
    use serde_json::json;

    use super::*;

    fn with_blocks(stored: Value) -> Message {
        let mut m = Message::new("s", Role::User, MessageType::Text, "");
        m.metadata.insert(keys::CONTENT_BLOCKS.into(), stored);
        m
    }

    /// Whatever the stored list, the borrowed read agrees with
    /// `ContentBlock`'s, and its base64 is what encoding the bytes gives.
    #[test]
    fn reads_exactly_what_content_block_reads() {
        let mut named = ContentBlock::document("application/pdf", b"%PDF".to_vec());
        if let ContentBlock::Document { name, .. } = &mut named {
            *name = Some("a.pdf".into());
        }
        let good = [
            ContentBlock::text("note"),
            ContentBlock::image("image/png", vec![1, 2, 3]),
            ContentBlock::document("text/plain", b"plain".to_vec()),
            named,
            ContentBlock::media("audio/wav", vec![0; 10]),
        ];
        let stored = [
            serde_json::to_value(&good).unwrap(),
            json!([{"type": "document", "mime_type": "a/b", "data": "AQID", "name": null}]),
            json!([]),
            json!({"type": "text", "text": "not a list"}),
            json!([{"type": "image", "mime_type": "image/png"}]),
            json!([{"type": "image", "mime_type": "image/png", "data": "AQI"}]),
            json!([{"type": "image", "mime_type": "image/png", "data": "AQJ="}]),
            json!([{"type": "image", "mime_type": "image/png", "data": "AQ ID"}]),
            json!([{"type": "document", "mime_type": "a/b", "data": "", "name": 5}]),
            json!([{"type": "video", "mime_type": "v/x", "data": ""}]),
            json!([{"type": "text"}]),
            json!(["text"]),
            json!([{"type": "text", "text": "ok"}, {"type": "image"}]),
        ];
        let mut scratch = Vec::new();
        for stored in stored {
            let m = with_blocks(stored.clone());
            let borrowed = read(&m, &mut scratch);
            let owned = content_blocks(&m);
            assert_eq!(borrowed.len(), owned.len(), "{stored}");
            for (b, o) in borrowed.iter().zip(&owned) {
                assert_eq!(b.to_content_block(), *o, "{stored}");
                assert_eq!(b.kind(), o.kind());
                let base64 = match b {
                    Block::Text(_) => None,
                    Block::Image(x) | Block::Document(x, _) | Block::Media(x) => {
                        Some(x.base64.to_owned())
                    }
                };
                assert_eq!(base64, o.base64(), "{stored}");
                assert_eq!(b.fallback_text("P"), o.fallback_text("P"));
            }
        }
        assert_eq!(
            read(
                &with_blocks(serde_json::to_value(&good).unwrap()),
                &mut scratch
            )
            .len(),
            5
        );
    }
}
