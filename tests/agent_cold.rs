//! A turn whose agent kept no view of its session (a fresh process, or a
//! view dropped past the budget) reads only the end of the session the
//! model may be shown, however long the session: the model is shown the
//! same at 2,000 and at 20,000 stored messages, the session's leading
//! system message included, from a turn's start, every call with its
//! result; and what the store is read for stays near what is shown. A
//! stored summary is started from, and nothing older than what it starts
//! from is read.

#[path = "support/recorder.rs"]
mod recorder;
use recorder::{Recorder, Seen};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kesoku::agent::Compaction;
use kesoku::llm::{Agent, ScriptedLlm, TurnStatus};
use kesoku::store::{LocalLeases, MemoryStore, MessageLog, Page, Seq, Store, StoreFuture};
use kesoku::{Message, MessageType, Role, Status, ToolRegistry, ToolRequest, keys, tool};
use serde_json::json;

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
fn cold_add(a: i64, b: i64) -> i64 {
    a + b
}

/// The window the agents are told: far less than the sessions here.
const WINDOW: u64 = 8_192;

/// A log that counts the messages its session reads return.
#[derive(Default)]
struct Counting {
    inner: MemoryStore,
    read: AtomicUsize,
}

impl Counting {
    fn count(&self, found: &[(Seq, Message)]) {
        self.read.fetch_add(found.len(), Ordering::SeqCst);
    }
}

impl MessageLog for Counting {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        self.inner.insert(message)
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        self.inner.get(id)
    }

    fn history_after<'a>(
        &'a self,
        session: &'a str,
        seq: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        Box::pin(async move {
            let found = self.inner.history_after(session, seq).await?;
            self.count(&found);
            Ok(found)
        })
    }

    fn history_page<'a>(
        &'a self,
        session: &'a str,
        page: Page,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        Box::pin(async move {
            let found = self.inner.history_page(session, page).await?;
            self.count(&found);
            Ok(found)
        })
    }

    fn after(&self, seq: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        self.inner.after(seq, limit)
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        self.inner.transition(id, from, to)
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        self.inner.last_seq()
    }
}

/// A session's leading system message, then `rounds` past turns (a
/// question, a call, its result, the answer), named by how far each is
/// from the end, so two sessions of different lengths end the same.
fn session(rounds: usize) -> Vec<Message> {
    let mut lead = Message::new("s", Role::System, MessageType::Text, "You add numbers.");
    lead.id = "lead".into();
    let mut out = vec![lead];
    for k in (1..=rounds).rev() {
        let mut question = Message::new(
            "s",
            Role::User,
            MessageType::Text,
            format!("What is {k} + 1? Please be quick."),
        )
        .with_status(Status::Processed);
        question.id = format!("q{k}");
        let mut call = Message::tool_call(
            "s",
            &ToolRequest::new(format!("c{k}"), "cold_add", json!({"a": k, "b": 1})),
        );
        call.id = format!("c{k}");
        let mut result = Message::new(
            "s",
            Role::Tool,
            MessageType::ToolResult,
            (k + 1).to_string(),
        )
        .with_parent(call.id.clone())
        .with_status(Status::Responded);
        result.id = format!("r{k}");
        result
            .metadata
            .insert(keys::CALL_ID.into(), format!("c{k}").into());
        result
            .metadata
            .insert(keys::TOOL_NAME.into(), "cold_add".into());
        let mut answer = Message::new(
            "s",
            Role::Assistant,
            MessageType::Text,
            format!("{k} + 1 = {}.", k + 1),
        );
        answer.id = format!("a{k}");
        out.extend([question, call, result, answer]);
    }
    out
}

/// An agent that keeps no view, with `compaction`, on `store`; what its
/// model is shown (message ids).
fn agent(store: Arc<dyn Store>, compaction: Compaction) -> (Agent, Seen) {
    let mut registry = ToolRegistry::new();
    registry.register(cold_add::TOOL).unwrap();
    let script = json!([
        {"tool_calls": [{"id": "c", "name": "cold_add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "{{c}}"}
    ]);
    let seen = Seen::default();
    let model = Recorder::new(ScriptedLlm::from_json(script).unwrap(), &seen, |m| {
        m.id.clone()
    });
    let agent = Agent::builder(model)
        .registry(registry)
        .store(store)
        .context_window(WINDOW)
        .compaction(compaction)
        .view_budget(0)
        .build()
        .unwrap();
    (agent, seen)
}

/// One cold turn on a session of `messages`: what the model was shown
/// first, and how many messages the store's session reads returned.
async fn cold_turn(messages: &[Message], compaction: Compaction) -> (Vec<String>, usize) {
    let log = Arc::new(Counting::default());
    for m in messages {
        log.inner.insert(m).await.unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(LocalLeases::new(Arc::clone(&log)));
    let (agent, seen) = agent(store, compaction);
    let outcome = agent.send("s", "And 2 + 3?").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let shown = seen.lock().unwrap()[0].clone();
    (shown, log.read.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_cold_turn_reads_the_end_of_a_long_session_the_model_is_shown() {
    let (short, short_read) = cold_turn(&session(500), Compaction::DropOldestTurns).await;
    let (long, long_read) = cold_turn(&session(5_000), Compaction::DropOldestTurns).await;
    // The same whatever the length (but the new prompt's id): the end
    // that fits, after the lead.
    assert_eq!(short[..short.len() - 1], long[..long.len() - 1]);
    assert_eq!(long[0], "lead");
    assert!(
        long[1].starts_with('q'),
        "not from a turn's start: {:?}",
        &long[..3]
    );
    assert!(
        long.len() > 20 && long.len() < 2_000,
        "{} shown",
        long.len()
    );
    // Each call right before its result, the newest rounds last.
    for (i, id) in long.iter().enumerate() {
        if let Some(k) = id.strip_prefix('c') {
            assert_eq!(long[i + 1], format!("r{k}"));
        }
    }
    let prompt = long.len() - 1;
    assert_eq!(&long[prompt - 4..prompt], ["q1", "c1", "r1", "a1"]);
    // Read: about what is shown, not the session's 20,001 messages.
    for read in [short_read, long_read] {
        assert!(
            read < 4 * long.len() + 300,
            "{read} read for {} shown",
            long.len()
        );
    }
}

#[tokio::test]
async fn a_cold_turn_starts_from_a_stored_summary_and_reads_no_further() {
    let mut messages = session(5_000);
    // A summary of everything before round 40, stored after round 30.
    let at = messages.iter().position(|m| m.id == "a30").unwrap() + 1;
    let mut summary = Message::new("s", Role::System, MessageType::Text, "Numbers were added.")
        .with_sender("agent")
        .with_status(Status::Processed);
    summary.id = "summary".into();
    summary
        .metadata
        .insert(keys::SUMMARY.into(), json!({"from": "q40"}));
    messages.insert(at, summary);
    let (shown, read) = cold_turn(&messages, Compaction::Summarize).await;
    assert_eq!(&shown[..3], ["lead", "summary", "q40"]);
    assert!(!shown.iter().any(|id| id == "q41"));
    // Rounds 40 to 1 and the summary, in pages of the end; the lead.
    assert!(read < 1_000, "{read} read");
}
