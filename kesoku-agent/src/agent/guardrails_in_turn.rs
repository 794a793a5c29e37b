//! A turn's side of its guardrails, with their IO: every guardrail of a
//! kind checked at once, a failure or a panic caught and named, the first
//! objection in the order they were added kept. What a verdict does to
//! the turn is the machine's (`machine/guarded.rs`).

use futures_util::future::join_all;

use super::guardrails::{GuardInput, GuardVerdict, Guardrail};
use super::hooks_in_turn::guarded;
use super::outcome::HookFailure;

/// Checks `input` with every guardrail of `guardrails` at once: the first
/// (in their order) that objects, with its verdict; `None` when all pass.
pub(crate) async fn objection(
    guardrails: &[Guardrail],
    input: &GuardInput,
) -> Result<Option<(String, GuardVerdict)>, HookFailure> {
    let checks = guardrails
        .iter()
        .map(|g| guarded(g.name(), || g.check(input.clone())));
    for (guardrail, verdict) in guardrails.iter().zip(join_all(checks).await) {
        match verdict? {
            GuardVerdict::Pass => {}
            verdict => return Ok(Some((guardrail.name().to_owned(), verdict))),
        }
    }
    Ok(None)
}
