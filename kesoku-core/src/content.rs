//! [`ContentBlock`]: multimodal content (the seed system's text, image,
//! document and media blocks), which tools return and backends send.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// One piece of content: text, or bytes with a MIME type.
///
/// Serialized with base64 data, so blocks can sit in a message's metadata:
///
/// ```
/// use kesoku_core::ContentBlock;
///
/// let png = ContentBlock::image("image/png", vec![0x89, b'P', b'N', b'G']);
/// let json = serde_json::to_value(&png).unwrap();
/// assert_eq!(json, serde_json::json!({"type": "image", "mime_type": "image/png", "data": "iVBORw=="}));
/// assert_eq!(serde_json::from_value::<ContentBlock>(json).unwrap(), png);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
    Image {
        /// Its MIME type.
        mime_type: String,
        /// Its bytes.
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    /// A document (`application/pdf`, `text/plain`, ...).
    Document {
        /// Its MIME type.
        mime_type: String,
        /// Its bytes.
        #[serde(with = "b64")]
        data: Vec<u8>,
        /// A file name, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Audio or video.
    Media {
        /// Its MIME type.
        mime_type: String,
        /// Its bytes.
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// An image block.
    pub fn image(mime_type: impl Into<String>, data: Vec<u8>) -> Self {
        ContentBlock::Image {
            mime_type: mime_type.into(),
            data,
        }
    }

    /// A document block.
    pub fn document(mime_type: impl Into<String>, data: Vec<u8>) -> Self {
        ContentBlock::Document {
            mime_type: mime_type.into(),
            data,
            name: None,
        }
    }

    /// An audio or video block.
    pub fn media(mime_type: impl Into<String>, data: Vec<u8>) -> Self {
        ContentBlock::Media {
            mime_type: mime_type.into(),
            data,
        }
    }

    /// The block's kind, for reports: `text`, `image`, `document`, `media`.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image { .. } => "image",
            ContentBlock::Document { .. } => "document",
            ContentBlock::Media { .. } => "media",
        }
    }

    /// The MIME type, for binary blocks.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { .. } => None,
            ContentBlock::Image { mime_type, .. }
            | ContentBlock::Document { mime_type, .. }
            | ContentBlock::Media { mime_type, .. } => Some(mime_type),
        }
    }

    /// The bytes as standard base64, for binary blocks.
    pub fn base64(&self) -> Option<String> {
        match self {
            ContentBlock::Text { .. } => None,
            ContentBlock::Image { data, .. }
            | ContentBlock::Document { data, .. }
            | ContentBlock::Media { data, .. } => {
                Some(base64::engine::general_purpose::STANDARD.encode(data))
            }
        }
    }

    /// The note sent instead of a block a provider cannot take, so the model
    /// knows something was there.
    pub fn fallback_text(&self, provider: &str) -> String {
        let size = match self {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Image { data, .. }
            | ContentBlock::Document { data, .. }
            | ContentBlock::Media { data, .. } => data.len(),
        };
        format!(
            "[{} attachment ({}, {size} bytes) omitted: {provider} does not accept this kind of content]",
            self.kind(),
            self.mime_type().unwrap_or("text"),
        )
    }
}

/// Serde for bytes as base64 text.
mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}
