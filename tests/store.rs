//! The store conformance suite's message checks
//! (`kesoku::store::testing::log`), a test per check and backend
//! (`store_suite!`, `support/stores.rs`). Adding a backend is one fixture
//! function there.

#[macro_use]
#[path = "support/stores.rs"]
mod stores;

store_suite!(
    log;
    round_trip,
    history_order,
    history_after_resumes,
    history_pages_are_parts_of_the_history,
    duplicate_writes_nothing,
    after_pages_in_order,
    with_status_lists_in_order,
    transition_is_conditional,
    concurrent_claims_have_one_winner,
    sessions_listing,
    reopening_sees_everything,
    concurrent_inserts_become_visible_in_order,
);
