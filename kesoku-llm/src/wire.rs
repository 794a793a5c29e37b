//! [`WireFormat`]: what differs between providers. The shared backend
//! ([`crate::backend`]) reads the history, lowers the tools and sends the
//! request; a wire format only names its provider, says where and how to
//! authenticate, encodes the history into wire messages and a [`Request`]
//! into the rest of its body, and decodes a
//! response into an [`AssistantTurn`] through the shared
//! [`TurnBuilder`](crate::turn::TurnBuilder).

use std::fmt;

use kesoku_core::lowering::{Dialect, ToolNames};
use serde_json::{Map, Value};

use crate::declaration::ToolDeclaration;
use crate::error::LlmError;
use crate::fallback::ContentFallback;
use crate::future::LlmFuture;
use crate::history::Item;
use crate::key::ApiKey;
use crate::options::LlmOptions;
use crate::schemas::LoweredTools;
use crate::stream::StreamDecoder;
use crate::turn::AssistantTurn;

/// One request, provider-neutral: what a wire format encodes around the
/// history.
pub(crate) struct Request<'a> {
    /// The tools as the caller declared them.
    pub(crate) tools: &'a [ToolDeclaration],
    /// The same tools lowered for this provider, cached per set.
    pub(crate) lowered: &'a LoweredTools,
    pub(crate) options: &'a LlmOptions,
    /// The typed answer asked for, its schema lowered for this provider.
    pub(crate) output: Option<Output<'a>>,
    /// The stored response the history goes on from, when the format sent
    /// only what came after it ([`WireHistory::previous`]).
    pub(crate) previous: Option<&'a str>,
}

/// A typed answer's shape as a wire format sends it.
#[derive(Clone, Copy)]
pub(crate) struct Output<'a> {
    /// The shape's name.
    pub(crate) name: &'a str,
    /// Its schema, lowered to [`WireFormat::output_dialect`].
    pub(crate) schema: &'a Value,
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

/// A history, encoded: the wire messages in order, each with the index of
/// the [`Item`] it starts with, and the system texts a format sends apart
/// from the messages, each with its item's index.
///
/// A wire message's first item always starts it, whatever follows; so the
/// encoding of the items from there on does not depend on those before
/// (but for the call a result pairs with, which [`Item`] carries), and the
/// backend can keep the messages before the last one for the next request
/// of the same session (see `backend.rs`).
#[derive(Debug, Default)]
pub(crate) struct WireHistory<'a> {
    pub(crate) messages: Vec<(usize, Value)>,
    pub(crate) system: Vec<(usize, &'a str)>,
    /// The provider's id of a stored response the messages go on from
    /// (OpenAI's `previous_response_id`): the items up to it were not
    /// encoded. Only a format that keeps no prefix
    /// ([`WireFormat::keeps_prefix`]) sets it.
    pub(crate) previous: Option<&'a str>,
}

/// A provider's wire format.
///
/// For streaming it adds the streamed request's path and fields, and a
/// [`StreamDecoder`] that rebuilds the one-shot response body from the
/// events, which [`decode`](Self::decode) then reads: a streamed turn is
/// the same [`AssistantTurn`] as a completed one.
pub(crate) trait WireFormat: Default + fmt::Debug + Send + Sync + 'static {
    /// Reads a streamed reply.
    type Decoder: StreamDecoder;

    /// The provider's name, for logs and errors.
    const NAME: &'static str;
    /// The API's address.
    const DEFAULT_BASE_URL: &'static str;
    /// The model an agent asks for when none is set: the provider's
    /// general one.
    const DEFAULT_MODEL: &'static str;
    /// The most tokens a request to `model` may hold, for the model
    /// families the provider documents; `None` for others.
    fn context_window(model: &str) -> Option<u64>;
    /// The environment variables the official SDK reads the key from, in
    /// order.
    const KEY_VARS: &'static [&'static str];
    /// The environment variable the official SDK reads the address from.
    const BASE_URL_VAR: &'static str;
    /// The naming rules tool names are mapped to.
    const NAMES: Dialect;

    /// The dialect tool schemas are lowered to.
    fn schema_dialect(&self) -> Dialect;

    /// The dialect a typed answer's schema is lowered to (the provider's
    /// structured-output mode).
    fn output_dialect(&self) -> Dialect;

    /// Whether `tool` is declared with a schema (only those are lowered).
    fn sends_schema(&self, _tool: &ToolDeclaration) -> bool {
        true
    }

    /// The path, after the base address, to POST to.
    fn path(&self, options: &LlmOptions) -> String;

    /// The path of a streamed request (the same by default).
    fn stream_path(&self, options: &LlmOptions) -> String {
        self.path(options)
    }

    /// Adds what asks for a streamed answer to the body's fields.
    fn stream_fields(&self, _fields: &mut Map<String, Value>) {}

    /// A credential fetched for each request, sent in place of the
    /// endpoint's key (a token provider's bearer token); none by default.
    fn fresh_credential(&self) -> Option<LlmFuture<'_, Result<ApiKey, LlmError>>> {
        None
    }

    /// Whether the backend may keep a session's encoded history and reuse
    /// it for the session's next request (see `prefix.rs`); a format whose
    /// encoding of a message depends on later ones says no.
    fn keeps_prefix(&self) -> bool {
        true
    }

    /// The authentication headers for `key` (none when it is `None`,
    /// unless the provider wants an empty one).
    fn auth_headers(&self, key: Option<&str>) -> Vec<(&'static str, String)>;

    /// The body's key for the history's messages.
    const HISTORY_KEY: &'static str;

    /// The history's wire messages. Blocks the provider cannot take where
    /// they stand are sent as text notes and recorded in `fallbacks`.
    fn encode_history<'a>(
        &self,
        history: &[Item<'a>],
        names: &ToolNames,
        fallbacks: &mut Vec<ContentFallback>,
    ) -> WireHistory<'a>;

    /// The rest of the body: everything but [`HISTORY_KEY`](Self::HISTORY_KEY),
    /// with the system texts [`encode_history`](Self::encode_history) set
    /// apart, in order.
    fn encode_body(&self, request: &Request<'_>, system: &[&str]) -> Map<String, Value>;

    /// Reads a whole (non-streamed) response.
    fn decode(
        &self,
        session_id: &str,
        body: &Value,
        names: &ToolNames,
    ) -> Result<AssistantTurn, LlmError>;
}

/// Appends `parts` (from item `item`) to the last wire message when it has
/// the same role, else starts a new one: Claude and Gemini want roles to
/// alternate.
pub(crate) fn push_merged(
    wire: &mut Vec<(usize, &'static str, Vec<Value>)>,
    item: usize,
    role: &'static str,
    parts: Vec<Value>,
) {
    match wire.last_mut() {
        Some((_, last, p)) if *last == role => p.extend(parts),
        _ => wire.push((item, role, parts)),
    }
}
