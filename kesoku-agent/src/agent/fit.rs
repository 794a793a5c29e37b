//! Keeping a turn's requests inside the model's context window: before
//! each model call the view is compacted when its estimate passes
//! [`COMPACT_AT`] of the window (after the room the reply needs), by the
//! agent's [`Compaction`]; after the provider refused one as too long, it
//! learns what the refusal says of the window, and compacts again, until
//! a request is accepted or nothing but the running turn is left. `run.rs`
//! posts the summary a compaction made, and asks.

use std::sync::atomic::Ordering;

use kesoku_core::{ErrorChain, Message, MessageType, Role, Status, keys};
use kesoku_llm::{AssistantTurn, LlmError, ToolDeclaration};

use super::compaction::{
    self, COMPACT_AT, COMPACT_TO, Compacted, Compaction, CompactionRequest, CompactionStrategy,
    DropOldest, ESTIMATE, Summarize, json_len,
};
use super::shared::Shared;
use super::view::View;

/// The estimated tokens of what a request sends beside the history: the
/// instructions and the tools' declarations.
pub(crate) fn overhead(shared: &Shared, declarations: &[ToolDeclaration]) -> u64 {
    let text = |t: &str| u64::try_from(t.len()).unwrap_or(u64::MAX);
    let system = shared.options.system.as_deref().map_or(0, text);
    let tools: u64 = declarations
        .iter()
        .map(|d| text(&d.name) + text(&d.description) + json_len(&d.parameters))
        .sum();
    (system + tools) / 4
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

/// The size, in uncalibrated tokens of a request, past which a view is
/// compacted: what a turn with no view kept reads a session's end up to
/// (`tail.rs`). `None` when a view is never cut on its own (no window
/// known, compaction off) or a strategy of one's own may want any turn
/// of the session: then the session is read whole.
pub(crate) fn cold_bound(shared: &Shared) -> Option<u64> {
    if !matches!(
        shared.compaction,
        Compaction::DropOldestTurns | Compaction::Summarize
    ) {
        return None;
    }
    // A fresh view's: the window less the reply's room, no refusal yet.
    let usable = usable(shared, &View::default())?;
    Some(truncate(share(usable) * COMPACT_AT))
}

/// What [`fit`] did to the view.
#[derive(Debug)]
pub(crate) enum Fitted {
    /// Nothing was cut: it fits, or nothing more can be cut (the running
    /// turn alone, and the session's leading system messages, are left).
    Unchanged,
    /// Older turns were cut, with the summary to post if the strategy
    /// made one.
    Compacted(Option<Box<Message>>),
}

/// The most tokens a request of `view` may hold: the window less the
/// reply's room, bounded by what size-less refusals taught this session.
fn usable(shared: &Shared, view: &View) -> Option<u64> {
    let window = window(shared).map(|w| w.saturating_sub(u64::from(shared.options.max_tokens)));
    match (window, view.ceiling()) {
        (Some(w), Some(c)) => Some(w.min(c)),
        (w, c) => w.or(c),
    }
}

/// Compacts `view` if a request of it and `overhead` would pass
/// [`COMPACT_AT`] of the window, or at once when `force`d (after a
/// refusal). The turn of `prompt` is kept whole.
pub(crate) async fn fit(
    shared: &Shared,
    view: &mut View,
    prompt: &Message,
    overhead: u64,
    force: bool,
) -> Fitted {
    let strategy: &dyn CompactionStrategy = match &shared.compaction {
        Compaction::Off => return Fitted::Unchanged,
        Compaction::DropOldestTurns => &DropOldest,
        Compaction::Summarize => &Summarize,
        Compaction::Custom(strategy) => &**strategy,
    };
    let Some(usable) = usable(shared, view) else {
        return Fitted::Unchanged;
    };
    let (estimate, _) = view.estimate(overhead);
    if !force && share(estimate) <= share(usable) * COMPACT_AT {
        return Fitted::Unchanged;
    }
    let Some(current) = view.messages.iter().rposition(|m| m.id == prompt.id) else {
        return Fitted::Unchanged;
    };
    let turns = compaction::turn_starts(&view.messages, current);
    let tokens = view.estimates();
    let (overhead, _) = View::default().estimate(overhead);
    let target = |usable: u64| truncate(share(usable) * COMPACT_TO).saturating_sub(overhead);
    let request = |target| CompactionRequest {
        session: &prompt.session_id,
        messages: &view.messages,
        tokens: &tokens,
        turns: &turns,
        target,
        llm: &*shared.llm,
        options: &shared.options,
    };
    let mut chosen = strategy.compact(request(target(usable))).await;
    // A summary request refused as too long, naming the window: learnt,
    // and the strategy asked once more within it (else the view would be
    // cut by the window that was too large, and refused in turn).
    if let Err(LlmError::ContextOverflow {
        limit: Some(limit), ..
    }) = &chosen
    {
        learn_limit(shared, *limit);
        if let Some(smaller) = usable_within(shared, view, usable) {
            chosen = strategy.compact(request(target(smaller))).await;
        }
    }
    let usable = usable_within(shared, view, usable).unwrap_or(usable);
    let chosen = match chosen {
        Ok(chosen) => chosen,
        Err(e) => {
            tracing::warn!(error = %ErrorChain(&e), "compacting the view failed; its oldest turns are dropped instead");
            Compacted::keep_from(request(target(usable)).keep_fitting(target(usable)))
        }
    };
    let Some(keep_from) = cut_point(view, &turns, chosen.keep_from) else {
        return Fitted::Unchanged;
    };
    tracing::info!(
        session = %prompt.session_id,
        estimate,
        window = usable,
        dropped = keep_from - compaction::lead(&view.messages),
        "the view passed its budget and was compacted"
    );
    let summary = summary_message(prompt, &view.messages[keep_from], chosen);
    view.compact(keep_from, summary.clone());
    Fitted::Compacted(summary.map(Box::new))
}

/// Where `view` is cut for a strategy that keeps it from `chosen`: at the
/// start of that message's turn (`turns`), so no call is parted from its
/// result; `None` when that cuts nothing but an earlier summary.
fn cut_point(view: &View, turns: &[usize], chosen: usize) -> Option<usize> {
    let lead = compaction::lead(&view.messages);
    let keep_from = turns
        .iter()
        .rev()
        .copied()
        .find(|&t| t <= chosen)
        .unwrap_or(lead);
    // Dropping only an earlier summary would summarize the summary, step
    // after step, when the running turn alone passes the budget.
    let first = lead + usize::from(view.messages.get(lead).is_some_and(compaction::is_summary));
    (keep_from > first).then_some(keep_from)
}

/// The message to post for the summary in `chosen`, if it made one,
/// marked with `kept`, the first message it does not replace, and the
/// tokens it cost.
fn summary_message(prompt: &Message, kept: &Message, chosen: Compacted) -> Option<Message> {
    chosen.summary.map(|text| {
        let mut m = Message::new(
            &prompt.session_id,
            Role::System,
            MessageType::Text,
            format!("A summary of the earlier conversation:\n{text}"),
        )
        .with_sender("agent")
        .with_status(Status::Processed);
        m.metadata
            .insert(keys::SUMMARY.into(), serde_json::json!({"from": kept.id}));
        if !chosen.usage.is_empty()
            && let Ok(usage) = serde_json::to_value(chosen.usage)
        {
            m.metadata.insert(keys::USAGE.into(), usage);
        }
        m
    })
}

/// The usable tokens now known, if less than `was`.
fn usable_within(shared: &Shared, view: &View, was: u64) -> Option<u64> {
    usable(shared, view).filter(|&now| now < was)
}

/// A window a refusal named: kept for every session of the agent (it is
/// the model's), never raised.
fn learn_limit(shared: &Shared, limit: u64) {
    let learned = limit.saturating_add(u64::from(shared.options.max_tokens));
    let _ = shared
        .learned_window
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
            Some(if was == 0 { learned } else { was.min(learned) })
        });
}

/// What a refusal of a request (estimated at `raw`, uncalibrated) as too
/// long teaches:
/// - a window it named is the model's, for every session of the agent;
/// - a count it named is the provider's for that request: the window is
///   below it (for every session too), and the estimate is calibrated by
///   it;
/// - with neither, the window is below that request as estimated: kept
///   for this session's view only (another session's estimate may err
///   differently, an image's say, so one odd refusal does not shrink
///   every session's view).
pub(crate) fn learn(
    shared: &Shared,
    view: &mut View,
    raw: u64,
    tokens: Option<u64>,
    limit: Option<u64>,
) {
    if let Some(limit) = limit {
        learn_limit(shared, limit);
    } else if let Some(tokens) = tokens {
        learn_limit(shared, tokens.saturating_sub(1));
    }
    if let Some(tokens) = tokens
        && raw > 0
    {
        #[allow(clippy::cast_precision_loss)] // Token counts, far below 2^52.
        view.calibrate(tokens as f64 / raw as f64);
    }
    view.refused(raw);
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
