//! Hooks on an agent, through the public API: the order they run in at
//! each point, a tool call denied or its arguments rewritten (and checked
//! again), a result rewritten, a model call's options changed or its reply
//! given by a hook, and a hook that fails or panics failing the turn with
//! every call still answered once.

use std::sync::{Arc, Mutex};

use kesoku::llm::{
    Agent, AssistantTurn, HookError, HookFuture, Hooks, Llm, LlmError, LlmFuture, LlmOptions,
    ModelRequest, ScriptedLlm, ToolDeclaration, ToolGate, TurnOutcome, TurnStatus,
};
use kesoku::{Message, MessageType, ToolRegistry, ToolRequest, tool};
use serde_json::{Value, json};

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// The events hooks saw, in order: `"<hook> <point> <detail>"`.
type Log = Arc<Mutex<Vec<String>>>;

/// A hook that logs every point under its name, and answers as told.
struct Logged {
    name: &'static str,
    log: Log,
    gate: ToolGate,
    /// Appended to each tool result's content.
    suffix: Option<&'static str>,
    /// Fails (or panics, with "panic") at this point.
    fail_at: Option<(&'static str, &'static str)>,
}

impl Logged {
    fn new(name: &'static str, log: &Log) -> Self {
        Logged {
            name,
            log: Arc::clone(log),
            gate: ToolGate::Allow,
            suffix: None,
            fail_at: None,
        }
    }

    fn note(&self, point: &str, detail: impl std::fmt::Display) -> Result<(), HookError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} {point} {detail}", self.name));
        match self.fail_at {
            Some((at, "panic")) if at == point => panic!("{} gave up at {point}", self.name),
            Some((at, how)) if at == point => Err(HookError::new(how.to_owned())),
            _ => Ok(()),
        }
    }
}

impl Hooks for Logged {
    fn name(&self) -> &str {
        self.name
    }

    fn before_model<'a>(
        &'a self,
        request: &'a mut ModelRequest<'_>,
    ) -> HookFuture<'a, Option<AssistantTurn>> {
        Box::pin(async move {
            self.note("before_model", request.step)?;
            Ok(None)
        })
    }

    fn after_model<'a>(&'a self, _: &'a str, reply: &'a AssistantTurn) -> HookFuture<'a, ()> {
        Box::pin(async move { self.note("after_model", reply.calls.len()) })
    }

    fn before_tool<'a>(&'a self, _: &'a str, call: &'a ToolRequest) -> HookFuture<'a, ToolGate> {
        Box::pin(async move {
            self.note("before_tool", &call.arguments)?;
            Ok(self.gate.clone())
        })
    }

    fn after_tool<'a>(
        &'a self,
        call: &'a ToolRequest,
        result: &'a mut Message,
    ) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.note(
                "after_tool",
                format!("{} {}", call.arguments, result.content),
            )?;
            if let Some(suffix) = self.suffix {
                result.content.push_str(suffix);
            }
            Ok(())
        })
    }

    fn turn_end<'a>(&'a self, _: &'a str, outcome: &'a TurnOutcome) -> HookFuture<'a, ()> {
        Box::pin(async move { self.note("turn_end", format!("{:?}", outcome.status)) })
    }
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(add::TOOL).unwrap();
    tools
}

/// One call of `add` with `arguments`, then "Done."
fn adding(arguments: &Value) -> ScriptedLlm {
    ScriptedLlm::from_json(json!([
        {"tool_calls": [{"id": "c1", "name": "add", "arguments": arguments}]},
        {"text": "Done."}
    ]))
    .unwrap()
}

fn results(outcome: &TurnOutcome) -> Vec<&Message> {
    outcome
        .messages
        .iter()
        .filter(|m| m.kind == MessageType::ToolResult)
        .collect()
}

fn events(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[tokio::test]
async fn hooks_run_in_the_order_they_were_added_at_every_point() {
    let log = Log::default();
    let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
        .registry(tools())
        .hook(Logged::new("first", &log))
        .hook(Logged::new("second", &log))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(
        events(&log),
        [
            "first before_model 1",
            "second before_model 1",
            "first after_model 1",
            "second after_model 1",
            r#"first before_tool {"a":2,"b":3}"#,
            r#"second before_tool {"a":2,"b":3}"#,
            r#"first after_tool {"a":2,"b":3} 5"#,
            r#"second after_tool {"a":2,"b":3} 5"#,
            "first before_model 2",
            "second before_model 2",
            "first after_model 0",
            "second after_model 0",
            "first turn_end Completed",
            "second turn_end Completed",
        ]
    );
}

#[tokio::test]
async fn a_denied_call_does_not_run_and_the_model_reads_why() {
    let log = Log::default();
    let mut deny = Logged::new("guard", &log);
    deny.gate = ToolGate::Deny("adding is closed today".into());
    let later = Logged::new("later", &log);
    let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
        .registry(tools())
        .hook(deny)
        .hook(later)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    let results = results(&outcome);
    assert_eq!(results.len(), 1);
    assert!(
        results[0]
            .content
            .contains("was not allowed by the hook `guard`: adding is closed today"),
        "{}",
        results[0].content
    );
    let seen = events(&log);
    assert!(
        !seen.iter().any(|e| e.contains("after_tool")),
        "it did not run: {seen:?}"
    );
    assert!(
        !seen.iter().any(|e| e.starts_with("later before_tool")),
        "the hooks after a denial are not asked: {seen:?}"
    );
}

#[tokio::test]
async fn rewritten_arguments_are_what_runs_and_are_checked_again() {
    let log = Log::default();
    let mut fix = Logged::new("fix", &log);
    fix.gate = ToolGate::Rewrite(json!({"a": 40, "b": 2}));
    let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
        .registry(tools())
        .hook(fix)
        .hook(Logged::new("after", &log))
        .build()
        .unwrap();
    let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
    assert_eq!(results(&outcome)[0].content, "42");
    assert!(
        events(&log).contains(&r#"after before_tool {"a":40,"b":2}"#.to_owned()),
        "the next hook sees the rewrite: {:?}",
        events(&log)
    );

    let mut spoil = Logged::new("spoil", &log);
    spoil.gate = ToolGate::Rewrite(json!({"a": 40}));
    let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
        .registry(tools())
        .hook(spoil)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
    let result = &results(&outcome)[0];
    assert!(
        result.content.contains("argument `b` is required"),
        "checked as the model's arguments are: {}",
        result.content
    );
}

#[tokio::test]
async fn a_result_rewritten_after_its_call_is_what_is_stored() {
    let log = Log::default();
    let mut tag = Logged::new("tag", &log);
    tag.suffix = Some(" (checked)");
    let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
        .registry(tools())
        .hook(tag)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
    assert_eq!(results(&outcome)[0].content, "5 (checked)");
    let stored = agent.history("s").await.unwrap();
    assert!(
        stored.iter().any(|m| m.content == "5 (checked)"),
        "{stored:#?}"
    );
}

/// Records each request's `max_tokens`, and answers "Hi."
struct Recording(Arc<Mutex<Vec<u32>>>);

impl Llm for Recording {
    fn provider(&self) -> &'static str {
        "recording"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        _: &'a [Message],
        _: &'a [ToolDeclaration],
        options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.0.lock().unwrap().push(options.max_tokens);
        Box::pin(async move { Ok(AssistantTurn::new(session_id, "recording", "Hi.", [])) })
    }
}

/// Caps `max_tokens`, and answers for the model when the prompt says
/// "canned".
struct Shaping;

impl Hooks for Shaping {
    fn before_model<'a>(
        &'a self,
        request: &'a mut ModelRequest<'_>,
    ) -> HookFuture<'a, Option<AssistantTurn>> {
        Box::pin(async move {
            request.options.max_tokens = 77;
            let canned = request
                .messages
                .last()
                .is_some_and(|m| m.content.contains("canned"));
            Ok(
                canned
                    .then(|| AssistantTurn::new(request.session_id, "hook", "From the hook.", [])),
            )
        })
    }
}

#[tokio::test]
async fn a_hook_changes_a_calls_options_or_answers_for_the_model() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder(Recording(Arc::clone(&seen)))
        .hook(Shaping)
        .build()
        .unwrap();
    let outcome = agent.send("s", "Hello").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Hi."));
    assert_eq!(*seen.lock().unwrap(), [77]);
    let outcome = agent.send("s", "Something canned").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("From the hook."));
    assert_eq!(*seen.lock().unwrap(), [77], "the model was not called");
}

#[tokio::test]
async fn a_hook_that_fails_or_panics_fails_the_turn_naming_it_and_every_call_is_answered() {
    for (point, how) in [
        ("before_model", "the budget is spent"),
        ("before_tool", "the policy server is down"),
        ("after_tool", "panic"),
        ("after_model", "panic"),
    ] {
        let log = Log::default();
        let mut hook = Logged::new("auditor", &log);
        hook.fail_at = Some((point, how));
        let agent = Agent::builder(adding(&json!({"a": 2, "b": 3})))
            .registry(tools())
            .hook(hook)
            .build()
            .unwrap();
        let outcome = agent.send("s", "Add 2 and 3").await.unwrap();
        assert_eq!(outcome.status, TurnStatus::Failed, "{point}");
        let failure = outcome.hook_error.clone().expect("the hook's failure");
        assert_eq!(failure.hook, "auditor");
        let expected = if how == "panic" {
            format!("it panicked: auditor gave up at {point}")
        } else {
            how.to_owned()
        };
        assert_eq!(failure.error, expected, "{point}");
        let note = outcome.messages.last().unwrap();
        assert!(
            note.content.contains("the hook `auditor` failed") && note.content.contains(&expected),
            "{point}: {}",
            note.content
        );
        // Every call stored gets exactly one result.
        let stored = agent.history("s").await.unwrap();
        let calls: Vec<&Message> = stored
            .iter()
            .filter(|m| m.kind == MessageType::ToolCall)
            .collect();
        for call in &calls {
            let answers = stored
                .iter()
                .filter(|m| {
                    m.kind == MessageType::ToolResult && m.parent_id.as_deref() == Some(&call.id)
                })
                .count();
            assert_eq!(answers, 1, "{point}: {stored:#?}");
        }
        let ran = events(&log).iter().any(|e| e.contains("after_tool"));
        match point {
            "before_model" => assert!(calls.is_empty()),
            "before_tool" => {
                assert!(!ran, "nothing ran");
                let result = stored
                    .iter()
                    .find(|m| m.kind == MessageType::ToolResult)
                    .unwrap();
                assert!(result.content.contains("did not run"), "{}", result.content);
            }
            _ => {}
        }
    }
}
