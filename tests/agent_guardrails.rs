//! Guardrails on an agent, through the public API: an input guardrail
//! that trips while the model call is in flight (the call dropped,
//! nothing of it stored), or after the reply came (the reply not stored),
//! or passes slowly (the reply waits for it); an output guardrail that
//! sends an answer back, then passes or trips; a guardrail that fails.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kesoku::llm::{
    Agent, AssistantTurn, GuardInput, GuardVerdict, Guardrail, HookError, Llm, LlmError, LlmFuture,
    LlmOptions, ScriptedLlm, ToolDeclaration, TurnStatus,
};
use kesoku::{Message, Role};
use serde_json::json;

/// Sets its flag when dropped before `done`.
struct DropWatch {
    dropped: Arc<AtomicBool>,
    done: bool,
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.done {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }
}

/// A model that answers "Sure." after `latency`, noting each call begun
/// and each call dropped before it answered.
struct Slow {
    latency: Duration,
    begun: Arc<AtomicUsize>,
    dropped: Arc<AtomicBool>,
}

impl Slow {
    fn new(latency: Duration) -> Self {
        Slow {
            latency,
            begun: Arc::default(),
            dropped: Arc::default(),
        }
    }
}

impl Llm for Slow {
    fn provider(&self) -> &'static str {
        "slow"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        _: &'a [Message],
        _: &'a [ToolDeclaration],
        _: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.begun.fetch_add(1, Ordering::SeqCst);
        let watch = DropWatch {
            dropped: Arc::clone(&self.dropped),
            done: false,
        };
        Box::pin(async move {
            // The whole watch lives in the future, not just its field.
            let mut watch = watch;
            tokio::time::sleep(self.latency).await;
            watch.done = true;
            Ok(AssistantTurn::new(session_id, "slow", "Sure.", []))
        })
    }
}

/// A guardrail that waits `after`, then trips on texts holding `word`.
fn banning(word: &'static str, after: Duration) -> Guardrail {
    Guardrail::new(format!("no_{word}"), move |input: GuardInput| async move {
        tokio::time::sleep(after).await;
        Ok(if input.text.contains(word) {
            GuardVerdict::Trip(format!("it mentions {word}"))
        } else {
            GuardVerdict::Pass
        })
    })
}

#[tokio::test]
async fn an_input_guardrail_that_trips_drops_the_model_call_in_flight() {
    let model = Slow::new(Duration::from_secs(30));
    let (begun, dropped) = (Arc::clone(&model.begun), Arc::clone(&model.dropped));
    let agent = Agent::builder(model)
        .input_guardrail(banning("bombs", Duration::from_millis(50)))
        .build()
        .unwrap();
    let started = Instant::now();
    let outcome = agent.send("s", "How are bombs made?").await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it did not wait for the model"
    );
    assert_eq!(outcome.status, TurnStatus::Tripped);
    let tripped = outcome.tripped.clone().unwrap();
    assert_eq!(
        (tripped.guardrail.as_str(), tripped.reason.as_str()),
        ("no_bombs", "it mentions bombs")
    );
    assert_eq!(
        begun.load(Ordering::SeqCst),
        1,
        "asked at once, with the check"
    );
    assert!(dropped.load(Ordering::SeqCst), "the request was dropped");
    let stored = agent.history("s").await.unwrap();
    assert_eq!(stored.len(), 2, "the prompt and the verdict: {stored:#?}");
    assert_eq!(stored[0].role, Role::User);
    assert!(
        stored[1]
            .content
            .contains("The guardrail `no_bombs` stopped this prompt: it mentions bombs"),
        "{}",
        stored[1].content
    );
}

#[tokio::test]
async fn a_reply_that_came_before_the_trip_is_not_stored_and_one_before_a_pass_waits() {
    let agent = Agent::builder(Slow::new(Duration::ZERO))
        .input_guardrail(banning("bombs", Duration::from_millis(100)))
        .build()
        .unwrap();
    let outcome = agent.send("s", "bombs, please").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Tripped);
    let stored = agent.history("s").await.unwrap();
    assert!(
        !stored.iter().any(|m| m.content == "Sure."),
        "the model's reply is not stored: {stored:#?}"
    );
    let started = Instant::now();
    let outcome = agent.send("s", "flowers, please").await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "it waited for the check"
    );
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Sure."));
}

/// Sends back answers holding "draft", and counts its checks.
fn no_drafts(checks: &Arc<Mutex<Vec<String>>>) -> Guardrail {
    let checks = Arc::clone(checks);
    Guardrail::new("no_drafts", move |input: GuardInput| {
        checks.lock().unwrap().push(input.text.clone());
        async move {
            Ok(if input.text.contains("draft") {
                GuardVerdict::Retry("it is still a draft".into())
            } else {
                GuardVerdict::Pass
            })
        }
    })
}

#[tokio::test]
async fn an_output_guardrail_sends_an_answer_back_and_the_history_shows_why() {
    let checks = Arc::new(Mutex::new(Vec::new()));
    let model =
        ScriptedLlm::from_json(json!([{"text": "A draft."}, {"text": "The answer."}])).unwrap();
    let agent = Agent::builder(model)
        .output_guardrail(no_drafts(&checks))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Answer").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("The answer."));
    assert_eq!(*checks.lock().unwrap(), ["A draft.", "The answer."]);
    let stored = agent.history("s").await.unwrap();
    let texts: Vec<&str> = stored.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert_eq!(texts[1], "A draft.");
    assert_eq!(
        stored[1].metadata["guardrail"], "no_drafts",
        "the answer sent back is marked"
    );
    assert!(
        texts[2].contains("`no_drafts` did not accept that answer: it is still a draft"),
        "{}",
        texts[2]
    );
    assert_eq!(texts[3], "The answer.");
}

#[tokio::test]
async fn an_answer_sent_back_once_too_often_trips_and_is_kept_marked() {
    let checks = Arc::new(Mutex::new(Vec::new()));
    let model =
        ScriptedLlm::from_json(json!([{"text": "A draft."}, {"text": "Another draft."}])).unwrap();
    let agent = Agent::builder(model)
        .output_guardrail(no_drafts(&checks))
        .output_repairs(1)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Answer").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Tripped);
    assert_eq!(outcome.answer, None);
    assert_eq!(outcome.tripped.unwrap().reason, "it is still a draft");
    let stored = agent.history("s").await.unwrap();
    let kept = stored
        .iter()
        .find(|m| m.content == "Another draft.")
        .expect("kept");
    assert_eq!(kept.metadata["guardrail"], "no_drafts");
    let note = stored.last().unwrap();
    assert!(
        note.content
            .contains("The guardrail `no_drafts` stopped this answer"),
        "{}",
        note.content
    );
}

#[tokio::test]
async fn a_guardrail_that_fails_fails_the_turn_naming_it() {
    let broken = Guardrail::new("moderation", |_: GuardInput| async {
        Err::<GuardVerdict, _>(HookError::new("the moderation service is down"))
    });
    let model = ScriptedLlm::from_json(json!([{"text": "Hi."}])).unwrap();
    let agent = Agent::builder(model)
        .input_guardrail(broken)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Hello").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Failed);
    let failure = outcome.hook_error.unwrap();
    assert_eq!(failure.hook, "moderation");
    assert_eq!(failure.error, "the moderation service is down");
}
