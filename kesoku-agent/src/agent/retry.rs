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

use kesoku_core::store::StoreError;
use kesoku_core::{Backoff, ErrorChain, GatewayError};

/// The first wait's ceiling before trying again; it doubles up to
/// [`MAX_WAIT`] (each wait drawn below it: full jitter).
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
    // The backoff's budget counts its waits only; the calls take time too
    // (a store call may hang until its timeout), so the deadline is wall
    // time.
    let give_up = Instant::now() + budget;
    // Full jitter: the turns of one process, and the processes on one
    // database, that failed together do not all try again together.
    let mut backoff = Backoff::new(FIRST_WAIT, MAX_WAIT).with_budget(budget);
    let mut again = false;
    loop {
        match call(again).await {
            Err(GatewayError::Store(e)) if is_transient(&e) => {
                let Some(wait) = backoff
                    .next_delay()
                    .filter(|w| Instant::now() + *w < give_up)
                else {
                    return Err(GatewayError::Store(e));
                };
                tracing::warn!(error = %ErrorChain(&e), "{what} failed; trying again in {wait:?}");
                tokio::time::sleep(wait).await;
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
