//! [`Leases`]: which worker runs a session's turn, and the writes it
//! makes only while it does.

use std::time::Duration;

use super::{Claimed, MessageLog, Seq, StoreError, StoreFuture};
use crate::session::message::{Message, Status};

/// Leases and claims: which worker runs a session's turn, and the posts
/// it makes only while it does. Each call is one conditional write, so of
/// several processes sharing a store exactly one holds a session.
pub trait Leases: MessageLog {
    /// [`insert`](MessageLog::insert), only while `holder` holds the turn lease
    /// of the message's session ([`lease`](Leases::lease)) and it has not
    /// expired, checked in the same transaction: otherwise
    /// [`StoreError::LeaseLost`], and nothing is written. How a turn posts,
    /// so a worker that lost its session (stalled past its lease, say)
    /// cannot answer a turn another worker has resumed.
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq>;

    /// [`transition`](MessageLog::transition), only while `holder` holds the
    /// turn lease of the message's session and it has not expired, checked
    /// in the same transaction: otherwise [`StoreError::LeaseLost`], and
    /// nothing is changed. `false` for an unknown id or a status not in
    /// `from`. How a turn settles its prompt, so a worker that lost the
    /// session cannot mark a turn another worker is running.
    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool>;

    /// Takes the turn lease of `session_id` for `holder`, until `ttl` from
    /// now: `true` if `holder` holds it now (it was free, expired, or
    /// `holder`'s already), `false` if another holder's lease has not
    /// expired. One conditional write, so of several processes exactly
    /// one holds a session's lease: a session runs one turn at a time
    /// across every agent sharing the store.
    ///
    /// This acquires: it takes a lease no one holds. A running turn keeps
    /// its lease with [`renew`](Leases::renew) instead, which never takes
    /// back a lease that was lost.
    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Extends `holder`'s lease of `session_id` to `ttl` from now, only
    /// while `holder` still holds it and it has not expired, in one
    /// conditional write: `true` if it was extended, `false` if it is gone
    /// (expired, released, broken with [`break_lease`](Leases::break_lease),
    /// or another holder's). Unlike [`lease`](Leases::lease) it never
    /// creates a lease, so a holder that lost its lease cannot take it
    /// back while its turn runs on: the turn must stop, since another
    /// worker may have resumed it.
    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Gives up `holder`'s lease of `session_id`; `false` if it did not
    /// hold it (it expired and another took it).
    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool>;

    /// Claims the oldest `pending_agent` user message whose session no one
    /// holds a live lease on (and that has no older one pending, or left
    /// `processing` by a dead worker until it is requeued), leasing
    /// the session to `holder` for `ttl` and setting the message
    /// `processing`, in one transaction; the message, with its `Seq`, or
    /// `None` when there is none to take. How `serve` takes work: each
    /// prompt goes to one worker, and a worker asks only when it has room.
    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>>;

    /// Drops `session_id`'s lease, whoever holds it; whether there was
    /// one. For start-up recovery on a store no other agent uses (the
    /// holder died with the process): a live holder elsewhere would find
    /// its lease gone.
    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool>;

    /// Puts every user message left `processing` in a session whose lease
    /// has expired (or was never taken) back to `pending_agent`, in one
    /// conditional update, and returns them with their `Seq`s: the turns
    /// of a worker that died, for another to take.
    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>>;

    /// Starts a turn on a new prompt: takes `holder`'s lease of
    /// `message`'s session for `ttl`, as [`lease`](Leases::lease) would,
    /// and stores `message` (which the caller has made `processing`, so
    /// no other worker claims it), in one transaction. Its `Seq`, or
    /// `None` when another holder's lease is live, and nothing is written.
    /// How an agent's `send` starts its turn in one write instead of
    /// three (store the prompt, lease the session, claim the prompt).
    ///
    /// The default takes the lease, then stores the message fenced by it
    /// ([`insert_leased`](Leases::insert_leased)), releasing the lease if
    /// the message is a duplicate or cannot be stored: steps, between
    /// which another process may see the lease held.
    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        Box::pin(async move {
            if !self.lease(&message.session_id, holder, ttl).await? {
                return Ok(None);
            }
            let stored = match self.get(&message.id).await {
                Ok(Some(_)) => Err(StoreError::Duplicate {
                    id: message.id.clone(),
                }),
                Ok(None) => self.insert_leased(message, holder).await,
                Err(e) => Err(e),
            };
            if stored.is_err() {
                let _ = self.release(&message.session_id, holder).await;
            }
            stored.map(Some)
        })
    }

    /// [`insert_claimed`](Leases::insert_claimed), then the messages of
    /// `message`'s session stored after `after` (the new prompt among
    /// them), as [`history_after`](MessageLog::history_after) returns
    /// them ([`Claimed`]), or `None` when another holder's lease is live,
    /// and nothing is written or read. How a turn whose agent kept a view
    /// of the session up to `after` starts and brings that view up to
    /// date in one call, instead of a write and a read: `SqliteStore`
    /// and `MemoryStore` read in the write's own transaction,
    /// `PostgresStore` on the same connection right after its commit.
    ///
    /// The default takes the two steps. A read that fails after the
    /// write leaves the prompt stored and the lease held, as a lost answer
    /// would: the caller's next try finds the prompt a duplicate.
    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        Box::pin(async move {
            let Some(seq) = self.insert_claimed(message, holder, ttl).await? else {
                return Ok(None);
            };
            let newer = self.history_after(&message.session_id, after).await?;
            Ok(Some(Claimed::new(seq, newer)))
        })
    }

    /// Ends `holder`'s turn of `session_id`: stores `posts` in order, each
    /// as [`insert_leased`](Leases::insert_leased) would, sets the status
    /// of the turn's prompt `prompt` to `to` if it is one of `from`, as
    /// [`transition_leased`](Leases::transition_leased) would, and
    /// releases the lease; the posts' `Seq`s. How a turn posts its last
    /// messages and settles, in one write instead of three or more. Fails
    /// with [`StoreError::LeaseLost`] unless `holder`'s lease of
    /// `session_id` is live.
    ///
    /// A store that does it in one transaction writes nothing when any
    /// part is refused ([`StoreError::LeaseLost`],
    /// [`StoreError::Duplicate`]). The default looks for a post stored
    /// already before it writes any (a refused lease refuses the first
    /// write), then does it in steps, so a failure past that (the lease
    /// expiring on the way, the database failing) may leave the first
    /// part done: a caller that tries again takes the steps itself,
    /// treating a post found stored as done.
    fn finish_turn<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        posts: &'a [Message],
        prompt: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, Vec<Seq>> {
        Box::pin(async move {
            for (i, message) in posts.iter().enumerate() {
                let twice = posts[..i].iter().any(|p| p.id == message.id);
                if twice || self.get(&message.id).await?.is_some() {
                    return Err(StoreError::Duplicate {
                        id: message.id.clone(),
                    });
                }
            }
            let mut seqs = Vec::with_capacity(posts.len());
            for message in posts {
                seqs.push(self.insert_leased(message, holder).await?);
            }
            self.transition_leased(prompt, from, to, holder).await?;
            self.release(session_id, holder).await?;
            Ok(seqs)
        })
    }
}

impl<S: Leases + ?Sized> Leases for std::sync::Arc<S> {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        (**self).insert_leased(message, holder)
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        (**self).transition_leased(id, from, to, holder)
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).lease(session_id, holder, ttl)
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        (**self).renew(session_id, holder, ttl)
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        (**self).release(session_id, holder)
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        (**self).claim_next(holder, ttl)
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        (**self).break_lease(session_id)
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        (**self).requeue_expired()
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        (**self).insert_claimed(message, holder, ttl)
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        (**self).insert_claimed_after(message, holder, ttl, after)
    }

    fn finish_turn<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        posts: &'a [Message],
        prompt: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, Vec<Seq>> {
        (**self).finish_turn(session_id, holder, posts, prompt, from, to)
    }
}
