//! The console's JSON API: the sessions, a session's messages a page at
//! a time, a new prompt, an interruption, the calls waiting for a person
//! and their decisions. Every answer is data; the page shows it as text.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kesoku_agent::{Agent, ApprovalError, Decided, PendingApproval, Verdict};
use kesoku_core::store::{Page, Seq};
use kesoku_core::{Message, MessageType, Role, Status};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Keys;

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) agent: Agent,
    pub(crate) keys: Keys,
    /// Whether prompts and decided turns run here (`send`, `resume`), or
    /// are only posted, for the workers serving the store.
    pub(crate) runs_turns: bool,
}

pub(crate) type AppState = State<Arc<Shared>>;

/// An error answer: its status, and a line saying why.
pub(crate) struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl<E: std::error::Error + 'static> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            kesoku_core::ErrorChain(&e).to_string(),
        )
    }
}

/// The most sessions or messages one page holds.
const MAX_PAGE: usize = 200;

#[derive(Deserialize)]
pub(crate) struct SessionsQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

/// A session as the list shows it.
#[derive(Serialize)]
struct SessionRow {
    id: String,
    title: Option<String>,
    updated: chrono::DateTime<chrono::Utc>,
    messages: u64,
    /// `running`, `waiting` (for a person), `failed` (a prompt of it
    /// failed) or `idle`.
    status: &'static str,
}

/// Every session, newest first, those whose id or title has `q`, a page
/// at a time.
pub(crate) async fn sessions(
    State(c): AppState,
    Query(query): Query<SessionsQuery>,
) -> Result<Json<Value>, Failure> {
    let store = c.agent.gateway().store();
    let all = store.sessions().await?;
    let running = sessions_with(&c.agent, Status::Processing).await?;
    let waiting = sessions_with(&c.agent, Status::AwaitingApproval).await?;
    let failed = sessions_with(&c.agent, Status::Error).await?;
    let q = query.q.to_lowercase();
    let matching: Vec<_> = all
        .into_iter()
        .filter(|s| {
            q.is_empty()
                || s.id.to_lowercase().contains(&q)
                || s.title
                    .as_ref()
                    .is_some_and(|t| t.to_lowercase().contains(&q))
        })
        .collect();
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let rows: Vec<SessionRow> = matching
        .iter()
        .skip(query.offset)
        .take(limit)
        .map(|s| SessionRow {
            status: if running.contains(&s.id) {
                "running"
            } else if waiting.contains(&s.id) {
                "waiting"
            } else if failed.contains(&s.id) {
                "failed"
            } else {
                "idle"
            },
            id: s.id.clone(),
            title: s.title.clone(),
            updated: s.updated,
            messages: s.messages,
        })
        .collect();
    Ok(Json(json!({"total": matching.len(), "sessions": rows})))
}

/// The sessions with a user prompt in `status`.
async fn sessions_with(agent: &Agent, status: Status) -> Result<HashSet<String>, Failure> {
    let prompts = agent.gateway().store().with_status(status).await?;
    Ok(prompts
        .into_iter()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(_, m)| m.session_id)
        .collect())
}

#[derive(Deserialize)]
pub(crate) struct MessagesQuery {
    before: Option<Seq>,
    limit: Option<usize>,
}

/// A page of a session's messages, from its end back (`before` a seq),
/// oldest first, and whether older ones remain.
pub(crate) async fn messages(
    State(c): AppState,
    Path(session): Path<String>,
    Query(query): Query<MessagesQuery>,
) -> Result<Json<Value>, Failure> {
    let limit = query.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let mut page = Page::last(limit + 1);
    if let Some(before) = query.before {
        page = page.before(before);
    }
    let store = c.agent.gateway().store();
    let mut found = store.history_page(&session, page).await?;
    if found.is_empty() && query.before.is_none() {
        return Err(Failure(
            StatusCode::NOT_FOUND,
            format!("there is no session `{session}`"),
        ));
    }
    let more = found.len() > limit;
    if more {
        found.remove(0);
    }
    let messages: Vec<Value> = found
        .into_iter()
        .map(|(seq, m)| json!({"seq": seq, "message": m}))
        .collect();
    Ok(Json(json!({"messages": messages, "more": more})))
}

#[derive(Deserialize)]
pub(crate) struct PromptBody {
    text: String,
}

/// A new prompt for `session`: its turn runs here, or is posted for the
/// workers.
pub(crate) async fn prompt(
    State(c): AppState,
    Path(session): Path<String>,
    Json(body): Json<PromptBody>,
) -> Result<Json<Value>, Failure> {
    if body.text.trim().is_empty() {
        return Err(Failure(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the prompt is empty".into(),
        ));
    }
    if c.runs_turns {
        let agent = c.agent.clone();
        let (s, text) = (session.clone(), body.text);
        tokio::spawn(async move {
            if let Err(e) = agent.send(&s, &text).await {
                tracing::warn!(session = %s, error = %kesoku_core::ErrorChain(&e), "a console prompt's turn failed");
            }
        });
        return Ok(Json(json!({"session": session, "posted": true})));
    }
    let prompt = Message::new(&session, Role::User, MessageType::Text, body.text)
        .with_sender("console")
        .with_status(Status::PendingAgent);
    c.agent.gateway().post(prompt).await?;
    Ok(Json(json!({"session": session, "posted": true})))
}

/// Stops the turn of `session` running in this process.
pub(crate) async fn interrupt(
    State(c): AppState,
    Path(session): Path<String>,
) -> Result<Json<Value>, Failure> {
    if c.agent.interrupt(&session) {
        Ok(Json(json!({"interrupted": true})))
    } else {
        Err(Failure(
            StatusCode::CONFLICT,
            format!("no turn of `{session}` runs in this process"),
        ))
    }
}

/// Every call waiting for a person, across sessions, oldest first.
pub(crate) async fn approvals(State(c): AppState) -> Result<Json<Value>, Failure> {
    let store = c.agent.gateway().store();
    let paused = store.with_status(Status::AwaitingApproval).await?;
    let mut seen: HashMap<String, PendingApproval> = HashMap::new();
    let sessions: HashSet<String> = paused.into_iter().map(|(_, m)| m.session_id).collect();
    for session in sessions {
        for pending in c.agent.pending_approvals(&session).await? {
            // A nested call is listed by its own session and by those
            // above it: the longest path says where it sits.
            let keep = seen
                .get(&pending.id)
                .is_none_or(|p| p.path.len() < pending.path.len());
            if keep {
                seen.insert(pending.id.clone(), pending);
            }
        }
    }
    let mut rows = Vec::with_capacity(seen.len());
    for p in seen.into_values() {
        let asked = store.get(&p.id).await?.map(|m| m.timestamp);
        rows.push(json!({
            "id": p.id, "tool": p.tool, "arguments": p.arguments,
            "session_id": p.session_id, "prompt_id": p.prompt_id,
            "deadline": p.deadline, "asked": asked,
            "path": p.path,
        }));
    }
    rows.sort_by(|a, b| a["asked"].as_str().cmp(&b["asked"].as_str()));
    Ok(Json(json!({"approvals": rows})))
}

#[derive(Deserialize)]
pub(crate) struct DecisionBody {
    approve: bool,
    reason: Option<String>,
}

/// Decides the waiting call `id`; a turn it makes ready runs here, or is
/// left for the workers.
pub(crate) async fn decide(
    State(c): AppState,
    Path(id): Path<String>,
    Json(body): Json<DecisionBody>,
) -> Result<Json<Value>, Failure> {
    let verdict = if body.approve {
        Verdict::Approve
    } else {
        Verdict::Deny(body.reason.filter(|r| !r.trim().is_empty()))
    };
    let decided = c
        .agent
        .decide(&id, verdict)
        .await
        .map_err(|e| refusal(&e))?;
    let (ready, prompt) = match &decided {
        Decided::Ready { prompt_id } => (true, prompt_id.clone()),
        Decided::Waiting { prompt_id, .. } => (false, prompt_id.clone()),
        _ => (false, String::new()),
    };
    if ready && c.runs_turns {
        let agent = c.agent.clone();
        let p = prompt.clone();
        tokio::spawn(async move {
            // A worker elsewhere may take it first: then it runs there.
            let _ = agent.resume(&p).await;
        });
    }
    Ok(Json(json!({"ready": ready, "prompt_id": prompt})))
}

/// A decision refused, as the answer it deserves.
fn refusal(e: &ApprovalError) -> Failure {
    let status = match e {
        ApprovalError::Unknown { .. } | ApprovalError::NotInSession { .. } => StatusCode::NOT_FOUND,
        ApprovalError::Gateway(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::CONFLICT,
    };
    Failure(status, e.to_string())
}
