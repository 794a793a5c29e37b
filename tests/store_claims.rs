//! The store conformance suite's claim checks
//! (`kesoku::store::testing::claims`), a test per check and backend
//! (`store_suite!`, `support/stores.rs`).

#[macro_use]
#[path = "support/stores.rs"]
mod stores;

store_suite!(
    claims;
    expired_turns_are_requeued,
    claim_next_takes_each_prompt_once_in_order,
    insert_claimed_stores_and_leases_at_once_or_not_at_all,
    insert_claimed_after_also_reads_what_the_session_stored_since,
    finish_turn_posts_settles_and_releases_at_once_or_not_at_all,
    sessions_count_every_write_of_a_turn_as_it_happens,
);
