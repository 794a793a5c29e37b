//! The connection that listens for new messages: `LISTEN` on the channel
//! every insert notifies, each seq announced on a watch channel; and,
//! when the store relays deltas, on theirs (see `relay.rs`).
//!
//! `NOTIFY` is delivered only to sessions that were listening when the
//! insert committed, so after every (re)connect the task reads the
//! largest seq from the table and announces it: a listener that sees it
//! is ahead of what it was delivered reads the rest from the table. Since
//! inserts commit in seq order, no message is skipped, and a listener's
//! own bookkeeping (by seq) keeps any from coming twice.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku_core::store::row::variant;
use kesoku_core::store::{Announced, Seq};
use kesoku_core::{Backoff, Delta, Jitter};
use tokio::sync::{broadcast, oneshot};
use tokio_postgres::{AsyncMessage, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Place, describe};
use crate::relay;
use crate::sql::{self, CHANNEL};

/// The listening connection's `application_name`.
pub(crate) const APPLICATION_NAME: &str = "kesoku listener";

/// The first wait before connecting again.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between two attempts to connect again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Where relayed deltas go: this store's origin (whose own are skipped:
/// this process's gateways had them when they were published) and the
/// feed of this process's gateways.
pub(crate) struct Deltas {
    pub(crate) origin: Arc<str>,
    pub(crate) feed: broadcast::Sender<Arc<Delta>>,
}

/// Listens until dropped (aborted), connecting again after each failure.
/// `ready` is told once the first `LISTEN` is in place, or why the first
/// attempt failed.
pub(crate) async fn listen(
    config: Config,
    connect_timeout: Duration,
    tls: MakeRustlsConnect,
    place: Place,
    announce: broadcast::Sender<Announced>,
    deltas: Option<Deltas>,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    // Equal jitter: each wait is at least half its ceiling, so a server
    // that is down is not tried in a tight loop, yet the processes that
    // lost it together (a restart) spread their reconnections.
    let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).with_jitter(Jitter::Equal);
    loop {
        let mut listened = false;
        match listen_once(
            &config,
            connect_timeout,
            tls.clone(),
            &announce,
            deltas.as_ref(),
            &mut ready,
            &mut listened,
        )
        .await
        {
            Ok(()) => {}
            Err(e) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                    return;
                }
                tracing::warn!(store = %place, error = %e, "listening for new messages failed; connecting again");
            }
        }
        // After a connection that listened, the first retry is quick.
        if listened {
            backoff.reset();
        }
        tokio::time::sleep(backoff.next_delay().unwrap_or(MAX_BACKOFF)).await;
    }
}

/// One connection's life: connect, `LISTEN`, announce what the table
/// holds, then each notification, until the connection fails.
async fn listen_once(
    config: &Config,
    connect_timeout: Duration,
    tls: MakeRustlsConnect,
    announce: &broadcast::Sender<Announced>,
    deltas: Option<&Deltas>,
    ready: &mut Option<oneshot::Sender<Result<(), String>>>,
    listened: &mut bool,
) -> Result<(), String> {
    let mut config = config.clone();
    // So an operator (or a test) can tell it in `pg_stat_activity`.
    config.application_name(APPLICATION_NAME);
    // A server restarting may accept a connection and never answer it.
    let (client, mut connection) = tokio::time::timeout(connect_timeout, config.connect(tls))
        .await
        .map_err(|_| format!("no answer from the server within {connect_timeout:?}"))?
        .map_err(|e| describe(&e))?;
    let (tx, mut notifications) = tokio::sync::mpsc::unbounded_channel();
    // The connection's messages (notifications among them) come only as
    // it is polled, which this task does.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            let item = match message {
                Ok(AsyncMessage::Notification(n)) => {
                    Ok((n.channel() == relay::CHANNEL, n.payload().to_owned()))
                }
                Ok(_) => continue,
                Err(e) => Err(describe(&e)),
            };
            let failed = item.is_err();
            if tx.send(item).is_err() || failed {
                return;
            }
        }
        let _ = tx.send(Err("the server closed the connection".into()));
    });
    let result = async {
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(|e| describe(&e))?;
        if deltas.is_some() {
            client
                .batch_execute(&format!("LISTEN {}", relay::CHANNEL))
                .await
                .map_err(|e| describe(&e))?;
        }
        let last = sql::last_seq(&client).await.map_err(|e| match e {
            crate::error::Failure::Sql(e) => describe(&e),
            other => format!("{other:?}"),
        })?;
        // Receivers come and go; none listening is fine.
        let _ = announce.send(Announced::upto(last));
        *listened = true;
        if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
        }
        while let Some(item) = notifications.recv().await {
            let (is_delta, payload) = item?;
            if is_delta {
                if let Some(deltas) = deltas
                    && let Some(delta) = relay::receive(&payload, &deltas.origin)
                {
                    let _ = deltas.feed.send(Arc::new(delta));
                }
                continue;
            }
            if let Some(news) = parse(&payload) {
                let _ = announce.send(news);
            } else {
                tracing::warn!("a notification on {CHANNEL} that kesoku did not send");
            }
        }
        Err("the connection's driver stopped".to_owned())
    }
    .await;
    driver.abort();
    result
}

/// A payload as the insert writes it: `SEQ ROLE STATUS SESSION`, or `SEQ`.
fn parse(payload: &str) -> Option<Announced> {
    let mut parts = payload.splitn(4, ' ');
    let seq: Seq = parts.next()?.parse().ok()?;
    match (parts.next(), parts.next(), parts.next()) {
        (Some(role), Some(status), Some(session)) => Some(Announced::message(
            seq,
            session,
            variant(role).ok()?,
            variant(status).ok()?,
        )),
        (None, None, None) => Some(Announced::upto(seq)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kesoku_core::store::Announced;
    use kesoku_core::{Role, Status};

    use super::parse;

    #[test]
    fn payloads_read_back() {
        assert_eq!(
            parse("42 user pending_agent a session id"),
            Some(Announced::message(
                42,
                "a session id",
                Role::User,
                Status::PendingAgent
            ))
        );
        assert_eq!(parse("7"), Some(Announced::upto(7)));
        assert_eq!(parse("x"), None);
        assert_eq!(parse("7 wizard pending s"), None);
        assert_eq!(parse("7 user"), None);
    }
}
