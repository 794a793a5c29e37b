//! Taking a turn: the permit, the session's lease and the claim of its
//! prompt; the lease kept while the turn runs (`run.rs`), and given up
//! after it. A turn whose lease is lost stops at once, for another worker
//! to resume.

use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use kesoku_core::store::{Seq, Store, StoreError};
use kesoku_core::{GatewayError, Message, Status};

use super::outcome::{AgentError, TurnOutcome};
use super::retry::retried_store;
use super::run::{end_panicked, turn};
use super::sessions::Slot;
use super::shared::Shared;

/// How long a worker waits, at first, before it tries again for a lease
/// another holds; the wait doubles up to [`LEASE_RETRY_MAX`].
const LEASE_RETRY: Duration = Duration::from_millis(5);
const LEASE_RETRY_MAX: Duration = Duration::from_millis(100);

/// Takes the turn of the `pending_agent` user `message` (at `seq`) and
/// runs it to its end: under the session's lock in this process, then its
/// lease in the store (waited for while another worker holds it), then
/// the claim of the message. `None` when another agent claimed it first.
pub(crate) async fn take(
    shared: &Shared,
    message: Message,
    seq: Seq,
) -> Result<Option<TurnOutcome>, AgentError> {
    let slot = shared.sessions.slot(&message.session_id);
    let store = shared.gateway.store();
    let session = message.session_id.clone();
    let session = session.as_str();
    let holder = shared.claim_holder();
    let mut retry = LEASE_RETRY;
    // The permit, then the lease, then the claim. The lease is this
    // claim's alone (its holder names the agent and the claim), so it also
    // keeps two turns of one session in this process apart. The permit
    // comes first so a worker leases (and claims) only sessions it can
    // run now; while another turn holds the lease, this one waits without
    // a permit. A claimed message's session is always leased, so only a
    // dead worker's turns are requeued.
    let (permit, valid_until) = loop {
        // Several workers try each prompt; those that come second learn
        // it was taken without holding a permit for it.
        if !still_pending(shared, &message.id).await? {
            return Ok(None);
        }
        let permit = shared
            .permits
            .acquire()
            .await
            .map_err(|_| AgentError::Config("the agent's turn limit was closed".into()))?;
        let asked = Instant::now();
        if retried_store(shared.lease, "leasing a session", || {
            store.lease(session, &holder, shared.lease)
        })
        .await?
        {
            // The database's clock started the lease after `asked`.
            break (permit, asked + shared.lease);
        }
        drop(permit);
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LEASE_RETRY_MAX);
    };
    let outcome = if shared.gateway.claim(&message.id).await? {
        run_leased(shared, &slot, &holder, message, seq, valid_until).await
    } else {
        None
    };
    // The permit first: `release` wakes `serve`, which needs it free.
    drop(permit);
    release(shared, session, &holder).await;
    outcome.transpose()
}

/// Runs the turn of `message` (at `seq`), which `holder` claimed with its
/// session's lease (valid until `valid_until`) through
/// [`Leases::claim_next`](kesoku_core::store::Leases::claim_next), holding `permit` for it; then releases the
/// lease. `None` when the lease was lost.
pub(crate) async fn run_claimed(
    shared: &Shared,
    holder: String,
    message: Message,
    seq: Seq,
    permit: tokio::sync::OwnedSemaphorePermit,
    valid_until: Instant,
) -> Result<Option<TurnOutcome>, AgentError> {
    let slot = shared.sessions.slot(&message.session_id);
    let session = message.session_id.clone();
    let outcome = run_leased(shared, &slot, &holder, message, seq, valid_until).await;
    drop(permit);
    release(shared, &session, &holder).await;
    outcome.transpose()
}

/// Runs the turn while keeping the session's lease; `None` when the lease
/// could not be renewed in time.
async fn run_leased(
    shared: &Shared,
    slot: &Slot,
    holder: &str,
    message: Message,
    seq: Seq,
    valid_until: Instant,
) -> Option<Result<TurnOutcome, AgentError>> {
    let session = message.session_id.clone();
    let user = message.clone();
    // A panic anywhere in the turn (a model backend, a stream's decoder,
    // the agent's own code) is caught here, with the lease still kept, so
    // the prompt is settled and its calls answered (`end_panicked`).
    let work = async {
        match AssertUnwindSafe(turn(shared, slot, holder, message, seq))
            .catch_unwind()
            .await
        {
            Ok(outcome) => outcome,
            Err(payload) => {
                slot.set_running(0);
                let panic = panic_message(&*payload);
                match AssertUnwindSafe(end_panicked(shared, holder, &user, &panic))
                    .catch_unwind()
                    .await
                {
                    Ok(ended) => ended,
                    Err(_) => Err(AgentError::Panicked {
                        session: user.session_id.clone(),
                        message: panic,
                    }),
                }
            }
        }
    };
    let mut work = pin!(work);
    tokio::select! {
        biased;
        outcome = &mut work => match outcome {
            // A post found the lease gone (this worker stalled past it):
            // as below, the turn is another worker's now.
            Err(AgentError::Gateway(GatewayError::Store(StoreError::LeaseLost { .. }))) => {
                tracing::warn!(session, "the session's lease was lost before a post; its turn stops here and resumes elsewhere");
                slot.set_running(0);
                None
            }
            outcome => Some(outcome),
        },
        () = keep_lease(shared, &session, holder, valid_until) => {
            // Another worker may have the session by now: this one stops
            // at once and posts nothing more. Whoever resumes the turn
            // answers its open calls.
            tracing::warn!(session, "the session's lease could not be renewed in time; its turn stops here and resumes elsewhere");
            slot.set_running(0);
            None
        }
    }
}

/// A panic's message, when it has one.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Gives up the session's lease, tried again while the store fails for a
/// moment (else it expires on its own, and the session's next prompt
/// waits for that).
async fn release(shared: &Shared, session: &str, holder: &str) {
    let store = shared.gateway.store();
    let released = retried_store(shared.lease, "releasing a session's lease", || {
        store.release(session, holder)
    })
    .await;
    if let Err(e) = released {
        tracing::warn!(session, error = %e, "could not release a session's lease");
    }
    shared.released.notify_one();
}

/// Whether message `id` is still `pending_agent`.
async fn still_pending(shared: &Shared, id: &str) -> Result<bool, AgentError> {
    let store: &dyn Store = &**shared.gateway.store();
    let status = retried_store(shared.lease, "reading a prompt", || store.get(id))
        .await?
        .map(|m| m.status);
    Ok(status == Some(Status::PendingAgent))
}

/// The first wait before a failed renewal is tried again; it doubles up
/// to a third of the lease.
const RENEW_RETRY: Duration = Duration::from_millis(20);

/// Renews `session`'s lease every third of its length ([`Leases::renew`](kesoku_core::store::Leases::renew):
/// only while `holder` still holds it, so a lease that was broken or
/// expired is never taken back); returns once it is lost (expired, broken,
/// or another holder's) or is about to expire unrenewed (at `valid_until`,
/// less a margin, as this process's clock measures it from when the last
/// successful renewal was sent, which is never later than the
/// database's). A renewal the store failed is tried again soon, with
/// backoff, not a third of a lease later.
async fn keep_lease(shared: &Shared, session: &str, holder: &str, mut valid_until: Instant) {
    let store = shared.gateway.store();
    let every = shared.lease / 3;
    let margin = shared.lease / 10;
    let mut failed: Option<Duration> = None;
    loop {
        let deadline = valid_until.checked_sub(margin).unwrap_or(valid_until);
        let next = (Instant::now() + failed.unwrap_or(every)).min(deadline);
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        if sent >= deadline {
            return;
        }
        let renewal = store.renew(session, holder, shared.lease);
        match tokio::time::timeout_at(deadline.into(), renewal).await {
            Ok(Ok(true)) => {
                valid_until = sent + shared.lease;
                failed = None;
            }
            Ok(Ok(false)) | Err(_) => return,
            Ok(Err(e)) => {
                tracing::warn!(session, error = %e, "could not renew a session's lease; trying again");
                failed = Some(failed.map_or(RENEW_RETRY, |w| (w * 2).min(every)));
            }
        }
    }
}
