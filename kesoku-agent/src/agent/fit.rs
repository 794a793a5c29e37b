//! Keeping a turn's requests inside the model's context window: before
//! each model call the view is compacted when its estimate passes
//! [`COMPACT_AT`] of the window (after the room the reply needs), by the
//! agent's [`Compaction`]; after the provider refused one as too long, it
//! learns the window and the count, and compacts once more. `run.rs`
//! posts the summary a compaction made, and asks.

use std::sync::atomic::Ordering;

use kesoku_core::{Message, MessageType, Role, Status, keys};
use kesoku_llm::{AssistantTurn, ToolDeclaration};

use super::compaction::{
    self, COMPACT_AT, COMPACT_TO, Compacted, Compaction, CompactionRequest, CompactionStrategy,
    DropOldest, ESTIMATE, Summarize,
};
use super::shared::Shared;
use super::view::View;

/// The estimated tokens of what a request sends beside the history: the
/// instructions and the tools' declarations.
pub(crate) fn overhead(shared: &Shared, declarations: &[ToolDeclaration]) -> u64 {
    let system = shared.options.system.as_deref().map_or(0, str::len);
    let tools: usize = declarations
        .iter()
        .map(|d| d.name.len() + d.description.len() + d.parameters.to_string().len())
        .sum();
    u64::try_from((system + tools) / 4).unwrap_or(u64::MAX)
}

/// The most tokens a request may hold: the window set on the agent, else
/// the model's as its backend knows it, bounded by what a refusal taught.
fn window(shared: &Shared) -> Option<u64> {
    let known = shared
        .context_window
        .or_else(|| shared.llm.context_window(&shared.options.model));
    match (known, shared.learned_window.load(Ordering::Relaxed)) {
        (known, 0) => known,
        (Some(known), learned) => Some(known.min(learned)),
        (None, learned) => Some(learned),
    }
}

/// Compacts `view` if a request of it and `overhead` would pass
/// [`COMPACT_AT`] of the window, or at once when `force`d (after a
/// refusal; with `guess`, a window for this request alone when the
/// refusal named no size); the summary to post, if the strategy made
/// one. The turn of `prompt` is kept whole.
pub(crate) async fn fit(
    shared: &Shared,
    view: &mut View,
    prompt: &Message,
    overhead: u64,
    force: bool,
    guess: Option<u64>,
) -> Option<Message> {
    let strategy: &dyn CompactionStrategy = match &shared.compaction {
        Compaction::Off => return None,
        Compaction::DropOldestTurns => &DropOldest,
        Compaction::Summarize => &Summarize,
        Compaction::Custom(strategy) => &**strategy,
    };
    let window = match (window(shared), guess) {
        (Some(known), Some(guess)) => Some(known.min(guess)),
        (known, guess) => known.or(guess),
    };
    let usable = window?.saturating_sub(u64::from(shared.options.max_tokens));
    let (estimate, _) = view.estimate(overhead);
    if !force && share(estimate) <= share(usable) * COMPACT_AT {
        return None;
    }
    let current = view.messages.iter().rposition(|m| m.id == prompt.id)?;
    let turns = compaction::turn_starts(&view.messages, current);
    let tokens = view.estimates();
    let (overhead, _) = View::default().estimate(overhead);
    let target = truncate(share(usable) * COMPACT_TO).saturating_sub(overhead);
    let request = CompactionRequest {
        session: &prompt.session_id,
        messages: &view.messages,
        tokens: &tokens,
        turns: &turns,
        target,
        llm: &*shared.llm,
        options: &shared.options,
    };
    let chosen = match strategy.compact(request).await {
        Ok(chosen) => chosen,
        Err(e) => {
            tracing::warn!(error = %e, "compacting the view failed; its oldest turns are dropped instead");
            Compacted::keep_from(request.keep_fitting(target))
        }
    };
    // At a turn's start, so no call is parted from its result.
    let lead = compaction::lead(&view.messages);
    let keep_from = turns
        .iter()
        .rev()
        .copied()
        .find(|&t| t <= chosen.keep_from)
        .unwrap_or(lead);
    // Dropping only an earlier summary would summarize the summary, step
    // after step, when the running turn alone passes the budget.
    let first = lead + usize::from(view.messages.get(lead).is_some_and(compaction::is_summary));
    if keep_from <= first {
        return None;
    }
    tracing::info!(
        session = %prompt.session_id,
        estimate,
        window = usable,
        dropped = keep_from - lead,
        "the view passed its budget and was compacted"
    );
    let summary = chosen.summary.map(|text| {
        let mut m = Message::new(
            &prompt.session_id,
            Role::System,
            MessageType::Text,
            format!("A summary of the earlier conversation:\n{text}"),
        )
        .with_sender("agent")
        .with_status(Status::Processed);
        m.metadata.insert(
            keys::SUMMARY.into(),
            serde_json::json!({"from": view.messages[keep_from].id}),
        );
        if !chosen.usage.is_empty()
            && let Ok(usage) = serde_json::to_value(chosen.usage)
        {
            m.metadata.insert(keys::USAGE.into(), usage);
        }
        m
    });
    view.compact(keep_from, summary.clone());
    summary
}

/// What a refusal of the request as too long teaches. A size it named
/// (the limit, else a little under the request's) is the model's window,
/// for every session of the agent; how the estimate compares with the
/// provider's count calibrates this one's. With no size named, a guess a
/// little under the estimate, for the one request asked again: returned,
/// not kept, so one odd refusal cannot shrink every session's view.
pub(crate) fn learn(
    shared: &Shared,
    view: &mut View,
    raw: u64,
    tokens: Option<u64>,
    limit: Option<u64>,
) -> Option<u64> {
    let room = u64::from(shared.options.max_tokens);
    let Some(named) = limit.or_else(|| tokens.map(|t| t / 10 * 9)) else {
        let (estimate, _) = view.estimate(0);
        return Some((estimate / 10 * 8).saturating_add(room));
    };
    let learned = named.saturating_add(room);
    let _ = shared
        .learned_window
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
            Some(if was == 0 { learned } else { was.min(learned) })
        });
    if let Some(tokens) = tokens
        && raw > 0
    {
        #[allow(clippy::cast_precision_loss)] // Token counts, far below 2^52.
        view.calibrate(tokens as f64 / raw as f64);
    }
    None
}

/// Stores the request's uncalibrated estimate with a reply that has the
/// provider's count, so the next estimate is calibrated by the two.
pub(crate) fn stamp(turn: &mut AssistantTurn, raw: u64) {
    if turn.usage.is_empty() {
        return;
    }
    let first = match turn.text_message.as_deref_mut() {
        Some(m) => Some(m),
        None => turn.calls.first_mut().map(|c| &mut c.message),
    };
    if let Some(m) = first {
        m.metadata.insert(ESTIMATE.into(), raw.into());
    }
}

#[allow(clippy::cast_precision_loss)] // Token counts, far below 2^52.
fn share(tokens: u64) -> f64 {
    tokens as f64
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Positive, far below 2^52.
fn truncate(tokens: f64) -> u64 {
    tokens as u64
}
