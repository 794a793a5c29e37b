//! [`WireFormat`]: what differs between providers. The shared backend
//! ([`crate::backend`]) reads the history, lowers the tools and sends the
//! request; a wire format only names its provider, says where and how to
//! authenticate, encodes a [`Request`] into its body, and decodes a
//! response into an [`AssistantTurn`] through the shared
//! [`TurnBuilder`](crate::turn::TurnBuilder).

use std::fmt;

use kesoku_core::lowering::{Dialect, ToolNames};
use serde_json::Value;

use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::history::Item;
use crate::options::LlmOptions;
use crate::schemas::LoweredTools;
use crate::turn::AssistantTurn;

/// One request, provider-neutral: what a wire format encodes.
pub(crate) struct Request<'a> {
    /// The history, read once ([`crate::history::read`]).
    pub(crate) history: &'a [Item<'a>],
    /// The tools as the caller declared them.
    pub(crate) tools: &'a [ToolDeclaration],
    /// The same tools lowered for this provider, cached per set.
    pub(crate) lowered: &'a LoweredTools,
    pub(crate) options: &'a LlmOptions,
}

impl<'a> Request<'a> {
    /// Each tool with its wire name and lowered schema (if sent).
    pub(crate) fn declarations(
        &self,
    ) -> impl Iterator<Item = (&'a ToolDeclaration, &'a str, Option<&'a Value>)> {
        let names = &self.lowered.names;
        self.tools
            .iter()
            .zip(&self.lowered.schemas)
            .map(move |(t, s)| (t, names.to_wire(&t.name), s.as_ref()))
    }

    /// How tool names are mapped for the provider.
    pub(crate) fn names(&self) -> &'a ToolNames {
        &self.lowered.names
    }
}

/// A provider's wire format.
///
/// Streaming (the next issue) adds, beside [`decode`](Self::decode), a
/// `stream_path` and a `decode_event(&self, event, &mut TurnBuilder)` that
/// reads one server-sent event into the same builder the one-shot decoder
/// fills, so a streamed turn ends as the same [`AssistantTurn`].
pub(crate) trait WireFormat: Default + fmt::Debug + Send + Sync + 'static {
    /// The provider's name, for logs and errors.
    const NAME: &'static str;
    /// The API's address.
    const DEFAULT_BASE_URL: &'static str;
    /// The environment variables the official SDK reads the key from, in
    /// order.
    const KEY_VARS: &'static [&'static str];
    /// The environment variable the official SDK reads the address from.
    const BASE_URL_VAR: &'static str;
    /// The naming rules tool names are mapped to.
    const NAMES: Dialect;

    /// The dialect tool schemas are lowered to.
    fn schema_dialect(&self) -> Dialect;

    /// Whether `tool` is declared with a schema (only those are lowered).
    fn sends_schema(&self, _tool: &ToolDeclaration) -> bool {
        true
    }

    /// The path, after the base address, to POST to.
    fn path(&self, options: &LlmOptions) -> String;

    /// The authentication headers for `key` (none when it is `None`,
    /// unless the provider wants an empty one).
    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)>;

    /// The request body. Blocks the provider cannot take where they stand
    /// are sent as text notes and recorded in `fallbacks`.
    fn encode(&self, request: &Request<'_>, fallbacks: &mut Vec<ContentFallback>) -> Value;

    /// Reads a whole (non-streamed) response.
    fn decode(
        &self,
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError>;
}

/// Appends `parts` to the last wire message when it has the same role, else
/// starts a new one: Claude and Gemini want roles to alternate.
pub(crate) fn push_merged(
    wire: &mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
    parts: Vec<Value>,
) {
    match wire.last_mut() {
        Some((last, p)) if *last == role => p.extend(parts),
        _ => wire.push((role, parts)),
    }
}
