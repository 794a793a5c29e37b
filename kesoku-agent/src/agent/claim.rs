//! Taking a turn: the permit, the session's lease and the claim of its
//! prompt; the lease kept while the turn runs (`run.rs`), and given up
//! after it. A turn whose lease is lost stops at once, for another worker
//! to resume.
//!
//! A prompt is claimed one of three ways, each the cheapest for where it
//! comes from: a new prompt is stored already claimed, in one write
//! ([`Claimed::new_prompt`]); a prompt stored `pending_agent` (posted
//! while its session was busy, put back, or decided) is leased and
//! claimed by id ([`Claimed::pending`]); `serve` claims whichever waits
//! longest ([`Claimed::next`]). Each gives a [`Claimed`], and there is
//! one way into a turn: [`Claimed::run`].

use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use kesoku_core::store::{Seq, Store, StoreError};
use kesoku_core::{Backoff, ErrorChain, GatewayError, Message, Status};

use super::outcome::{AgentError, TurnOutcome};
use super::posts::{Ending, end_panicked, panic_message};
use super::retry::{retried, retried_store};
use super::run::{Turned, turn};
use super::sessions::{Slot, ViewAtClaim};
use super::shared::Shared;

/// How long a worker waits, at first, before it tries again for a lease
/// another holds; the wait doubles up to [`LEASE_RETRY_MAX`], each drawn
/// below that (full jitter: the workers waiting for one session do not
/// ask together).
const LEASE_RETRY: Duration = Duration::from_millis(5);
const LEASE_RETRY_MAX: Duration = Duration::from_millis(100);

/// A turn this process may run now: its prompt (at `seq`) claimed, its
/// session leased by `holder` (valid until `valid_until`, as this
/// process's clock measures it), one of the agent's permits held.
pub(crate) struct Claimed {
    holder: String,
    message: Message,
    seq: Seq,
    /// The view its claim brought up to date, when it did.
    at_claim: Option<ViewAtClaim>,
    permit: tokio::sync::OwnedSemaphorePermit,
    valid_until: Instant,
}

/// Takes the turn of the `pending_agent` user `message` (at `seq`) and
/// runs it to its end ([`Claimed::pending`], then [`Claimed::run`]).
/// `None` when another agent claimed it first, or the lease was lost.
pub(crate) async fn take(
    shared: &Shared,
    message: Message,
    seq: Seq,
) -> Result<Option<TurnOutcome>, AgentError> {
    match Claimed::pending(shared, message, seq).await? {
        Some(claimed) => claimed.run(shared).await,
        None => Ok(None),
    }
}

impl Claimed {
    /// Claims the `pending_agent` user `message` (at `seq`): a permit, then
    /// its session's lease in the store (waited for while another worker
    /// holds it), then the message. `None` when another agent claimed it
    /// first.
    pub(crate) async fn pending(
        shared: &Shared,
        message: Message,
        seq: Seq,
    ) -> Result<Option<Claimed>, AgentError> {
        let store = shared.gateway.store();
        let session = message.session_id.clone();
        let session = session.as_str();
        let holder = shared.claim_holder();
        let mut retry = Backoff::new(LEASE_RETRY, LEASE_RETRY_MAX);
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
            let permit = Arc::clone(&shared.permits)
                .acquire_owned()
                .await
                .map_err(|_| AgentError::Config("the agent's turn limit was closed".into()))?;
            let requested_at = Instant::now();
            if retried_store(shared.lease, "leasing a session", || {
                store.lease(session, &holder, shared.lease)
            })
            .await?
            {
                // The database's clock started the lease after `requested_at`.
                break (permit, requested_at + shared.lease);
            }
            drop(permit);
            // No budget: the loop ends when the prompt is taken or leased.
            tokio::time::sleep(retry.next_delay().unwrap_or(LEASE_RETRY_MAX)).await;
        };
        let claimed = match shared.gateway.claim(&message.id).await {
            Ok(claimed) => claimed,
            Err(e) => {
                drop(permit);
                release(shared, session, &holder, false).await;
                return Err(e.into());
            }
        };
        if !claimed {
            // The permit first: `release` wakes `serve`, which needs it free.
            drop(permit);
            release(shared, session, &holder, false).await;
            return Ok(None);
        }
        Ok(Some(Claimed {
            holder,
            message,
            seq,
            at_claim: None,
            permit,
            valid_until,
        }))
    }
}

/// How [`Claimed::new_prompt`] went.
pub(crate) enum Started {
    /// Stored and claimed: the turn is this process's to run.
    Claimed(Claimed),
    /// The turn cannot start at once (no permit free, or the session
    /// leased); nothing was stored.
    NotNow(Message),
}

impl Claimed {
    /// Claims the new `pending_agent` user `message` in one write when its
    /// turn can start at once, with a permit free and its session's lease
    /// free: stores it `processing` with the session leased
    /// ([`Gateway::post_claimed`](kesoku_core::Gateway::post_claimed)), and
    /// with a view of the session kept here, reads what the session stored
    /// since in the same call
    /// ([`Gateway::post_claimed_after`](kesoku_core::Gateway::post_claimed_after));
    /// where [`pending`](Self::pending) after storing it would lease and claim
    /// (three writes).
    pub(crate) async fn new_prompt(
        shared: &Shared,
        message: Message,
    ) -> Result<Started, AgentError> {
        let Ok(permit) = Arc::clone(&shared.permits).try_acquire_owned() else {
            return Ok(Started::NotNow(message));
        };
        let holder = shared.claim_holder();
        let mut claimed = message;
        claimed.status = Status::Processing;
        let requested_at = Instant::now();
        let session = claimed.session_id.clone();
        // The session's view kept here is brought up to date by the claim
        // itself, in the same call to the store, and handed to the turn; put
        // back if the turn does not start.
        let kept = shared.sessions.take_view(&session);
        let after = kept.as_ref().map(|view| view.seq);
        let stored = store_claimed(shared, &claimed, &holder, after).await;
        // The view goes to the turn only with what the claim read since it;
        // otherwise it is put back, whatever happens next.
        let kept = match (&stored, kept) {
            (Ok(Stored::At(_, Some(_))), kept) => kept,
            (_, Some(view)) => {
                shared.sessions.put_view(&session, view);
                None
            }
            (_, None) => None,
        };
        let (seq, at_claim) = match stored {
            Ok(Stored::At(seq, Some(newer))) => {
                let at_claim = kept.map(|view| ViewAtClaim { view, newer });
                (seq, at_claim)
            }
            Ok(Stored::At(seq, None)) => (seq, None),
            Ok(Stored::Refused) => {
                claimed.status = Status::PendingAgent;
                return Ok(Started::NotNow(claimed));
            }
            Ok(Stored::RefusedAfterFailure) if !was_stored(shared, &claimed).await? => {
                claimed.status = Status::PendingAgent;
                return Ok(Started::NotNow(claimed));
            }
            // Stored by a try whose answer was lost; the lease may have gone
            // since (a renewal finds out), or be another worker's already.
            Ok(Stored::Earlier | Stored::RefusedAfterFailure) => {
                let Some(seq) = stored_seq(shared, &claimed).await? else {
                    // Not where it was stored (a store changed by hand):
                    // posting it again says so (a duplicate id).
                    claimed.status = Status::PendingAgent;
                    return Ok(Started::NotNow(claimed));
                };
                (seq, None)
            }
            Err(e) => {
                // A store that leases and stores in two steps may hold the
                // lease now.
                drop(permit);
                release(shared, &session, &holder, false).await;
                return Err(e.into());
            }
        };
        shared.sessions.saw_user_message(&session, seq);
        Ok(Started::Claimed(Claimed {
            holder,
            message: claimed,
            seq,
            at_claim,
            permit,
            // The database's clock started the lease after `requested_at`.
            valid_until: requested_at + shared.lease,
        }))
    }

    /// Claims the prompt that has waited longest, with its session's lease,
    /// when a permit is free; `None` when none is, or nothing waits.
    pub(crate) async fn next(shared: &Shared) -> Result<Option<Claimed>, AgentError> {
        let Ok(permit) = Arc::clone(&shared.permits).try_acquire_owned() else {
            return Ok(None);
        };
        let requested_at = Instant::now();
        let holder = shared.claim_holder();
        let store = shared.gateway.store();
        let Some((seq, message)) = store
            .claim_next(&holder, shared.lease)
            .await
            .map_err(GatewayError::from)?
        else {
            return Ok(None);
        };
        shared.sessions.saw_user_message(&message.session_id, seq);
        Ok(Some(Claimed {
            holder,
            message,
            seq,
            at_claim: None,
            permit,
            // The database's clock started the lease after `requested_at`.
            valid_until: requested_at + shared.lease,
        }))
    }

    /// The claimed prompt, and where it is stored.
    pub(crate) fn prompt(&self) -> (&Message, Seq) {
        (&self.message, self.seq)
    }

    /// Ends the claimed turn without running it, for `why` (no agent here
    /// may run it): a note answering the prompt says so, and the prompt
    /// is settled `error`.
    pub(crate) async fn refuse(self, shared: &Shared, why: &str) -> Result<(), AgentError> {
        tracing::error!(session = %self.message.session_id, prompt = %self.message.id, why, "a prompt no agent here may run");
        let note = Message::new(
            &self.message.session_id,
            kesoku_core::Role::Assistant,
            kesoku_core::MessageType::Text,
            why,
        )
        .with_sender("agent")
        .with_status(Status::Pending)
        .with_parent(&self.message.id);
        let ended = async {
            super::posts::post(shared, &self.holder, &note).await?;
            super::posts::settle(shared, &self.holder, &self.message.id, Status::Error).await
        }
        .await;
        drop(self.permit);
        release(shared, &self.message.session_id, &self.holder, false).await;
        ended
    }

    /// Runs the claimed turn to its end while keeping the session's lease,
    /// then releases the lease and the permit: the one way into a turn.
    /// `None` when the lease was lost (the turn ends on another worker).
    pub(crate) async fn run(self, shared: &Shared) -> Result<Option<TurnOutcome>, AgentError> {
        let Claimed {
            holder,
            message,
            seq,
            at_claim,
            permit,
            valid_until,
        } = self;
        let slot = shared.sessions.slot(&message.session_id);
        let session = message.session_id.clone();
        let (outcome, released) =
            run_leased(shared, &slot, &holder, message, seq, at_claim, valid_until).await;
        // The permit first: `release` wakes `serve`, which needs it free.
        drop(permit);
        release(shared, &session, &holder, released).await;
        outcome.transpose()
    }
}

/// `claimed` stored, leased by `holder` and claimed in one write, tried
/// again while the store fails for a moment; with the messages stored
/// after `after`, the kept view's `seq`, when there is one.
async fn store_claimed(
    shared: &Shared,
    claimed: &Message,
    holder: &str,
    after: Option<Seq>,
) -> Result<Stored, GatewayError> {
    retried(shared.lease, "storing a prompt", |again| {
        async move {
            let posted = match after {
                Some(after) => shared
                    .gateway
                    .post_claimed_after_ref(claimed, holder, shared.lease, after)
                    .await
                    .map(|c| c.map(|c| (c.seq, Some(c.newer)))),
                None => shared
                    .gateway
                    .post_claimed_ref(claimed, holder, shared.lease)
                    .await
                    .map(|c| c.map(|seq| (seq, None))),
            };
            match posted {
                Ok(Some((seq, newer))) => Ok(Stored::At(seq, newer)),
                // An earlier try's answer was lost after its commit.
                Err(GatewayError::Store(StoreError::Duplicate { .. })) if again => {
                    Ok(Stored::Earlier)
                }
                Ok(None) if again => Ok(Stored::RefusedAfterFailure),
                Ok(None) => Ok(Stored::Refused),
                Err(e) => Err(e),
            }
        }
    })
    .await
}

/// What a try of [`start`]'s one write found.
enum Stored {
    /// With the session's messages after the kept view, when one was.
    At(Seq, Option<Vec<(Seq, Message)>>),
    /// An earlier try stored it.
    Earlier,
    /// Another holder's lease is live.
    Refused,
    /// Another holder's lease is live, after a try that failed (and may
    /// have stored it, before that lease was taken).
    RefusedAfterFailure,
}

/// Whether `message` is stored (by a try whose answer was lost).
async fn was_stored(shared: &Shared, message: &Message) -> Result<bool, AgentError> {
    let store = shared.gateway.store();
    let found = retried_store(shared.lease, "reading a prompt", || store.get(&message.id)).await?;
    Ok(found.is_some())
}

/// The `Seq` of `message`, stored by a try whose answer was lost: among
/// the `processing` messages (a few, where it is while its lease holds),
/// else in its session's history. Rare, so a read is fine.
async fn stored_seq(shared: &Shared, message: &Message) -> Result<Option<Seq>, AgentError> {
    let store = shared.gateway.store();
    let processing = retried_store(shared.lease, "finding a prompt", || {
        store.with_status(Status::Processing)
    })
    .await?;
    if let Some((seq, _)) = processing.iter().find(|(_, m)| m.id == message.id) {
        return Ok(Some(*seq));
    }
    let history = retried_store(shared.lease, "finding a prompt", || {
        store.history_after(&message.session_id, 0)
    })
    .await?;
    Ok(history
        .iter()
        .find(|(_, m)| m.id == message.id)
        .map(|(seq, _)| *seq))
}

/// Runs the turn, and on with each agent it is handed to (a handoff), under
/// the one lease; the outcome has every agent's posts.
async fn handed_on(
    shared: &Shared,
    slot: &Slot,
    holder: &str,
    message: Message,
    seq: Seq,
    mut at_claim: Option<ViewAtClaim>,
    ending: &Ending,
) -> Result<TurnOutcome, AgentError> {
    let mut agent: Option<Arc<Shared>> = None;
    let mut before = Vec::new();
    let mut message = message;
    loop {
        let now = agent.as_deref().unwrap_or(shared);
        let turned = turn(now, slot, holder, message, seq, at_claim.take(), ending);
        match turned.await? {
            Turned::Over(mut outcome) => {
                if !before.is_empty() {
                    before.append(&mut outcome.messages);
                    outcome.messages = before;
                }
                return Ok(outcome);
            }
            Turned::Handed { to, posted, user } => {
                before.extend(posted);
                agent = Some(to);
                message = user;
            }
        }
    }
}

/// Runs the turn while keeping the session's lease; `None` when the lease
/// could not be renewed in time. And whether the turn released the lease
/// itself (with its last write).
async fn run_leased(
    shared: &Shared,
    slot: &Slot,
    holder: &str,
    message: Message,
    seq: Seq,
    at_claim: Option<ViewAtClaim>,
    valid_until: Instant,
) -> (Option<Result<TurnOutcome, AgentError>>, bool) {
    let session = message.session_id.clone();
    let prompt = message.id.clone();
    let ending = Ending::default();
    // A panic anywhere in the turn (a model backend, a stream's decoder,
    // the agent's own code) is caught here, with the lease still kept, so
    // the prompt is settled and its calls answered (`end_panicked`).
    let work = async {
        match AssertUnwindSafe(handed_on(
            shared, slot, holder, message, seq, at_claim, &ending,
        ))
        .catch_unwind()
        .await
        {
            Ok(outcome) => outcome,
            Err(payload) => {
                slot.set_running(0);
                let panic = panic_message(&*payload);
                match AssertUnwindSafe(end_panicked(shared, holder, &session, &prompt, &panic))
                    .catch_unwind()
                    .await
                {
                    Ok(ended) => ended,
                    Err(_) => Err(AgentError::Panicked {
                        session: session.clone(),
                        message: panic,
                    }),
                }
            }
        }
    };
    let mut work = pin!(work);
    let outcome = tokio::select! {
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
        () = keep_lease(shared, &session, holder, valid_until, &ending) => {
            // Another worker may have the session by now: this one stops
            // at once and posts nothing more. Whoever resumes the turn
            // answers its open calls.
            tracing::warn!(session, "the session's lease could not be renewed in time; its turn stops here and resumes elsewhere");
            slot.set_running(0);
            None
        }
    };
    (outcome, ending.released.load(Ordering::Acquire))
}

/// Gives up the session's lease unless the turn did (`released`), tried
/// again while the store fails for a moment (else it expires on its own,
/// and the session's next prompt waits for that); then wakes `serve`.
async fn release(shared: &Shared, session: &str, holder: &str, released: bool) {
    if released {
        shared.released.notify_one();
        return;
    }
    let store = shared.gateway.store();
    let released = retried_store(shared.lease, "releasing a session's lease", || {
        store.release(session, holder)
    })
    .await;
    if let Err(e) = released {
        tracing::warn!(session, error = %ErrorChain(&e), "could not release a session's lease");
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
/// to a third of the lease (each drawn below that: full jitter, as the
/// turns of a process renew on one store).
const RENEW_RETRY: Duration = Duration::from_millis(20);

/// Renews `session`'s lease every third of its length ([`Leases::renew`](kesoku_core::store::Leases::renew):
/// only while `holder` still holds it, so a lease that was broken or
/// expired is never taken back); returns once it is lost (expired, broken,
/// or another holder's) or is about to expire unrenewed (at `valid_until`,
/// less a margin, as this process's clock measures it from when the last
/// successful renewal was sent, which is never later than the
/// database's). A renewal the store failed is tried again soon, with
/// backoff, not a third of a lease later. Once the turn's last write is
/// on its way (`ending`), it never returns: that write is fenced by the
/// lease itself, and releases it.
async fn keep_lease(
    shared: &Shared,
    session: &str,
    holder: &str,
    valid_until: Instant,
    ending: &Ending,
) {
    keep_until_lost(shared, session, holder, valid_until).await;
    if ending.started.load(Ordering::Acquire) {
        std::future::pending::<()>().await;
    }
}

/// [`keep_lease`] until the lease is lost or about to expire.
async fn keep_until_lost(shared: &Shared, session: &str, holder: &str, mut valid_until: Instant) {
    let store = shared.gateway.store();
    let every = shared.lease / 3;
    let margin = shared.lease / 10;
    // The wait after a failed renewal, and the backoff it comes from.
    let mut failed: Option<Duration> = None;
    let mut backoff = Backoff::new(RENEW_RETRY, every);
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
                backoff.reset();
            }
            Ok(Ok(false)) | Err(_) => return,
            Ok(Err(e)) => {
                tracing::warn!(session, error = %ErrorChain(&e), "could not renew a session's lease; trying again");
                failed = Some(backoff.next_delay().unwrap_or(every));
            }
        }
    }
}
