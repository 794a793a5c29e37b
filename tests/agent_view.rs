//! An agent keeps each session's history between turns and reads only
//! what was stored since. The model must still be shown the whole session,
//! as the store holds it: turns another agent (another process) ran on the
//! same session, and a call someone left unanswered, which is healed with
//! its result right after it.

#[path = "support/recorder.rs"]
mod recorder;
use recorder::{Recorder, Seen};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::{
    Claimed, DeltaRelay, Leases, MemoryStore, MessageLog, Seq, SessionInfo, SqliteStore, Store,
    StoreFuture,
};
use kesoku::{Message, MessageType, Role, Status, ToolRegistry, ToolRequest, tool};
use serde_json::json;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn view_add(a: i64, b: i64) -> i64 {
    a + b
}

/// An agent on `store` whose model adds once, then answers, every turn.
fn agent(store: &Arc<dyn Store>) -> (Agent, Seen) {
    agent_keeping(store, 50_000)
}

/// The same, keeping views of at most `view_budget` messages.
fn agent_keeping(store: &Arc<dyn Store>, view_budget: usize) -> (Agent, Seen) {
    let mut registry = ToolRegistry::new();
    registry.register(view_add::TOOL).unwrap();
    let turn = json!([
        {"tool_calls": [{"id": "c", "name": "view_add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "{{c}}"}
    ]);
    // Enough turns for every test here.
    let script: Vec<_> = (0..6)
        .flat_map(|_| turn.as_array().unwrap().clone())
        .collect();
    let seen = Seen::default();
    let model = Recorder::new(ScriptedLlm::from_json(json!(script)).unwrap(), &seen, |m| {
        m.id.clone()
    });
    let agent = Agent::builder(model)
        .registry(registry)
        .store(Arc::clone(store))
        .view_budget(view_budget)
        .build()
        .unwrap();
    (agent, seen)
}

fn ids(history: &[Message]) -> Vec<String> {
    history.iter().map(|m| m.id.clone()).collect()
}

/// On each store the agent's claim brings its kept view up to date in the
/// claim's own transaction (`insert_claimed_after`).
#[tokio::test]
async fn a_turn_sees_the_turns_another_agent_ran_on_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let file = SqliteStore::open(dir.path().join("view.sqlite")).unwrap();
    a_turn_sees_the_turns_another_agent_ran(Arc::new(MemoryStore::new())).await;
    a_turn_sees_the_turns_another_agent_ran(Arc::new(file)).await;
}

async fn a_turn_sees_the_turns_another_agent_ran(store: Arc<dyn Store>) {
    let (here, seen_here) = agent(&store);
    let (there, _) = agent(&store);
    for (i, is_here) in [true, false, true, false, true].into_iter().enumerate() {
        let a = if is_here { &here } else { &there };
        let before = store.history("s").await.unwrap();
        let outcome = a.send("s", &format!("turn {i}")).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        if is_here {
            // The first model call of the turn saw the whole session as
            // stored, and this turn's prompt.
            let first = {
                let seen = seen_here.lock().unwrap();
                seen[seen.len() - 2].clone()
            };
            let mut expected = ids(&before);
            expected.push(outcome_prompt_id(&store, i).await);
            assert_eq!(first, expected, "turn {i}");
        }
    }
}

/// Where the view's store is, for `view_note`.
static NOTES: std::sync::OnceLock<Arc<dyn Store>> = std::sync::OnceLock::new();

/// Leaves a note in session `s` while the turn runs, as another process
/// might.
///
/// # Arguments
/// * `id` - The note's id.
#[tool]
async fn view_note(id: String) -> String {
    let mut note = Message::new("s", Role::Assistant, MessageType::Text, "a note");
    note.id = id;
    NOTES.get().unwrap().insert(&note).await.unwrap();
    "left".into()
}

/// A turn's posts are kept in the view only when nothing else was stored
/// between them: a message stored in the session while the turn ran
/// (here by its own tool, between the call and its result) is shown to
/// the model at the next turn, where it stands in the store.
#[tokio::test]
async fn a_message_stored_while_a_turn_runs_is_in_the_next_turns_view() {
    let dir = tempfile::tempdir().unwrap();
    let file = SqliteStore::open(dir.path().join("notes.sqlite")).unwrap();
    let store: Arc<dyn Store> = Arc::new(file);
    assert!(NOTES.set(Arc::clone(&store)).is_ok());
    let mut registry = ToolRegistry::new();
    registry.register(view_note::TOOL).unwrap();
    let script = json!([
        {"tool_calls": [{"id": "c1", "name": "view_note", "arguments": {"id": "note-1"}}]},
        {"text": "noted"},
        {"text": "and again"},
        {"text": "once more"},
    ]);
    let seen = Seen::default();
    let model = Recorder::new(ScriptedLlm::from_json(script).unwrap(), &seen, |m| {
        m.id.clone()
    });
    let agent = Agent::builder(model)
        .registry(registry)
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    for i in 0..3 {
        let before = store.history("s").await.unwrap();
        let outcome = agent.send("s", &format!("turn {i}")).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        let first = {
            let seen = seen.lock().unwrap();
            seen[seen.len() - if i == 0 { 2 } else { 1 }].clone()
        };
        // Every stored message and the prompt (a result is shown right
        // after its call, so the note follows the result).
        let mut expected = ids(&before);
        expected.push(outcome_prompt_id(&store, i).await);
        let mut shown = first.clone();
        shown.sort();
        expected.sort();
        assert_eq!(shown, expected, "turn {i}");
        assert_eq!(first.contains(&"note-1".to_owned()), i > 0, "turn {i}");
    }
}

/// An agent that keeps no view (a budget too small for any) reads each
/// session's history from the store at every turn, and the model sees the
/// same as with its views kept.
#[tokio::test]
async fn without_kept_views_each_turn_reads_the_whole_session() {
    let mut seen_by = Vec::new();
    for budget in [0, 50_000] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let (agent, seen) = agent_keeping(&store, budget);
        for i in 0..3 {
            let outcome = agent.send("s", &format!("turn {i}")).await.unwrap();
            assert_eq!(outcome.status, TurnStatus::Completed);
        }
        let lengths: Vec<usize> = seen.lock().unwrap().iter().map(Vec::len).collect();
        seen_by.push(lengths);
    }
    // Each call saw everything before it: 1, 3, 5, 7, ...
    assert_eq!(seen_by[0], [1, 3, 5, 7, 9, 11]);
    assert_eq!(seen_by[0], seen_by[1]);
}

/// The id of the prompt of turn `i` (`"turn {i}"`).
async fn outcome_prompt_id(store: &Arc<dyn Store>, i: usize) -> String {
    let prompt = format!("turn {i}");
    store
        .history("s")
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.role == Role::User && m.content == prompt)
        .unwrap()
        .id
}

#[tokio::test]
async fn a_call_left_unanswered_between_turns_is_healed_in_place() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (agent, seen) = agent(&store);
    agent.send("s", "first").await.unwrap();
    // Another process stores a call and dies before its result.
    let mut call = Message::tool_call(
        "s",
        &ToolRequest::new("x", "view_add", json!({"a": 1, "b": 1})),
    );
    call.status = Status::Responded;
    store.insert(&call).await.unwrap();
    let outcome = agent.send("s", "second").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let shown = seen.lock().unwrap()[2].clone();
    let at = shown
        .iter()
        .position(|id| *id == call.id)
        .expect("the call is shown");
    let history = store.history("s").await.unwrap();
    let healed = history
        .iter()
        .find(|m| m.kind == MessageType::ToolResult && m.parent_id.as_deref() == Some(&call.id))
        .expect("a healing result is stored");
    assert!(healed.is_tool_error());
    assert_eq!(shown[at + 1], healed.id, "the result right after its call");
    // And the prompt after them: nothing was lost or repeated.
    let mut unique = shown.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), shown.len());
    assert_eq!(
        shown.len(),
        history.len() - 3,
        "all but this turn's call, result and answer"
    );
}

/// A store that counts the reads of a session's history and records what
/// each claim read back with its prompt.
#[derive(Default)]
struct Recording {
    inner: MemoryStore,
    history_reads: AtomicUsize,
    claimed: Mutex<Vec<usize>>,
}

impl MessageLog for Recording {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        self.inner.insert(message)
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        self.inner.get(id)
    }

    fn history<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Vec<Message>> {
        self.inner.history(session_id)
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        self.history_reads.fetch_add(1, Ordering::SeqCst);
        self.inner.history_after(session_id, seq)
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.inner.after(seq, limit)
    }

    fn with_status(&self, status: Status) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.inner.with_status(status)
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        self.inner.transition(id, from, to)
    }

    fn sessions(&self) -> StoreFuture<'_, Vec<SessionInfo>> {
        self.inner.sessions()
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        self.inner.last_seq()
    }
}

impl Leases for Recording {
    fn insert_leased<'a>(&'a self, message: &'a Message, holder: &'a str) -> StoreFuture<'a, Seq> {
        self.inner.insert_leased(message, holder)
    }

    fn transition_leased<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
        holder: &'a str,
    ) -> StoreFuture<'a, bool> {
        self.inner.transition_leased(id, from, to, holder)
    }

    fn lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        self.inner.lease(session_id, holder, ttl)
    }

    fn renew<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        self.inner.renew(session_id, holder, ttl)
    }

    fn release<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, bool> {
        self.inner.release(session_id, holder)
    }

    fn claim_next<'a>(
        &'a self,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<(Seq, Message)>> {
        self.inner.claim_next(holder, ttl)
    }

    fn break_lease<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, bool> {
        self.inner.break_lease(session_id)
    }

    fn requeue_expired(&self) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.inner.requeue_expired()
    }

    fn insert_claimed<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Option<Seq>> {
        self.inner.insert_claimed(message, holder, ttl)
    }

    fn insert_claimed_after<'a>(
        &'a self,
        message: &'a Message,
        holder: &'a str,
        ttl: Duration,
        after: Seq,
    ) -> StoreFuture<'a, Option<Claimed>> {
        Box::pin(async move {
            let claimed = self
                .inner
                .insert_claimed_after(message, holder, ttl, after)
                .await?;
            if let Some(c) = &claimed {
                self.claimed.lock().unwrap().push(c.newer.len());
            }
            Ok(claimed)
        })
    }

    fn finish_turn<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        posts: &'a [Message],
        prompt: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, Vec<Seq>> {
        self.inner
            .finish_turn(session_id, holder, posts, prompt, from, to)
    }
}

impl DeltaRelay for Recording {}

/// A session's later turns read its history once, with their prompt: the
/// first reads it whole; each next one's claim reads back its prompt
/// alone, as the turn before kept what it stored in the view (nothing else
/// came between); and none reads the history on its own.
#[tokio::test]
async fn a_turn_reads_back_only_what_its_view_does_not_hold() {
    let reads = Arc::new(Recording::default());
    let store: Arc<dyn Store> = Arc::clone(&reads) as Arc<dyn Store>;
    let (agent, _) = agent(&store);
    for i in 0..3 {
        let outcome = agent.send("s", &format!("turn {i}")).await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Completed);
        assert_eq!(outcome.messages.len(), 3, "a call, its result, the answer");
    }
    assert_eq!(
        reads.history_reads.load(Ordering::SeqCst),
        1,
        "the first turn's"
    );
    assert_eq!(*reads.claimed.lock().unwrap(), [1, 1]);
}
