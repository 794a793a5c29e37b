//! A served tool that needs approval runs only on the client's user's yes:
//! asked with `elicitation/create` before 2026-07-28, and through an
//! `input_required` result from 2026-07-28. rmcp's client is the other
//! end, with a handler standing for the person (the official Python SDK's
//! client runs the same checks against `examples/mcp_server` in
//! `.ci/run`).
#![cfg(feature = "mcp")]

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kesoku::mcp::McpServer;
use kesoku::{State, ToolContext, ToolRegistry, tool};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, InputRequest,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ErrorData, RoleClient};
use serde_json::{Value, json};

/// How many times the tool really ran.
#[derive(Default)]
struct Runs(AtomicUsize);

/// Wipes the disk. Asks first.
///
/// # Arguments
/// * `disk` - Which disk.
#[tool(register = false, approval)]
fn wipe(disk: String, runs: State<Runs>) -> String {
    runs.0.0.fetch_add(1, Ordering::SeqCst);
    format!("wiped {disk}")
}

/// The person behind the client: answers each question with the next
/// answer given, or never (to see the server give up).
#[derive(Clone, Default)]
struct Person {
    answers: Arc<Mutex<VecDeque<ElicitResult>>>,
    asked: Arc<Mutex<Vec<String>>>,
    /// Whether the client declares that it can be asked at all.
    mute: bool,
    /// Questions the server withdrew.
    withdrawn: Arc<Mutex<usize>>,
}

impl Person {
    fn will(&self, answer: ElicitResult) {
        self.answers.lock().unwrap().push_back(answer);
    }
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

fn yes() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
}

fn no(reason: &str) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept)
        .with_content(json!({"approve": false, "reason": reason}))
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.mute {
            ClientCapabilities::default()
        } else {
            ClientCapabilities::builder().enable_elicitation().build()
        };
        ClientConfig::new(capabilities, Implementation::new("person", "1"))
    }

    async fn on_cancelled(
        &self,
        _params: rmcp::model::CancelledNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        *self.withdrawn.lock().unwrap() += 1;
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Err(ErrorData::invalid_params("not a form", None));
        };
        self.asked.lock().unwrap().push(message);
        let next = self.answers.lock().unwrap().pop_front();
        match next {
            Some(answer) => Ok(answer),
            // Never answers: the server's deadline must end the wait.
            None => std::future::pending().await,
        }
    }
}

struct Setup {
    client: RunningService<RoleClient, Person>,
    person: Person,
    runs: Arc<Runs>,
}

/// A server with `wipe` over an in-memory pipe, and a client speaking
/// `lifecycle`.
async fn connect(lifecycle: ClientLifecycleMode, person: Person, timeout: Duration) -> Setup {
    let runs = Arc::new(Runs::default());
    let mut tools = ToolRegistry::new();
    tools.register(wipe::TOOL).unwrap();
    let server = McpServer::builder(tools)
        .context(ToolContext::new("mcp").with_state_arc(Arc::clone(&runs)))
        .approval_timeout(timeout)
        .build();
    let (client_side, server_side) = tokio::io::duplex(1 << 16);
    let (sr, sw) = tokio::io::split(server_side);
    tokio::spawn(server.serve_io(sr, sw));
    let (cr, cw) = tokio::io::split(client_side);
    let client = person
        .clone()
        .serve_with_lifecycle((cr, cw), lifecycle)
        .await
        .unwrap();
    Setup {
        client,
        person,
        runs,
    }
}

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

fn generations() -> [(ClientLifecycleMode, &'static str); 2] {
    [
        (ClientLifecycleMode::Initialize, "2025-11-25"),
        (modern(), "2026-07-28"),
    ]
}

fn call(disk: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("wipe").with_arguments(
        json!({"disk": disk})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test]
async fn the_tool_runs_on_yes_and_the_model_reads_a_no_on_both_generations() {
    for (lifecycle, version) in generations() {
        let s = connect(lifecycle, Person::default(), Duration::from_secs(60)).await;
        let negotiated = s.client.peer_info().map(|i| i.protocol_version.to_string());
        assert_eq!(negotiated.as_deref(), Some(version));

        s.person.will(no("that disk holds the backups"));
        let refused = s.client.call_tool(call("sda")).await.unwrap();
        assert_eq!(refused.is_error, Some(true), "{version}");
        assert_eq!(
            text(&refused),
            "the call to `wipe` was not approved: that disk holds the backups",
            "{version}"
        );
        assert_eq!(s.runs.0.load(Ordering::SeqCst), 0, "{version}: ran on a no");
        assert_eq!(
            s.person.asked(),
            ["Allow the tool `wipe` to run with {\"disk\":\"sda\"}?"],
            "{version}"
        );

        s.person.will(ElicitResult::new(ElicitationAction::Decline));
        let declined = s.client.call_tool(call("sda")).await.unwrap();
        assert!(text(&declined).contains("the user declined"), "{version}");
        assert_eq!(
            s.runs.0.load(Ordering::SeqCst),
            0,
            "{version}: ran on a decline"
        );

        s.person.will(yes());
        let ran = s.client.call_tool(call("sdb")).await.unwrap();
        assert_eq!(ran.is_error, Some(false), "{version}: {}", text(&ran));
        assert_eq!(text(&ran), "wiped sdb", "{version}");
        assert_eq!(s.runs.0.load(Ordering::SeqCst), 1, "{version}");
        assert_eq!(
            s.person.asked().len(),
            3,
            "{version}: one question per call"
        );
    }
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_is_refused_on_both_generations() {
    for (lifecycle, version) in generations() {
        let person = Person {
            mute: true,
            ..Person::default()
        };
        person.will(yes());
        let s = connect(lifecycle, person, Duration::from_secs(60)).await;
        let refused = s.client.call_tool(call("sda")).await.unwrap();
        assert_eq!(refused.is_error, Some(true), "{version}");
        assert!(
            text(&refused).contains("this client cannot be asked"),
            "{version}: {}",
            text(&refused)
        );
        assert!(s.person.asked().is_empty(), "{version}");
        assert_eq!(s.runs.0.load(Ordering::SeqCst), 0, "{version}");
    }
}

#[tokio::test]
async fn an_unanswered_question_is_a_no_when_the_deadline_passes() {
    let s = connect(
        ClientLifecycleMode::Initialize,
        Person::default(),
        Duration::from_millis(200),
    )
    .await;
    let refused = s.client.call_tool(call("sda")).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("no answer came within 200ms"),
        "{}",
        text(&refused)
    );
    assert_eq!(s.person.asked().len(), 1);
    assert_eq!(s.runs.0.load(Ordering::SeqCst), 0);
}

/// On 2026-07-28 the answer travels with the retry: it counts only with
/// the state sealed for that very call, and only once.
#[tokio::test]
async fn an_input_required_answer_is_bound_to_its_call_and_redeemed_once() {
    let s = connect(modern(), Person::default(), Duration::from_secs(60)).await;
    let CallToolResponse::InputRequired(asked) =
        s.client.call_tool_once(call("sda")).await.unwrap()
    else {
        panic!("2026-07-28 asks through an input_required result");
    };
    let question = asked
        .input_requests
        .as_ref()
        .and_then(|r| r.get("approval"));
    assert!(
        matches!(question, Some(InputRequest::Elicitation(_))),
        "{question:?}"
    );
    let state = asked.request_state.clone().expect("a sealed state");
    let answer: BTreeMap<String, Value> =
        BTreeMap::from([("approval".to_owned(), serde_json::to_value(yes()).unwrap())]);
    let retry = |disk: &str, state: &str| {
        call(disk)
            .with_input_responses(answer.clone())
            .with_request_state(state.to_owned())
    };
    let complete = |response: CallToolResponse| match response {
        CallToolResponse::Complete(result) => result,
        other => panic!("a retry is answered, not asked again: {other:?}"),
    };

    // The yes, moved to another disk: refused.
    let moved = complete(s.client.call_tool_once(retry("sdb", &state)).await.unwrap());
    assert_eq!(moved.is_error, Some(true));
    assert!(
        text(&moved).contains("could not be verified"),
        "{}",
        text(&moved)
    );
    // A state the server never sealed: refused.
    let forged = complete(
        s.client
            .call_tool_once(retry("sda", &format!("{state}x")))
            .await
            .unwrap(),
    );
    assert_eq!(forged.is_error, Some(true));
    assert!(
        text(&forged).contains("could not be verified"),
        "{}",
        text(&forged)
    );
    // No answer at all with a good state: refused.
    let silent = complete(
        s.client
            .call_tool_once(call("sda").with_request_state(state.clone()))
            .await
            .unwrap(),
    );
    assert!(text(&silent).contains("no answer"), "{}", text(&silent));
    assert_eq!(s.runs.0.load(Ordering::SeqCst), 0);

    // The real answer for the real call runs it, once.
    let ran = complete(s.client.call_tool_once(retry("sda", &state)).await.unwrap());
    assert_eq!(text(&ran), "wiped sda");
    let replayed = complete(s.client.call_tool_once(retry("sda", &state)).await.unwrap());
    assert_eq!(replayed.is_error, Some(true));
    assert!(
        text(&replayed).contains("this answer was used already"),
        "{}",
        text(&replayed)
    );
    assert_eq!(
        s.runs.0.load(Ordering::SeqCst),
        1,
        "a replayed yes ran twice"
    );
    assert!(
        s.person.asked().is_empty(),
        "the client drove no round itself"
    );
}

/// A call cancelled while its question waits: the question is withdrawn
/// (the person's client is told), and the tool does not run.
#[tokio::test]
async fn a_cancelled_call_withdraws_its_question() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;

    let s = connect(
        ClientLifecycleMode::Initialize,
        Person::default(),
        Duration::from_secs(60),
    )
    .await;
    let handle = s
        .client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(call("sda"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.person.asked().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never asked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    while *s.person.withdrawn.lock().unwrap() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the question was not withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.runs.0.load(Ordering::SeqCst), 0);
}
