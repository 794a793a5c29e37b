//! A session as it happens, as server-sent events: each message stored
//! (`message`), and each piece of a reply as it is written, a nested
//! agent's included (`delta`).

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt as _, stream};
use kesoku_core::gateway::Filter;

use crate::api::{AppState, Failure};

/// The events of `session` from now on.
pub(crate) async fn events(
    State(c): AppState,
    Path(session): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Failure> {
    let gateway = c.agent.gateway();
    // Subscribed before the listener reads where the store stands, so no
    // piece written meanwhile is missed.
    let deltas = gateway.deltas(Some(&session)).map(|d| {
        let event = Event::default().event("delta");
        Ok(event.json_data(&d).unwrap_or_else(|_| Event::default()))
    });
    let after = gateway.store().last_seq().await?;
    let listener = gateway
        .listen(Filter::new().session(&session).after(after))
        .await?;
    let messages = listener.filter_map(|delivery| async move {
        let delivery = delivery.ok()?;
        let data = serde_json::json!({"seq": delivery.seq, "message": delivery.message});
        Some(Ok(Event::default()
            .event("message")
            .json_data(&data)
            .ok()?))
    });
    Ok(Sse::new(stream::select(messages, deltas)).keep_alive(KeepAlive::default()))
}
