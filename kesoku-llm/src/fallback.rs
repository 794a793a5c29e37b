//! [`ContentFallback`]: the report of a block a provider could not take.
//! The blocks themselves, [`ContentBlock`](kesoku_core::ContentBlock), live
//! in `kesoku-core`, since tools return them.

/// A block a provider could not take, replaced by a text note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentFallback {
    /// The provider.
    pub provider: &'static str,
    /// The block's kind.
    pub kind: &'static str,
    /// The block's MIME type.
    pub mime_type: String,
    /// The id of the message it was in.
    pub message_id: String,
}
