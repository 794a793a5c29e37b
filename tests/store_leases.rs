//! The store conformance suite's lease checks
//! (`kesoku::store::testing::leases`), a test per check and backend
//! (`store_suite!`, `support/stores.rs`).

#[macro_use]
#[path = "support/stores.rs"]
mod stores;

store_suite!(
    leases;
    leases_are_exclusive_until_they_expire,
    a_broken_lease_is_not_taken_back_by_its_old_holder,
    renewals_extend_only_a_live_lease_of_its_holder,
    leases_follow_their_model_under_random_operations,
    leased_inserts_need_a_live_lease,
    leased_transitions_need_a_live_lease,
    a_lost_lease_orders_the_old_holders_writes_first,
);
