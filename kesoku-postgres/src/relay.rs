//! Deltas between processes (when
//! [`PostgresOptions::relay_deltas`](crate::PostgresOptions::relay_deltas)
//! is on): each store sends its gateway's deltas as `NOTIFY`s on
//! [`CHANNEL`] from a connection of its own, so they leave in the order
//! they were published, and the listening connection hands every other
//! store's deltas to this process's gateway.
//!
//! A payload is `{"o": ORIGIN, "n": N, "d": DELTA}`: the sending store,
//! its count (two equal payloads in one transaction would be delivered
//! once), and the delta. A `NOTIFY` payload must stay under 8,000 bytes,
//! so long text is sent as several deltas.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kesoku_core::{Delta, DeltaKind};
use tokio::sync::mpsc;
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Place, describe};

/// The channel deltas travel on.
pub(crate) const CHANNEL: &str = "kesoku_deltas";

/// The publishing connection's `application_name`.
const APPLICATION_NAME: &str = "kesoku deltas";
/// Deltas waiting to be sent; more are dropped (they are a view of a
/// reply whose finished message is stored anyway).
const QUEUE: usize = 4096;
/// Deltas sent in one statement at most.
const BATCH: usize = 256;
/// The most characters of text one payload carries: JSON escapes a
/// character into at most 6 bytes, well under the 8,000-byte limit.
const PIECE_CHARS: usize = 1000;
/// A payload the server would refuse.
const MAX_PAYLOAD: usize = 7999;
/// The wait before connecting again.
const BACKOFF: Duration = Duration::from_millis(200);

#[derive(serde::Serialize)]
struct Out<'a> {
    o: &'a str,
    n: u64,
    d: &'a Delta,
}

#[derive(serde::Deserialize)]
struct In {
    o: String,
    d: Delta,
}

/// The sending half: deltas go into a queue that one task sends in order.
pub(crate) struct Publisher {
    origin: Arc<str>,
    sent: AtomicU64,
    queue: mpsc::Sender<String>,
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
        config: Config,
        tls: MakeRustlsConnect,
        place: Place,
        origin: Arc<str>,
    ) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        let task = tokio::spawn(send(config, tls, place, waiting)).abort_handle();
        Publisher {
            origin,
            sent: AtomicU64::new(0),
            queue,
            task,
        }
    }

    /// Queues `delta` (in pieces when long); `false` when some of it was
    /// dropped.
    pub(crate) fn publish(&self, delta: &Delta) -> bool {
        let mut whole = true;
        for piece in pieces(delta) {
            let n = self.sent.fetch_add(1, Ordering::Relaxed);
            let payload = serde_json::to_string(&Out {
                o: &self.origin,
                n,
                d: &piece,
            });
            match payload {
                Ok(p) if p.len() <= MAX_PAYLOAD => whole &= self.queue.try_send(p).is_ok(),
                _ => whole = false,
            }
        }
        whole
    }
}

/// `delta`, its text cut into pieces of at most [`PIECE_CHARS`].
fn pieces(delta: &Delta) -> Vec<Delta> {
    let (DeltaKind::Text(text)
    | DeltaKind::Thought(text)
    | DeltaKind::ToolArguments { delta: text, .. }) = &delta.kind
    else {
        return vec![delta.clone()];
    };
    if text.chars().count() <= PIECE_CHARS {
        return vec![delta.clone()];
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(PIECE_CHARS)
        .map(|chunk| {
            let part: String = chunk.iter().collect();
            let mut piece = delta.clone();
            piece.kind = match &delta.kind {
                DeltaKind::Text(_) => DeltaKind::Text(part),
                DeltaKind::Thought(_) => DeltaKind::Thought(part),
                DeltaKind::ToolArguments { index, .. } => DeltaKind::ToolArguments {
                    index: *index,
                    delta: part,
                },
                other => other.clone(),
            };
            piece
        })
        .collect()
}

/// Sends what is queued, a batch per statement, connecting again after a
/// failure (the batch it was sending is lost: deltas are not kept).
async fn send(
    config: Config,
    tls: MakeRustlsConnect,
    place: Place,
    mut waiting: mpsc::Receiver<String>,
) {
    let mut config = config;
    config.application_name(APPLICATION_NAME);
    loop {
        let client = match config.connect(tls.clone()).await {
            Ok((client, connection)) => {
                tokio::spawn(connection);
                client
            }
            Err(e) => {
                tracing::warn!(store = %place, error = %describe(&e), "cannot connect to send deltas; trying again");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        let statement = match client
            .prepare(&format!(
                "SELECT pg_notify('{CHANNEL}', p) FROM unnest($1::text[]) AS p"
            ))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(store = %place, error = %describe(&e), "cannot send deltas; trying again");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            if waiting.recv_many(&mut batch, BATCH).await == 0 {
                return;
            }
            // The array's order is the order of the notifications.
            if let Err(e) = client.execute(&statement, &[&batch]).await {
                tracing::warn!(store = %place, error = %describe(&e), dropped = batch.len(), "sending deltas failed; connecting again");
                break;
            }
            batch.clear();
        }
    }
}

/// The delta in `payload`, unless `origin` (this store) sent it.
pub(crate) fn receive(payload: &str, origin: &str) -> Option<Delta> {
    match serde_json::from_str::<In>(payload) {
        Ok(received) if received.o != origin => Some(received.d),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "a notification on {CHANNEL} that kesoku did not send");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_goes_in_pieces_that_join_back() {
        let text: String = "é\"\u{0}🌍ab".repeat(700);
        let delta = Delta::new("s", DeltaKind::Text(text.clone())).replying_to("m");
        let parts = pieces(&delta);
        assert_eq!(parts.len(), 5);
        let mut joined = String::new();
        for (n, part) in parts.iter().enumerate() {
            assert_eq!(part.reply_to.as_deref(), Some("m"));
            let DeltaKind::Text(t) = &part.kind else {
                panic!("{part:?}")
            };
            joined.push_str(t);
            let payload = serde_json::to_string(&Out {
                o: "x",
                n: n as u64,
                d: part,
            })
            .unwrap();
            assert!(payload.len() <= MAX_PAYLOAD, "{}", payload.len());
            assert_eq!(receive(&payload, "y"), Some(part.clone()));
            assert_eq!(receive(&payload, "x"), None, "its own delta came back");
        }
        assert_eq!(joined, text);
        let call = Delta::new(
            "s",
            DeltaKind::ToolCall {
                index: 0,
                id: "c".into(),
                name: "t".into(),
            },
        );
        assert_eq!(pieces(&call), [call]);
    }
}
