//! A turn's store calls, tried again while the store fails for a moment
//! (a database restarting, a connection cut): such a failure used to end
//! the turn, which then waited a whole lease to be resumed elsewhere.
//!
//! Only [`StoreError::Backend`] is tried again; a lost lease, a duplicate
//! or a corrupt row is an answer, not a failure. The tries are bounded:
//! with backoff, for at most about one lease (by then the turn's lease
//! keeper has given the turn up, and the turn stops).

use std::future::Future;
use std::time::{Duration, Instant};

use kesoku_core::GatewayError;
use kesoku_core::store::StoreError;

/// The first wait before trying again; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(20);
/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_millis(500);

/// Whether `e` is a failure of the store that may pass (the database
/// failed or could not be reached), rather than an answer.
pub(crate) fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Backend { .. })
}

/// Runs `call` until it succeeds, fails with anything but a transient
/// store error, or `budget` has passed (the last error is returned then).
/// `call` is told whether an earlier try failed: a write whose commit
/// succeeded but whose answer was lost finds itself done on the next try
/// (a duplicate id, a status already changed), and can say so.
pub(crate) async fn retried<T, F, Fut>(
    budget: Duration,
    what: &str,
    mut call: F,
) -> Result<T, GatewayError>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = Result<T, GatewayError>>,
{
    let give_up = Instant::now() + budget;
    let mut wait = FIRST_WAIT;
    let mut again = false;
    loop {
        match call(again).await {
            Err(GatewayError::Store(e)) if is_transient(&e) && Instant::now() + wait < give_up => {
                tracing::warn!(error = %e, "{what} failed; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
                again = true;
            }
            other => return other,
        }
    }
}

/// [`retried`] for a call that returns a [`StoreError`].
pub(crate) async fn retried_store<T, F, Fut>(
    budget: Duration,
    what: &str,
    mut call: F,
) -> Result<T, GatewayError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    retried(budget, what, |_| {
        let call = call();
        async move { call.await.map_err(GatewayError::from) }
    })
    .await
}
