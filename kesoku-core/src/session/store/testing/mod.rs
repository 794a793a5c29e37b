//! The conformance suite every built-in store passes, for a store of
//! one's own to prove itself with: [`conformance`] runs every check on
//! fresh stores, and each check is also a function of its own
//! ([`log`], [`leases`], [`claims`]) to run as a test apiece.
//!
//! Feature `testing`. The checks panic, naming what failed; some wait
//! for leases to expire (a few hundred milliseconds each), and some
//! spawn tasks, so run them on a tokio runtime with time enabled.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use kesoku_core::store::MemoryStore;
//! use kesoku_core::store::testing::{Fixture, conformance};
//!
//! conformance(|| async { Fixture::new(Arc::new(MemoryStore::new())) }).await;
//! # });
//! ```

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures_util::FutureExt as _;

pub mod claims;
mod fixture;
pub mod leases;
pub mod log;

pub use fixture::Fixture;

/// A check: its name and what it runs.
type Check = (
    &'static str,
    fn(Fixture) -> Pin<Box<dyn Future<Output = ()> + Send>>,
);

macro_rules! checks {
    ($($module:ident :: $check:ident),* $(,)?) => {
        /// The names of every check, as [`conformance`] runs them.
        pub const CHECKS: &[&str] = &[$(stringify!($check)),*];

        fn all() -> Vec<Check> {
            vec![$((stringify!($check), |f| Box::pin($module::$check(f)))),*]
        }
    };
}

checks!(
    log::round_trip,
    log::history_order,
    log::history_after_resumes,
    log::history_pages_are_parts_of_the_history,
    log::duplicate_writes_nothing,
    log::after_pages_in_order,
    log::with_status_lists_in_order,
    log::transition_is_conditional,
    log::concurrent_claims_have_one_winner,
    log::sessions_listing,
    log::reopening_sees_everything,
    log::concurrent_inserts_become_visible_in_order,
    leases::leases_are_exclusive_until_they_expire,
    leases::a_broken_lease_is_not_taken_back_by_its_old_holder,
    leases::renewals_extend_only_a_live_lease_of_its_holder,
    leases::leases_follow_their_model_under_random_operations,
    leases::leased_inserts_need_a_live_lease,
    leases::leased_transitions_need_a_live_lease,
    leases::a_lost_lease_orders_the_old_holders_writes_first,
    claims::expired_turns_are_requeued,
    claims::claim_next_takes_each_prompt_once_in_order,
    claims::insert_claimed_stores_and_leases_at_once_or_not_at_all,
    claims::insert_claimed_after_also_reads_what_the_session_stored_since,
    claims::finish_turn_posts_settles_and_releases_at_once_or_not_at_all,
    claims::sessions_count_every_write_of_a_turn_as_it_happens,
);

/// Runs every check of the suite ([`CHECKS`]), each on a fresh store from
/// `fresh`, one after another.
///
/// # Panics
/// At the first check that fails: "store conformance: `CHECK` failed:
/// " and what it found.
pub async fn conformance<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Fixture>,
{
    for (name, check) in all() {
        let fixture = fresh().await;
        if let Err(panic) = AssertUnwindSafe(check(fixture)).catch_unwind().await {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            panic!("store conformance: `{name}` failed: {why}");
        }
    }
}
