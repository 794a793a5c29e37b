//! The history as the model is shown it: every tool call answered, each
//! result right after its call's group, and progress notes (meant for the
//! user) left out.

use std::collections::{HashMap, HashSet};

use kesoku_core::store::Seq;
use kesoku_core::{Message, MessageType, keys};

use super::approval;
use super::compaction;

/// The tool calls of `history` that have no result: a turn cut short
/// before they ran, or a crash. Each gets an error result, so every
/// provider's rule that a call is answered holds.
pub(crate) fn orphans(history: &[Message]) -> Vec<&Message> {
    if !history.iter().any(|m| m.kind == MessageType::ToolCall) {
        return Vec::new();
    }
    let answered: HashSet<&str> = history
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .filter_map(|m| m.parent_id.as_deref())
        .collect();
    history
        .iter()
        .filter(|m| m.kind == MessageType::ToolCall && !answered.contains(m.id.as_str()))
        .collect()
}

/// The error result that answers an orphaned call.
pub(crate) fn healing_result(call: &Message) -> Message {
    let name = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
    let error = format!(
        "the call to `{name}` was interrupted before it returned a result; it may or may not have run"
    );
    approval::refused_result(call, &error, "interrupted")
}

/// Whether the model is shown `m`: progress notes tools posted are for
/// the user only, and a person's decision on a call is the agent's (the
/// model reads a denial in the call's result).
pub(crate) fn for_model(m: &Message) -> bool {
    !m.metadata.get("progress").is_some_and(|p| p == true) && !approval::is_decision(m)
}

/// Orders `history` for the model in one pass: each group of consecutive
/// tool calls is followed by their results, in call order, wherever the
/// results were stored (a result healed later is stored after messages
/// that followed its call, and `OpenAI` wants results right after calls).
pub(crate) fn model_view(mut history: Vec<Message>) -> Vec<Message> {
    if !history.iter().any(|m| m.kind == MessageType::ToolResult) {
        // No result to move (a prompt, say): the order stands.
        history.retain(for_model);
        return history;
    }
    // A call's index → the index of its first result, and the reverse.
    let mut result_of: HashMap<usize, usize> = HashMap::new();
    let mut placed: HashSet<usize> = HashSet::new();
    {
        // Call id → the index of the first call of that id the model is
        // shown (whose group its result goes out with), and whether a
        // result of it was found (only the first is placed).
        let mut calls: HashMap<&str, (Option<usize>, bool)> = HashMap::new();
        for (i, m) in history.iter().enumerate() {
            if m.kind == MessageType::ToolCall {
                let first = &mut calls.entry(m.id.as_str()).or_default().0;
                if first.is_none() && for_model(m) {
                    *first = Some(i);
                }
            }
        }
        for (i, m) in history.iter().enumerate() {
            if m.kind == MessageType::ToolResult
                && let Some((call, answered)) =
                    m.parent_id.as_deref().and_then(|p| calls.get_mut(p))
                && !*answered
            {
                *answered = true;
                placed.insert(i);
                if let Some(call) = *call {
                    result_of.insert(call, i);
                }
            }
        }
    }
    let mut slots: Vec<Option<Message>> = history.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    // The indexes of the calls of the group being read.
    let mut group: Vec<usize> = Vec::new();
    for i in 0..slots.len() {
        // A placed result goes out with its call's group.
        if placed.contains(&i) {
            continue;
        }
        let Some(m) = slots[i].take() else { continue };
        if !for_model(&m) {
            continue;
        }
        let is_call = m.kind == MessageType::ToolCall;
        if is_call {
            group.push(i);
        }
        out.push(m);
        let next_is_call = slots
            .get(i + 1)
            .and_then(Option::as_ref)
            .is_some_and(|n| n.kind == MessageType::ToolCall);
        if is_call && !next_is_call {
            for call in group.drain(..) {
                if let Some(r) = result_of.get(&call).and_then(|&j| slots[j].take()) {
                    out.push(r);
                }
            }
        }
    }
    out
}

/// A session's history as the model is shown it, as of a `Seq`: loaded
/// once, then kept between turns and brought up to date with only the
/// messages stored since (see `sessions.rs`).
///
/// Once compacted, it holds only what the model is still shown: the
/// session's leading system messages, a summary if there is one, and the
/// turns from where it was cut.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Every message of the session up to this one is in `messages`.
    pub(crate) seq: Seq,
    /// The history ordered for the model ([`model_view`]).
    pub(crate) messages: Vec<Message>,
    /// Whether a call has no result yet (or is last): a later result would
    /// move into the middle, so the view cannot simply grow.
    open: bool,
    /// The estimated tokens of `messages`, uncalibrated.
    tokens: u64,
    /// The latest reply's count over its estimate.
    calibration: Option<f64>,
    /// The smallest request of this view the provider refused as too long
    /// without naming the window, as estimated (uncalibrated): the window
    /// is below it, for this session's later requests too.
    ceiling: Option<u64>,
    /// Where the running turn's own posts start: they are dropped when it
    /// ends, and the next turn reads them back from the store, unless the
    /// turn knows nothing else was stored between them (`run.rs`).
    mark: usize,
}

impl View {
    /// The view of a whole stored history.
    pub(crate) fn new(history: Vec<(Seq, Message)>) -> Self {
        let mut view = View::default();
        view.grow(history);
        view
    }

    /// Brings the view up to date with the messages stored after its
    /// `Seq`. `false` (and the view unchanged) when it cannot grow by
    /// them alone: it must then be loaded whole.
    pub(crate) fn extend(&mut self, newer: Vec<(Seq, Message)>) -> bool {
        if self.open && !newer.is_empty() {
            return false;
        }
        self.grow(newer);
        true
    }

    /// Whether a call has no result: the turn heals it first.
    pub(crate) fn has_orphans(&self) -> bool {
        self.open
    }

    /// [`extend`](Self::extend) by what a turn stored ([`stored_by_turn`]).
    pub(crate) fn extend_stored(&mut self, stored: Stored) -> bool {
        if self.open && !stored.messages.is_empty() {
            return false;
        }
        self.grow_to(stored.last, stored.messages);
        true
    }

    fn grow(&mut self, newer: Vec<(Seq, Message)>) {
        let Some(&(last, _)) = newer.last() else {
            return;
        };
        self.grow_to(last, newer.into_iter().map(|(_, m)| m).collect());
    }

    /// Grows by `newer`, the messages up to `last`.
    fn grow_to(&mut self, last: Seq, newer: Vec<Message>) {
        if newer.is_empty() {
            return;
        }
        self.seq = last;
        // Nothing before is open, so no result in `newer` belongs
        // before it, and the two order independently.
        self.open = !orphans(&newer).is_empty()
            || newer
                .last()
                .is_some_and(|m| m.kind == MessageType::ToolCall);
        for m in model_view(newer) {
            if compaction::is_summary(&m) {
                self.start_from(m);
            } else {
                self.push(m);
            }
        }
    }

    /// Adds `m` at the end.
    pub(crate) fn push(&mut self, m: Message) {
        self.tokens += compaction::estimate(&m);
        if let Some(ratio) = compaction::calibration(&m) {
            self.calibration = Some(ratio);
        }
        self.messages.push(m);
    }

    /// The tokens of a request of the view and `overhead` (instructions
    /// and tools, estimated the same way), calibrated by the latest count
    /// the provider gave; and the uncalibrated estimate, stored with the
    /// reply to calibrate the next.
    pub(crate) fn estimate(&self, overhead: u64) -> (u64, u64) {
        let raw = self.tokens + overhead;
        (scaled(raw, self.ratio()), raw)
    }

    /// Sets the ratio of the provider's count to the estimate.
    pub(crate) fn calibrate(&mut self, ratio: f64) {
        self.calibration = Some(ratio.clamp(0.25, 4.0));
    }

    /// Notes that a request estimated at `raw` (uncalibrated) was refused
    /// as too long.
    pub(crate) fn refused(&mut self, raw: u64) {
        self.ceiling = Some(self.ceiling.map_or(raw, |c| c.min(raw)));
    }

    /// The most a request of this view may hold, calibrated, as refusals
    /// naming no window taught: a little under the smallest refused.
    pub(crate) fn ceiling(&self) -> Option<u64> {
        self.ceiling
            .map(|raw| scaled(raw, self.ratio()).saturating_sub(1))
    }

    /// The latest count over its estimate (1 before any).
    pub(crate) fn ratio(&self) -> f64 {
        self.calibration.unwrap_or(1.0)
    }

    /// Marks where the running turn's posts start.
    pub(crate) fn mark(&mut self) {
        self.mark = self.messages.len();
    }

    /// Drops the running turn's posts, and gives them back, in order (for
    /// [`stored_by_turn`]).
    pub(crate) fn rewind(&mut self) -> Vec<Message> {
        let posts = self.messages.split_off(self.mark.min(self.messages.len()));
        for m in &posts {
            self.tokens = self.tokens.saturating_sub(compaction::estimate(m));
        }
        posts
    }

    /// Each message's estimated tokens, calibrated.
    pub(crate) fn estimates(&self) -> Vec<u64> {
        let ratio = self.ratio();
        self.messages
            .iter()
            .map(|m| scaled(compaction::estimate(m), ratio))
            .collect()
    }

    /// Cuts the view to its leading system messages, then `summary` (if
    /// any), then the messages from `keep_from` on (a turn's start, at or
    /// before the running turn's).
    pub(crate) fn compact(&mut self, keep_from: usize, summary: Option<Message>) {
        let lead = compaction::lead(&self.messages);
        let keep_from = keep_from.max(lead);
        let dropped: u64 = self
            .messages
            .drain(lead..keep_from)
            .map(|m| compaction::estimate(&m))
            .sum();
        self.tokens = self.tokens.saturating_sub(dropped);
        self.mark = self.mark.saturating_sub(keep_from - lead);
        if let Some(summary) = summary {
            self.tokens += compaction::estimate(&summary);
            self.messages.insert(lead, summary);
            self.mark += 1;
        }
    }

    /// A stored summary read back: the view starts from it, and from the
    /// message it names on. One already in place (this process made it)
    /// is not added again; one naming a message the view no longer holds
    /// is left out.
    fn start_from(&mut self, summary: Message) {
        let lead = compaction::lead(&self.messages);
        if self.messages.get(lead).is_some_and(|m| m.id == summary.id) {
            return;
        }
        let from = summary.metadata[keys::SUMMARY]["from"]
            .as_str()
            .and_then(|id| self.messages.iter().position(|m| m.id == id));
        if let Some(from) = from {
            self.compact(from, Some(summary));
        }
    }
}

/// What a turn stored, in the store's order: `messages`, the last at
/// `last`, one after another (for [`View::extend_stored`]).
#[derive(Debug)]
pub(crate) struct Stored {
    last: Seq,
    messages: Vec<Message>,
}

/// What a completed turn stored, for its session's view to take as the
/// next turn would read it back: the posts the view held (`held`, as
/// [`View::rewind`] gave them back), then the rest of what the turn's
/// `outcome` ends with (its last write's, copied), the store having given
/// them `seqs`, in order. `None` unless the seqs follow the view's
/// (`from`) one after another (a seq is one message's place in the
/// store's order, so nothing else was stored between them), and the
/// outcome ends with the held posts and the rest: the next turn then
/// reads them back from the store.
pub(crate) fn stored_by_turn(
    from: Seq,
    seqs: &[Seq],
    mut held: Vec<Message>,
    outcome: &[Message],
) -> Option<Stored> {
    let &last = seqs.last()?;
    if held.len() > seqs.len() || !seqs.iter().zip(from + 1..).all(|(seq, next)| *seq == next) {
        return None;
    }
    let ours = &outcome[outcome.len().checked_sub(seqs.len())?..];
    if !held.iter().zip(ours).all(|(h, m)| h.id == m.id) {
        return None;
    }
    held.extend(ours[held.len()..].iter().cloned());
    Some(Stored {
        last,
        messages: held,
    })
}

/// `tokens` times `ratio`, rounded up.
fn scaled(tokens: u64, ratio: f64) -> u64 {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )] // Token counts, far below 2^52; the ratio is positive.
    let scaled = (tokens as f64 * ratio).ceil() as u64;
    scaled
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod compaction_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use kesoku_core::{Role, ToolRequest};
    use serde_json::json;

    fn call(id: &str) -> Message {
        Message::tool_call("s", &ToolRequest::new(id, "t", json!({})))
    }

    fn result(call: &Message, text: &str) -> Message {
        Message::new("s", Role::Tool, MessageType::ToolResult, text).with_parent(&call.id)
    }

    fn text(role: Role, t: &str) -> Message {
        Message::new("s", role, MessageType::Text, t)
    }

    fn contents(v: &[Message]) -> Vec<&str> {
        v.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn results_follow_their_call_group() {
        let (a, b) = (call("a"), call("b"));
        let history = vec![
            text(Role::User, "q1"),
            a.clone(),
            b.clone(),
            text(Role::User, "q2"),
            result(&b, "rb"),
            result(&a, "ra"),
            text(Role::Assistant, "done"),
        ];
        let view = model_view(history);
        assert_eq!(
            contents(&view),
            ["q1", "t({})", "t({})", "ra", "rb", "q2", "done"]
        );
    }

    #[test]
    fn a_view_grown_in_parts_is_the_view_of_the_whole() {
        let (a, b, c) = (call("a"), call("b"), call("c"));
        let mut note = text(Role::Assistant, "halfway");
        note.metadata.insert("progress".into(), true.into());
        let history = vec![
            text(Role::User, "q1"),
            a.clone(),
            b.clone(),
            note,
            result(&b, "rb"),
            result(&a, "ra"),
            text(Role::Assistant, "a1"),
            text(Role::User, "q2"),
            c.clone(),
            result(&c, "rc"),
            result(&c, "rc again"),
            text(Role::Assistant, "a2"),
        ];
        let seqs: Vec<(Seq, Message)> = (1..).zip(history).collect();
        let ids = |v: &[Message]| v.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
        for split in 0..=seqs.len() {
            for second in split..=seqs.len() {
                let mut view = View::new(seqs[..split].to_vec());
                let grew = view.extend(seqs[split..second].to_vec());
                let whole = model_view(seqs[..second].iter().map(|(_, m)| m.clone()).collect());
                // Where it cannot grow (a call still open), the turn loads
                // the whole history instead.
                let open = !orphans(
                    &seqs[..split]
                        .iter()
                        .map(|(_, m)| m.clone())
                        .collect::<Vec<_>>(),
                )
                .is_empty();
                assert_eq!(grew, !open || split == second, "{split}..{second}");
                if grew {
                    assert_eq!(ids(&view.messages), ids(&whole), "{split}..{second}");
                    assert_eq!(view.seq, if second == 0 { 0 } else { seqs[second - 1].0 });
                }
            }
        }
    }

    #[test]
    fn progress_notes_are_left_out_and_orphans_found() {
        let (a, b) = (call("a"), call("b"));
        let mut note = text(Role::Assistant, "halfway");
        note.metadata.insert("progress".into(), true.into());
        let history = vec![
            text(Role::User, "q"),
            a.clone(),
            b.clone(),
            note,
            result(&a, "ra"),
        ];
        let orphaned: Vec<&str> = orphans(&history).iter().map(|m| m.id.as_str()).collect();
        assert_eq!(orphaned, [b.id.as_str()]);
        let healed = healing_result(&b);
        assert_eq!(healed.parent_id.as_deref(), Some(b.id.as_str()));
        assert!(healed.is_tool_error());
        let mut history = history;
        history.push(healed);
        let view = model_view(history);
        assert_eq!(view.len(), 5);
        assert_eq!(contents(&view)[..4], ["q", "t({})", "t({})", "ra"]);
        assert!(view[4].content.contains("interrupted"));
    }
}
