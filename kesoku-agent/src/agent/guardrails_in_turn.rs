//! A turn's side of its guardrails, with their IO: every guardrail of a
//! kind checked at once, a failure or a panic caught and named, the first
//! objection in the order they were added kept. What a verdict does to
//! the turn is the machine's (`machine/guarded.rs`).

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

use super::guardrails::{GuardInput, GuardVerdict, Guardrail};
use super::hooks_in_turn::guarded;
use super::outcome::HookFailure;

/// Checks `input` with every guardrail of `guardrails` at once: the first
/// (in their order) that objects, with its verdict; `None` when all pass.
/// It answers as soon as that is known: an objection waits only for the
/// guardrails before it, not for slower ones after.
pub(crate) async fn objection(
    guardrails: &[Guardrail],
    input: &GuardInput,
) -> Result<Option<(String, GuardVerdict)>, HookFailure> {
    let mut checks: FuturesUnordered<_> = guardrails
        .iter()
        .enumerate()
        .map(|(i, g)| async move { (i, guarded(g.name(), || g.check(input.clone())).await) })
        .collect();
    let mut verdicts: Vec<Option<Result<GuardVerdict, HookFailure>>> =
        guardrails.iter().map(|_| None).collect();
    // The guardrails before this one all passed.
    let mut settled = 0;
    while let Some((i, verdict)) = checks.next().await {
        verdicts[i] = Some(verdict);
        while let Some(verdict) = verdicts.get_mut(settled).and_then(Option::take) {
            match verdict? {
                GuardVerdict::Pass => settled += 1,
                verdict => return Ok(Some((guardrails[settled].name().to_owned(), verdict))),
            }
        }
    }
    Ok(None)
}
