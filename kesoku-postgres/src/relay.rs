//! Deltas between processes (when
//! [`PostgresOptions::relay_deltas`](crate::PostgresOptions::relay_deltas)
//! is on). A delta published through the store goes at once to every
//! gateway of this process listening on the store's feed, and into a
//! queue that one task sends as `NOTIFY`s on [`CHANNEL`], from a
//! connection of its own, so they leave in the order they were published;
//! the listening connection hands every other store's deltas to the feed.
//!
//! A payload is `{"o": ORIGIN, "n": N, "d": DELTA}`: the sending store
//! (whose own come back and are skipped), its count (two equal payloads
//! in one transaction would be delivered once), and the delta. A payload
//! must stay under 8,000 bytes, so long text is sent as several deltas;
//! adjacent text of one reply waiting in the queue is sent as one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kesoku_core::{Backoff, Delta, DeltaKind, Jitter};
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Place, describe};
use crate::sql;

/// The channel deltas travel on.
pub(crate) const CHANNEL: &str = "kesoku_deltas";

/// The publishing connection's `application_name`.
const APPLICATION_NAME: &str = "kesoku deltas";
/// Deltas waiting to be sent; more are dropped (they are a view of a
/// reply whose finished message is stored anyway).
const QUEUE: usize = 16_384;
/// Deltas taken from the queue for one statement at most.
const BATCH: usize = 256;
/// How long the sender waits after a first delta for more to join it:
/// a model writes many small pieces, and each statement is a commit.
const GATHER: Duration = Duration::from_millis(2);
/// A payload the server would refuse is longer.
const MAX_PAYLOAD: usize = 7999;
/// How long one send may take before the connection is taken for dead.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest wait before connecting again.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(serde::Serialize)]
struct Out<'a> {
    o: &'a str,
    n: u64,
    d: &'a Delta,
}

#[derive(serde::Deserialize)]
struct In<'a> {
    o: &'a str,
    #[serde(borrow)]
    d: &'a RawValue,
}

/// The sending half.
pub(crate) struct Publisher {
    /// This process's gateways on this store.
    feed: broadcast::Sender<Arc<Delta>>,
    queue: mpsc::Sender<Delta>,
    /// Whether deltas are being dropped (so it is said once per episode).
    dropping: AtomicBool,
    place: Place,
    task: tokio::task::AbortHandle,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Publisher {
    /// Starts the sending task on a connection of its own.
    pub(crate) fn start(
        config: &Config,
        tls: MakeRustlsConnect,
        place: Place,
        origin: Arc<str>,
        feed: broadcast::Sender<Arc<Delta>>,
    ) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        let mut config = config.clone();
        config.application_name(APPLICATION_NAME);
        // A NOTIFY commits a transaction; nothing here needs the disk.
        sql::commit_asynchronously(&mut config);
        let task = tokio::spawn(send(config, tls, place.clone(), origin, waiting)).abort_handle();
        Publisher {
            feed,
            queue,
            dropping: AtomicBool::new(false),
            place,
            task,
        }
    }

    /// Hands `delta` to this process's listeners at once, and queues it
    /// for the others; `false` when it could not be queued (dropped).
    pub(crate) fn publish(&self, delta: &Delta) -> bool {
        if self.feed.receiver_count() > 0 {
            let _ = self.feed.send(Arc::new(delta.clone()));
        }
        let queued = self.queue.try_send(delta.clone()).is_ok();
        let was = self.dropping.swap(!queued, Ordering::Relaxed);
        if !queued && !was {
            tracing::warn!(store = %self.place, "deltas are published faster than they can be sent; dropping some");
        }
        queued
    }
}

/// The text a delta carries, if any.
fn text_of(kind: &DeltaKind) -> Option<&String> {
    match kind {
        DeltaKind::Text(t) | DeltaKind::Thought(t) | DeltaKind::ToolArguments { delta: t, .. } => {
            Some(t)
        }
        _ => None,
    }
}

/// `delta` with its text replaced by `text`.
fn with_text(delta: &Delta, text: String) -> Delta {
    let mut piece = delta.clone();
    piece.kind = match &delta.kind {
        DeltaKind::Text(_) => DeltaKind::Text(text),
        DeltaKind::Thought(_) => DeltaKind::Thought(text),
        DeltaKind::ToolArguments { index, .. } => DeltaKind::ToolArguments {
            index: *index,
            delta: text,
        },
        other => other.clone(),
    };
    piece
}

/// Joins each run of deltas that continue one another's text (same
/// session, reply, kind and call), in order.
fn merge(batch: Vec<Delta>) -> Vec<Delta> {
    let mut out: Vec<Delta> = Vec::with_capacity(batch.len());
    for delta in batch {
        if let Some(last) = out.last_mut()
            && last.session_id == delta.session_id
            && last.reply_to == delta.reply_to
            && last.path == delta.path
            && continues(&last.kind, &delta.kind)
            && let Some(more) = text_of(&delta.kind)
        {
            let joined = format!("{}{more}", text_of(&last.kind).map_or("", |t| t));
            *last = with_text(last, joined);
            continue;
        }
        out.push(delta);
    }
    out
}

fn continues(a: &DeltaKind, b: &DeltaKind) -> bool {
    match (a, b) {
        (DeltaKind::Text(_), DeltaKind::Text(_))
        | (DeltaKind::Thought(_), DeltaKind::Thought(_)) => true,
        (DeltaKind::ToolArguments { index: i, .. }, DeltaKind::ToolArguments { index: j, .. }) => {
            i == j
        }
        _ => false,
    }
}

/// The payloads of `delta`, numbered from `*n`: one, or several when its
/// text does not fit one. `None` when even an empty one would not fit
/// (a session id or reply id of thousands of bytes).
fn payloads(delta: &Delta, origin: &str, n: &mut u64) -> Option<Vec<String>> {
    let mut encode = |d: &Delta| {
        let p = serde_json::to_string(&Out {
            o: origin,
            n: *n,
            d,
        })
        .ok()?;
        *n += 1;
        Some(p)
    };
    let Some(text) = text_of(&delta.kind) else {
        return encode(delta)
            .filter(|p| p.len() <= MAX_PAYLOAD)
            .map(|p| vec![p]);
    };
    let whole = encode(delta)?;
    if whole.len() <= MAX_PAYLOAD {
        return Some(vec![whole]);
    }
    // The envelope without text, and room for the rest: JSON writes a
    // character as at most 6 bytes (`\u0000`), or 4 for one of 4 bytes.
    let envelope = encode(&with_text(delta, String::new()))?.len() + 20;
    let room = MAX_PAYLOAD.checked_sub(envelope)? / 6;
    if room == 0 {
        return None;
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(room)
        .map(|chunk| encode(&with_text(delta, chunk.iter().collect())))
        .collect()
}

/// Sends what is queued, a batch per statement, connecting again after a
/// failure. What was queued while the connection was down is dropped:
/// deltas are a live view, not a log.
async fn send(
    config: Config,
    tls: MakeRustlsConnect,
    place: Place,
    origin: Arc<str>,
    mut waiting: mpsc::Receiver<Delta>,
) {
    let mut n = 0_u64;
    // Equal jitter, as the listener's (`notify.rs`): never less than half
    // the wait, yet spread across processes.
    let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).with_jitter(Jitter::Equal);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let connected = async {
            let (client, connection) = config.connect(tls.clone()).await?;
            tokio::spawn(connection);
            let statement = client
                .prepare(&format!(
                    "SELECT pg_notify('{CHANNEL}', p) FROM unnest($1::text[]) WITH ORDINALITY AS t(p, i) ORDER BY i"
                ))
                .await?;
            Ok::<_, tokio_postgres::Error>((client, statement))
        }
        .await;
        let (client, statement) = match connected {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(store = %place, error = %describe(&e), "cannot connect to send deltas; trying again");
                tokio::time::sleep(backoff.next_delay().unwrap_or(MAX_BACKOFF)).await;
                let mut dropped = 0;
                while waiting.try_recv().is_ok() {
                    dropped += 1;
                }
                if dropped > 0 {
                    tracing::warn!(store = %place, dropped, "deltas dropped while the database was unreachable");
                }
                continue;
            }
        };
        backoff.reset();
        loop {
            if waiting.recv_many(&mut batch, BATCH).await == 0 {
                return;
            }
            tokio::time::sleep(GATHER).await;
            let room = BATCH.saturating_sub(batch.len());
            if room > 0 {
                while let Ok(more) = waiting.try_recv() {
                    batch.push(more);
                    if batch.len() == BATCH {
                        break;
                    }
                }
            }
            let mut texts = Vec::with_capacity(batch.len());
            for delta in merge(std::mem::take(&mut batch)) {
                match payloads(&delta, &origin, &mut n) {
                    Some(p) => texts.extend(p),
                    None => {
                        tracing::warn!(store = %place, session = %delta.session_id, "a delta whose session or reply id is too long to relay was dropped");
                    }
                }
            }
            if client.is_closed() {
                tracing::warn!(store = %place, dropped = texts.len(), "the connection sending deltas closed; connecting again");
                break;
            }
            match tokio::time::timeout(SEND_TIMEOUT, client.execute(&statement, &[&texts])).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(store = %place, error = %describe(&e), dropped = texts.len(), "sending deltas failed; connecting again");
                    break;
                }
                Err(_) => {
                    tracing::warn!(store = %place, dropped = texts.len(), "sending deltas took over 10 s; connecting again");
                    break;
                }
            }
        }
    }
}

/// The delta in `payload`, unless `origin` (this store) sent it (this
/// process's gateways had it when it was published).
pub(crate) fn receive(payload: &str, origin: &str) -> Option<Delta> {
    let decoded = serde_json::from_str::<In<'_>>(payload).and_then(|received| {
        if received.o == origin {
            Ok(None)
        } else {
            serde_json::from_str::<Delta>(received.d.get()).map(Some)
        }
    });
    decoded.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a notification on {CHANNEL} that kesoku did not send");
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(d: &Delta) -> &str {
        text_of(&d.kind).map_or("", |t| t)
    }

    #[test]
    fn long_text_goes_in_payloads_that_fit_and_join_back() {
        let long: String = "é\"\u{0}🌍ab".repeat(3000);
        let delta = Delta::new("s".repeat(2000), DeltaKind::Text(long.clone())).replying_to("m");
        let mut n = 0;
        let sent = payloads(&delta, "x", &mut n).unwrap();
        assert!(sent.len() > 1);
        assert_eq!(
            n,
            u64::try_from(sent.len()).unwrap() + 2,
            "numbers are never reused"
        );
        let mut joined = String::new();
        for p in &sent {
            assert!(p.len() <= MAX_PAYLOAD, "{}", p.len());
            let piece = receive(p, "y").unwrap();
            assert_eq!(piece.reply_to.as_deref(), Some("m"));
            joined.push_str(text(&piece));
            assert_eq!(receive(p, "x"), None, "its own delta came back");
        }
        assert_eq!(joined, long);
        // An id that leaves no room is dropped, not sent broken.
        let huge = Delta::new("s".repeat(9000), DeltaKind::Text("hi".into()));
        assert_eq!(payloads(&huge, "x", &mut n), None);
    }

    #[test]
    fn adjacent_text_of_one_reply_is_sent_as_one() {
        let t = |s: &str, r: &str, x: &str| Delta::new(s, DeltaKind::Text(x.into())).replying_to(r);
        let args = |i, x: &str| {
            Delta::new(
                "s",
                DeltaKind::ToolArguments {
                    index: i,
                    delta: x.into(),
                },
            )
            .replying_to("m")
        };
        let merged = merge(vec![
            t("s", "m", "He"),
            t("s", "m", "llo"),
            t("other", "m", "!"),
            t("s", "m", " you"),
            args(0, "{\"a\""),
            args(0, ":1}"),
            args(1, "{}"),
        ]);
        let texts: Vec<&str> = merged.iter().map(text).collect();
        assert_eq!(texts, ["Hello", "!", " you", "{\"a\":1}", "{}"]);
    }
}
