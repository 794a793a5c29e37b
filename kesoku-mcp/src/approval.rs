//! Asking the client's user before a tool that needs approval runs
//! (`#[tool(approval)]`, [`Tool::needs_approval`](kesoku_core::Tool::needs_approval)).
//!
//! How depends on the protocol the request speaks:
//! - before 2026-07-28, the server sends `elicitation/create` and waits for
//!   the answer. That needs a connection that carries requests from the
//!   server: stdio does; stateless HTTP does not (the answer would reach
//!   an instance that never asked), so such a client cannot be asked;
//! - from 2026-07-28, which forbids requests from the server, the call is
//!   answered with an `input_required` result holding the question and a
//!   sealed `requestState`. The client asks its user and calls again with
//!   the answer and the state, on any instance that holds the key.
//!
//! The client is trusted to ask its user (as any MCP client is trusted to
//! relay what its user says); the server makes sure that an answer counts
//! only for what was asked. The sealed state binds it to the call: the
//! tool, its arguments, a deadline and a nonce redeemed once (by this
//! instance: instances sharing a key each remember their own). An answer
//! cannot be moved to other arguments, or replayed here to run the tool
//! twice. A client that cannot be asked gets a refusal, and so does every
//! answer but an explicit yes: nothing runs that was not allowed.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequiredResult, ProtocolVersion, RequestStateCodec, SealOptions, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext, ServiceError};
use serde_json::Value;

/// The key of the question in `inputRequests` and of its answer in
/// `inputResponses`.
const QUESTION: &str = "approval";

/// The most answers remembered at once (each for twice the timeout):
/// past it, questions are refused rather than memory grown without end.
const MAX_REDEEMED: usize = 1 << 20;

/// The longest time a person may be given to answer: past it, a deadline
/// is this (an `Instant` cannot reach much further).
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// How much of the arguments a question shows.
const SHOWN: usize = 2000;

/// What to do with a call to a tool that needs approval.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// A person said yes: run it.
    Run,
    /// Do not run it; the text is the error result the model reads.
    Refuse(String),
    /// Answer with this `input_required` result and wait for the retry.
    Ask(Box<InputRequiredResult>),
}

/// Asks, and checks answers. One per server, shared by its connections.
pub(crate) struct Asker {
    codec: RequestStateCodec,
    /// How long a person has to answer.
    timeout: Duration,
    /// Nonces of sealed questions already answered.
    redeemed: Mutex<Redeemed>,
}

/// Answered nonces, and the order they are forgotten in: each is kept
/// twice the timeout (the codec refuses its seal after one; the margin
/// covers the wall clock, which the seal reads, stepping back).
#[derive(Default)]
struct Redeemed {
    nonces: HashSet<u64>,
    /// Oldest first; every entry is kept equally long, so this is also
    /// the order they expire in.
    until: VecDeque<(Instant, u64)>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What the sealed `requestState` holds; the tool and its arguments are
/// bound as associated data, not stored.
#[derive(serde::Serialize, serde::Deserialize)]
struct Sealed {
    nonce: u64,
}

/// Where the question can go, for the refusal's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// A connection that carries requests both ways (stdio, a byte stream).
    Duplex,
    /// Stateless streamable HTTP: no request from the server can be
    /// answered.
    StatelessHttp,
}

impl Asker {
    /// An asker with `key` sealing its questions (a random one when
    /// `None`), giving people `timeout` to answer.
    pub(crate) fn new(key: Option<[u8; 32]>, timeout: Duration) -> Self {
        let key = key.unwrap_or_else(random_key);
        Asker {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            timeout: timeout.min(MAX_TIMEOUT),
            redeemed: Mutex::new(Redeemed::default()),
        }
    }

    /// Decides what happens to `request`, a call to a tool that needs
    /// approval: ask, refuse, or run on a yes.
    pub(crate) async fn decide(
        &self,
        request: &CallToolRequestParams,
        arguments: &Value,
        context: &RequestContext<RoleServer>,
        transport: Transport,
    ) -> Verdict {
        let name = request.name.as_ref();
        // Modern if the request or the session says so: a request that
        // names an older version in its `_meta` does not turn a modern
        // session's client into one that answers requests.
        let session = context.peer.peer_info().map(|i| i.protocol_version.clone());
        let modern = [context.protocol_version(), session]
            .into_iter()
            .flatten()
            .any(|v| v >= ProtocolVersion::V_2026_07_28);
        if modern && (request.request_state.is_some() || request.input_responses.is_some()) {
            return self.answered(request, arguments);
        }
        if !can_elicit(context) {
            return Verdict::Refuse(cannot_ask(name, modern, transport));
        }
        let question = question(name, arguments);
        if modern {
            return self.ask(name, arguments, question);
        }
        if transport == Transport::StatelessHttp {
            return Verdict::Refuse(cannot_ask(name, modern, transport));
        }
        self.elicit(name, question, context).await
    }

    /// Asks with `elicitation/create` and waits for the answer, the
    /// timeout, or the call's cancellation; the question is withdrawn
    /// (`notifications/cancelled`) when the answer can no longer count.
    async fn elicit(
        &self,
        name: &str,
        question: ElicitRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Verdict {
        let sent = context
            .peer
            .send_cancellable_request(
                ServerRequest::ElicitRequest(ElicitRequest::new(question)),
                PeerRequestOptions::with_timeout(self.timeout),
            )
            .await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(e) => return Verdict::Refuse(denied(name, &format!("the question failed: {e}"))),
        };
        let (id, peer) = (handle.id.clone(), handle.peer.clone());
        // On timeout, rmcp withdraws the question itself.
        tokio::select! {
            answer = handle.await_response() => match answer {
                Ok(ClientResult::ElicitResult(answer)) => verdict(name, &answer),
                Ok(_) => Verdict::Refuse(denied(name, "the client answered something else")),
                Err(ServiceError::Timeout { .. }) => Verdict::Refuse(denied(
                    name,
                    &format!("no answer came within {:?}", self.timeout),
                )),
                Err(e) => Verdict::Refuse(denied(name, &format!("the question failed: {e}"))),
            },
            () = context.ct.cancelled() => {
                let withdrawn = CancelledNotificationParam::new(
                    Some(id),
                    Some("the tool call was cancelled".into()),
                );
                let _ = peer.notify_cancelled(withdrawn).await;
                Verdict::Refuse(denied(name, "the call was cancelled"))
            }
        }
    }

    /// The `input_required` result carrying the question, sealed to this
    /// call.
    fn ask(&self, name: &str, arguments: &Value, question: ElicitRequestParams) -> Verdict {
        let bound = binding(name, arguments);
        let sealed = self.codec.seal_json_with(
            &Sealed {
                nonce: random_nonce(),
            },
            &SealOptions::new()
                .associated_data(bound.as_bytes())
                .ttl(self.timeout),
        );
        let state = match sealed {
            Ok(state) => state,
            Err(e) => return Verdict::Refuse(denied(name, &format!("the question failed: {e}"))),
        };
        let requests = BTreeMap::from([(
            QUESTION.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(question)),
        )]);
        Verdict::Ask(Box::new(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }

    /// A retry after an `input_required` result: the answer counts only
    /// with a state this server sealed for this very call, once.
    fn answered(&self, request: &CallToolRequestParams, arguments: &Value) -> Verdict {
        let name = request.name.as_ref();
        let unverified = || {
            Verdict::Refuse(denied(
                name,
                "its answer could not be verified (the question expired, or was asked for other arguments); call again to be asked again",
            ))
        };
        let Some(state) = request.request_state.as_deref() else {
            return Verdict::Refuse(denied(
                name,
                "the answer came without the requestState the question carried; call again to be asked again",
            ));
        };
        let bound = binding(name, arguments);
        // One answer for every way a seal fails, as the codec asks: the
        // details would only help a forger.
        let Ok(Sealed { nonce }) = self.codec.open_json_with(state, bound.as_bytes()) else {
            return unverified();
        };
        let Some(answer) = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(QUESTION))
        else {
            return Verdict::Refuse(denied(name, "the client sent no answer to the question"));
        };
        let answer: ElicitResult = match serde_json::from_value(answer.clone()) {
            Ok(answer) => answer,
            Err(e) => {
                return Verdict::Refuse(denied(
                    name,
                    &format!("the client's answer is not an elicitation result: {e}"),
                ));
            }
        };
        match self.redeem(nonce) {
            Redeem::First => verdict(name, &answer),
            Redeem::Again => Verdict::Refuse(denied(
                name,
                "this answer was used already; call again to be asked again",
            )),
            Redeem::Full => Verdict::Refuse(denied(
                name,
                "this server holds too many answers now; call again later",
            )),
        }
    }

    /// Marks `nonce` answered, unless it was already.
    fn redeem(&self, nonce: u64) -> Redeem {
        let now = Instant::now();
        let mut redeemed = self
            .redeemed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Redeemed { nonces, until } = &mut *redeemed;
        while let Some(&(at, old)) = until.front()
            && at <= now
        {
            until.pop_front();
            nonces.remove(&old);
        }
        if nonces.contains(&nonce) {
            return Redeem::Again;
        }
        if nonces.len() >= MAX_REDEEMED {
            return Redeem::Full;
        }
        nonces.insert(nonce);
        until.push_back((now + 2 * self.timeout, nonce));
        Redeem::First
    }
}

/// What [`Asker::redeem`] found.
#[derive(Debug, PartialEq, Eq)]
enum Redeem {
    First,
    Again,
    Full,
}

/// Whether the client says it can show a form to its user.
fn can_elicit(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // A capability naming neither mode means form (2025-06-18).
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The question: may `name` run with `arguments`? A yes/no, and a reason
/// the model reads when the answer is no.
fn question(name: &str, arguments: &Value) -> ElicitRequestParams {
    let shown = match arguments {
        Value::Object(m) if m.is_empty() => "no arguments".to_owned(),
        Value::Null => "no arguments".to_owned(),
        other => shown(&other.to_string()),
    };
    let schema = ElicitationSchema::builder()
        .required_bool_with("approve", |b| {
            b.title("Allow this call")
                .description(format!("Let `{name}` run with these arguments."))
        })
        .optional_string_with("reason", |s| {
            s.title("Reason")
                .description("Why not (the model reads it).")
        })
        .build()
        // Both properties exist, so the builder's only failures cannot
        // happen; an empty schema would still ask a yes/no by its action.
        .unwrap_or_else(|_| ElicitationSchema::new(BTreeMap::new()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Allow the tool `{name}` to run with {shown}?"),
        requested_schema: schema,
    }
}

/// What an answer means: only an accepted form whose `approve` is true
/// runs the call.
fn verdict(name: &str, answer: &ElicitResult) -> Verdict {
    match answer.action {
        ElicitationAction::Accept => {
            let content = answer.content.as_ref();
            match content
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
            {
                Some(true) => Verdict::Run,
                Some(false) => {
                    let reason = content
                        .and_then(|c| c.get("reason"))
                        .and_then(Value::as_str)
                        .map(str::trim)
                        .filter(|r| !r.is_empty());
                    Verdict::Refuse(match reason {
                        Some(r) => denied(name, r),
                        None => format!("the call to `{name}` was not approved"),
                    })
                }
                None => Verdict::Refuse(denied(name, "the answer said neither yes nor no")),
            }
        }
        ElicitationAction::Decline => Verdict::Refuse(denied(name, "the user declined")),
        ElicitationAction::Cancel => {
            Verdict::Refuse(denied(name, "the user dismissed the question"))
        }
        // An action newer than this server: not a yes.
        _ => Verdict::Refuse(denied(name, "the answer said neither yes nor no")),
    }
}

/// Arguments as a person reads them: characters that reorder text (and
/// could make `rm a` read as `a mr`) escaped, and a long text cut with a
/// note saying so.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(SHOWN + 64));
    for (count, c) in text.chars().enumerate() {
        if count == SHOWN {
            let rest = text.chars().count() - SHOWN;
            let _ = write!(out, "… ({rest} more characters)");
            break;
        }
        if matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        {
            let _ = write!(out, "\\u{{{:04X}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

fn denied(name: &str, why: &str) -> String {
    format!("the call to `{name}` was not approved: {why}")
}

fn cannot_ask(name: &str, modern: bool, transport: Transport) -> String {
    let why = if !modern && transport == Transport::StatelessHttp {
        "it needs a person's approval, and this stateless HTTP server cannot send the question on protocols before 2026-07-28 (2026-07-28 asks through `input_required`; stdio asks on any protocol)"
    } else {
        "it needs a person's approval, and this client cannot be asked (it does not declare form elicitation)"
    };
    format!("`{name}` was not run: {why}")
}

/// The call an answer is bound to: the tool, then its arguments with keys
/// sorted, so a client that re-orders keys on its retry is still matched.
fn binding(name: &str, arguments: &Value) -> String {
    let mut out = String::with_capacity(64);
    out.push_str(name);
    out.push('\0');
    canonical(arguments, &mut out);
    out
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:", Value::from(key.as_str()));
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    fill_random(&mut key);
    key
}

fn random_nonce() -> u64 {
    let mut bytes = [0u8; 8];
    fill_random(&mut bytes);
    u64::from_le_bytes(bytes)
}

fn fill_random(bytes: &mut [u8]) {
    use ring::rand::SecureRandom as _;
    // The system's generator does not fail on the platforms we build for;
    // if it ever did, a server sealing with a guessable key must not start.
    ring::rand::SystemRandom::new()
        .fill(bytes)
        .expect("the system's random number generator failed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(value: Value) -> ElicitResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_an_accepted_yes_runs() {
        let yes = answer(json!({"action": "accept", "content": {"approve": true}}));
        assert!(matches!(verdict("t", &yes), Verdict::Run));
        for (value, says) in [
            (
                json!({"action": "accept", "content": {"approve": false, "reason": " keep it "}}),
                "the call to `t` was not approved: keep it",
            ),
            (
                json!({"action": "accept", "content": {"approve": false, "reason": ""}}),
                "the call to `t` was not approved",
            ),
            (
                json!({"action": "accept", "content": {"approve": "yes"}}),
                "neither yes nor no",
            ),
            (json!({"action": "accept"}), "neither yes nor no"),
            (json!({"action": "decline"}), "the user declined"),
            (json!({"action": "cancel"}), "dismissed"),
        ] {
            match verdict("t", &answer(value.clone())) {
                Verdict::Refuse(text) => assert!(text.contains(says), "{value}: {text}"),
                other => panic!("{value}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_binding_ignores_key_order_but_not_values() {
        let a = binding("t", &json!({"x": 1, "y": {"b": [1, 2], "a": "s"}}));
        let b = binding("t", &json!({"y": {"a": "s", "b": [1, 2]}, "x": 1}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            binding("t", &json!({"x": 2, "y": {"a": "s", "b": [1, 2]}}))
        );
        assert_ne!(
            a,
            binding("u", &json!({"x": 1, "y": {"b": [1, 2], "a": "s"}}))
        );
        // A key holding `":` cannot make two argument sets look alike.
        assert_ne!(
            binding("t", &json!({"a\":1,\"b": 2})),
            binding("t", &json!({"a": 1, "b": 2}))
        );
    }

    #[test]
    fn a_nonce_is_redeemed_once_and_forgotten_after_twice_the_timeout() {
        let asker = Asker::new(None, Duration::from_millis(20));
        assert_eq!(asker.redeem(7), Redeem::First);
        assert_eq!(asker.redeem(7), Redeem::Again);
        assert_eq!(asker.redeem(8), Redeem::First);
        std::thread::sleep(Duration::from_millis(50));
        // Forgotten (its seal expired long before), and the queue with it.
        assert_eq!(asker.redeem(9), Redeem::First);
        let redeemed = asker.redeemed.lock().unwrap();
        assert_eq!(redeemed.nonces.len(), 1);
        assert_eq!(redeemed.until.len(), 1);
    }

    #[test]
    fn a_timeout_past_the_longest_is_clamped() {
        let asker = Asker::new(None, Duration::MAX);
        assert_eq!(asker.timeout, MAX_TIMEOUT);
        assert_eq!(asker.redeem(1), Redeem::First);
    }

    #[test]
    fn questions_escape_reordering_characters_and_cut_long_arguments() {
        assert_eq!(shown("rm \u{202E}txt.exe"), "rm \\u{202E}txt.exe");
        let long = "x".repeat(SHOWN + 5);
        let cut = shown(&long);
        assert!(cut.ends_with("… (5 more characters)"), "{cut}");
        assert_eq!(shown("short"), "short");
    }

    #[test]
    fn the_question_is_a_yes_no_form_naming_the_call() {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = question("delete_note", &json!({"number": 2}))
        else {
            panic!("not a form");
        };
        assert_eq!(
            message,
            "Allow the tool `delete_note` to run with {\"number\":2}?"
        );
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
        assert_eq!(schema["properties"]["reason"]["type"], "string");
        assert_eq!(schema["required"], json!(["approve"]));
    }
}
