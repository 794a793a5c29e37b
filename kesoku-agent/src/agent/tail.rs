//! A session read for a turn with no view of it kept: only the end the
//! model will be shown, however long the session, with what the view
//! always keeps.
//!
//! The view of a session past the window is compacted to its leading
//! system messages, a summary if there is one, and the turns from a
//! turn's start on (`compaction.rs`). So a turn reads the session from
//! its end, a page at a time, until what it read passes the size at
//! which the view is compacted (then compaction keeps a part of it), or
//! holds the newest summary and the message it starts from (then the
//! view starts there); and then the session's leading system messages.
//! What it reads is bounded by the window, not by the session's length;
//! the view made of it is the one a whole read would make, but for where
//! a compaction cuts in a view that stays under the window anyway.

use std::time::Duration;

use kesoku_core::store::{Page, Seq, Store};
use kesoku_core::{Message, Role, keys};

use super::compaction;
use super::outcome::AgentError;
use super::retry::retried_store;
use super::view;

/// The first page read, in messages; each next one is twice as long.
const FIRST_PAGE: usize = 128;
/// The longest page.
const MAX_PAGE: usize = 4_096;
/// The most leading system messages read; a session that starts with
/// more is read whole.
const LEAD: usize = 16;

/// The messages of `session` a turn's view is made of, in order: the
/// whole session when it is short, else its end past `bound` (the tokens
/// at which a view is compacted; what a request adds beside the history
/// is not counted, so a little more is read than needed), from a turn's
/// start, after its leading system messages.
pub(crate) async fn read(
    store: &dyn Store,
    session: &str,
    bound: u64,
    budget: Duration,
) -> Result<Vec<(Seq, Message)>, AgentError> {
    let Some(end) = end(store, session, bound, budget).await? else {
        return whole(store, session, budget).await;
    };
    let first = end.first().map_or(Seq::MAX, |(seq, _)| *seq);
    let head = retried_store(budget, "reading the start of a session", || {
        store.history_page(session, Page::first(LEAD).before(first))
    })
    .await?;
    let lead = head
        .iter()
        .take_while(|(_, m)| m.role == Role::System && !compaction::is_summary(m))
        .count();
    if lead == LEAD {
        return whole(store, session, budget).await;
    }
    let mut out: Vec<(Seq, Message)> = head.into_iter().take(lead).collect();
    out.extend(end);
    Ok(out)
}

/// The end of `session` a view starts from, or `None` when the session
/// is to be read whole: it is short, or holds no turn's start there.
async fn end(
    store: &dyn Store,
    session: &str,
    bound: u64,
    budget: Duration,
) -> Result<Option<Vec<(Seq, Message)>>, AgentError> {
    // Read newest first; `pages[0]` is the newest.
    let mut pages: Vec<Vec<(Seq, Message)>> = Vec::new();
    let (mut before, mut size, mut raw) = (Seq::MAX, FIRST_PAGE, 0_u64);
    // The latest count the provider gave, over its estimate, as the view
    // calibrates by; the newest summary, and whether what it starts from
    // was read.
    let mut ratio = None;
    let mut summary: Option<Option<String>> = None;
    let mut from_read = false;
    loop {
        let page = retried_store(budget, "reading the end of a session", || {
            store.history_page(session, Page::last(size).before(before))
        })
        .await?;
        let full = page.len() == size;
        for (_, m) in page.iter().rev() {
            if ratio.is_none() {
                ratio = compaction::calibration(m);
            }
            if summary.is_none() && compaction::is_summary(m) {
                summary = Some(starts_from(m));
            }
            from_read |= matches!(&summary, Some(Some(from)) if *from == m.id);
            if view::for_model(m) {
                raw += compaction::estimate(m);
            }
        }
        if let Some((seq, _)) = page.first() {
            before = *seq;
        }
        pages.push(page);
        if !full {
            // The session's start: read whole.
            return Ok(None);
        }
        #[allow(clippy::cast_precision_loss)] // Token counts, far below 2^52.
        let past = raw as f64 * ratio.unwrap_or(1.0) > bound as f64;
        let enough = match &summary {
            Some(Some(_)) => from_read,
            _ => past,
        };
        if enough {
            break;
        }
        size = (size * 2).min(MAX_PAGE);
    }
    let mut end: Vec<(Seq, Message)> = pages.into_iter().rev().flatten().collect();
    // From what the summary starts from, else from the first turn's start.
    let start = match summary {
        Some(Some(from)) => end.iter().position(|(_, m)| m.id == from),
        _ => end.iter().position(|(_, m)| m.role == Role::User),
    };
    let Some(start) = start else {
        return Ok(None);
    };
    end.drain(..start);
    Ok(Some(end))
}

/// The id of the message a summary's view starts from.
fn starts_from(summary: &Message) -> Option<String> {
    summary.metadata[keys::SUMMARY]["from"]
        .as_str()
        .map(str::to_owned)
}

/// A session's whole stored history (tried again while the store fails
/// for a moment, for up to `budget`).
pub(crate) async fn whole(
    store: &dyn Store,
    session: &str,
    budget: Duration,
) -> Result<Vec<(Seq, Message)>, AgentError> {
    Ok(retried_store(budget, "loading a session's history", || {
        store.history_after(session, 0)
    })
    .await?)
}
