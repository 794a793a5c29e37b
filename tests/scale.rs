//! Many agent processes on one PostgreSQL database (`examples` fixture
//! `agent_worker`, see `tests/support/worker.rs`): every prompt answered
//! once, a session's turns never overlapping, a killed worker's turns
//! resumed by the others, and every process hearing every message.
//!
//! They need a server: `KESOKU_TEST_PG_URL` (see `tests/support/pg.rs`).
//! (`postgres_restart.rs`: a server restarted mid-run.)
#![cfg(feature = "postgres")]

#[path = "support/pg.rs"]
mod pg;

#[path = "support/example.rs"]
mod example;
use example::example;

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku::gateway::{Filter, Gateway};
use kesoku::store::{PostgresOptions, PostgresStore, Store};
use kesoku::{DeltaKind, Message, MessageType, Role, Status};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// An answer that quotes a call cut off by a worker's death: the turn
/// resumed with that call answered as interrupted (as after a crash on
/// `SQLite`), and the model answered from there.
const HEALED: &str = "2 + 3 = Error: the call to `add` was interrupted before it returned a result; it may or may not have run";

/// A model call a worker logged: (worker, prompt id, start µs, end µs).
type Call = (usize, String, u128, u128);

/// A worker process and what it logged.
struct Worker {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// The sessions whose `delete` call it ran (`--approval`).
    ran: Arc<Mutex<Vec<String>>>,
}

/// Starts worker `n` serving `url`; its model calls go to `calls`. Returns
/// once it is connected.
async fn worker(
    n: usize,
    url: &str,
    lease_ms: u64,
    calls: &Arc<Mutex<HashMap<String, Vec<Call>>>>,
    kill_after: Option<usize>,
) -> Worker {
    worker_with(n, url, lease_ms, calls, kill_after, false, &[]).await
}

/// [`worker`], with `extra` arguments to `serve`; with `kill_on_ran`,
/// killed as it starts its first `delete` (`--approval`).
async fn worker_with(
    n: usize,
    url: &str,
    lease_ms: u64,
    calls: &Arc<Mutex<HashMap<String, Vec<Call>>>>,
    kill_after: Option<usize>,
    kill_on_ran: bool,
    extra: &[&str],
) -> Worker {
    let lease = lease_ms.to_string();
    let mut args = vec!["serve", url, "--lease-ms", &lease, "--latency-ms", "20"];
    args.extend_from_slice(extra);
    let mut child = Command::new(example("agent_worker"))
        .args(&args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start agent_worker");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (ready_tx, ready) = oneshot::channel();
    let calls = Arc::clone(calls);
    let pid = child.id().expect("the worker runs").to_string();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::clone(&ran);
    tokio::spawn(async move {
        let mut ready_tx = Some(ready_tx);
        let mut made = 0;
        while let Ok(Some(line)) = lines.next_line().await {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["ready"] => {
                    if let Some(tx) = ready_tx.take() {
                        let _ = tx.send(());
                    }
                }
                ["ran", session] => {
                    runs.lock().unwrap().push((*session).to_owned());
                    if kill_on_ran {
                        std::process::Command::new("kill")
                            .args(["-KILL", &pid])
                            .status()
                            .unwrap();
                    }
                }
                ["call", session, prompt, start, end] => {
                    calls
                        .lock()
                        .unwrap()
                        .entry((*session).to_owned())
                        .or_default()
                        .push((
                            n,
                            (*prompt).to_owned(),
                            start.parse().unwrap(),
                            end.parse().unwrap(),
                        ));
                    made += 1;
                    // Killed with SIGKILL as it logs this call: its other
                    // turns are in flight.
                    if kill_after == Some(made) {
                        std::process::Command::new("kill")
                            .args(["-KILL", &pid])
                            .status()
                            .unwrap();
                    }
                }
                _ => {}
            }
        }
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = Arc::clone(&stderr);
    tokio::spawn(async move {
        while let Ok(Some(line)) = err_lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .expect("agent_worker did not start within 30 s")
        .expect("agent_worker exited before it was ready");
    Worker { child, stderr, ran }
}

/// The final answers (assistant texts answering a user message) that
/// arrive through `gateway`, by prompt id.
struct Answers {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>,
}

impl Answers {
    async fn new(gateway: &Gateway) -> Self {
        let waiting: Arc<Mutex<HashMap<String, oneshot::Sender<String>>>> = Arc::default();
        let mut listener = gateway
            .listen(Filter::new().roles([Role::Assistant]))
            .await
            .unwrap();
        let w = Arc::clone(&waiting);
        tokio::spawn(async move {
            while let Some(Ok(d)) = listener.next().await {
                let m = d.message;
                if m.kind == MessageType::Text && m.status == Status::Pending {
                    let parent = m.parent_id.clone().unwrap_or_default();
                    if let Some(tx) = w.lock().unwrap().remove(&parent) {
                        let _ = tx.send(m.content);
                    }
                }
            }
        });
        Answers { waiting }
    }

    /// Posts a prompt to `session` and waits for its answer.
    async fn ask(&self, gateway: &Gateway, session: &str, text: &str) -> (String, String) {
        let m = Message::new(session, Role::User, MessageType::Text, text)
            .with_status(Status::PendingAgent);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(m.id.clone(), tx);
        let id = m.id.clone();
        gateway.post(m).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(120), rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {id} of {session} within 120 s"))
            .unwrap();
        (id, answer)
    }
}

/// Checks the store after a run: every prompt processed and answered
/// exactly once, after the prompt before it was answered; every call
/// answered once; and no two model calls of a session overlapping, nor
/// any of a prompt starting before the one before it was answered.
async fn check_sessions(
    store: &dyn Store,
    asked: &BTreeMap<String, Vec<String>>,
    calls: &HashMap<String, Vec<Call>>,
) {
    // An answer is posted before its prompt is marked processed (and a
    // dead worker's last one is marked by whoever resumes it): wait until
    // no prompt is open.
    let open = || async {
        let mut n = 0;
        for status in [Status::PendingAgent, Status::Processing] {
            n += store.with_status(status).await.unwrap().len();
        }
        n
    };
    for _ in 0..300 {
        if open().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (session, prompts) in asked {
        let history = store.history(session).await.unwrap();
        let users: Vec<&Message> = history.iter().filter(|m| m.role == Role::User).collect();
        assert_eq!(
            users.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
            *prompts,
            "{session}: its prompts"
        );
        for u in &users {
            assert_eq!(u.status, Status::Processed, "{session}: prompt {}", u.id);
            let answers = history
                .iter()
                .filter(|m| {
                    m.role == Role::Assistant
                        && m.kind == MessageType::Text
                        && m.status == Status::Pending
                        && m.parent_id.as_deref() == Some(u.id.as_str())
                })
                .count();
            assert_eq!(answers, 1, "{session}: answers to {}", u.id);
        }
        for call in history.iter().filter(|m| m.kind == MessageType::ToolCall) {
            let results = history
                .iter()
                .filter(|m| {
                    m.kind == MessageType::ToolResult
                        && m.parent_id.as_deref() == Some(call.id.as_str())
                })
                .count();
            assert_eq!(results, 1, "{session}: results of call {}", call.id);
        }
        // In the store's order: the second prompt after the first's answer.
        let pos = |pred: &dyn Fn(&Message) -> bool| history.iter().position(pred).unwrap();
        let first_answer = pos(&|m| {
            m.role == Role::Assistant
                && m.status == Status::Pending
                && m.parent_id.as_deref() == Some(prompts[0].as_str())
        });
        let second = pos(&|m| m.id == prompts[1]);
        assert!(first_answer < second, "{session}: answers out of order");

        let mut mine = calls.get(session).cloned().unwrap_or_default();
        mine.sort_by_key(|c| c.2);
        assert!(
            mine.len() >= 4,
            "{session}: {} model calls logged",
            mine.len()
        );
        for pair in mine.windows(2) {
            assert!(
                pair[0].3 <= pair[1].2,
                "{session}: model calls overlap: worker {} {}..{} and worker {} {}..{}",
                pair[0].0,
                pair[0].2,
                pair[0].3,
                pair[1].0,
                pair[1].2,
                pair[1].3
            );
        }
        // Every call of the second prompt after every call of the first.
        let last_of_first = mine
            .iter()
            .filter(|c| c.1 == prompts[0])
            .map(|c| c.3)
            .max()
            .unwrap();
        let first_of_second = mine
            .iter()
            .filter(|c| c.1 == prompts[1])
            .map(|c| c.2)
            .min()
            .unwrap();
        assert!(last_of_first <= first_of_second, "{session}: turns overlap");
    }
}

/// Runs `sessions` sessions of two prompts each, at once, through `gateway`;
/// the prompt ids by session, and every answer.
async fn run_sessions(
    gateway: &Gateway,
    answers: &Arc<Answers>,
    sessions: usize,
) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let (gateway, answers) = (gateway.clone(), Arc::clone(answers));
        tasks.push(tokio::spawn(async move {
            let session = format!("s{s:03}");
            let (p1, a1) = answers.ask(&gateway, &session, "first").await;
            let (p2, a2) = answers.ask(&gateway, &session, "second").await;
            (session, vec![p1, p2], [a1, a2])
        }));
    }
    let mut asked = BTreeMap::new();
    let mut all = Vec::new();
    for t in tasks {
        let (session, prompts, answers) = t.await.unwrap();
        asked.insert(session, prompts);
        all.extend(answers);
    }
    (asked, all)
}

/// Three workers on a new database, and a gateway of this process.
struct Cluster {
    store: Arc<dyn Store>,
    gateway: Gateway,
    /// Every worker's model calls, by session.
    calls: Arc<Mutex<HashMap<String, Vec<Call>>>>,
    workers: Vec<Worker>,
    answers: Arc<Answers>,
}

impl Cluster {
    /// Starts three workers with leases of `lease_ms`; worker 0 is killed
    /// as it logs model call `kill_first_after`. `None` (skipped) without a
    /// server.
    async fn start(test: &str, lease_ms: u64, kill_first_after: Option<usize>) -> Option<Self> {
        let url = pg::fresh_database(test).await?;
        let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
        let gateway = Gateway::from_arc(Arc::clone(&store));
        let calls = Arc::default();
        let mut workers = Vec::new();
        for n in 0..3 {
            let kill = kill_first_after.filter(|_| n == 0);
            workers.push(worker(n, &url, lease_ms, &calls, kill).await);
        }
        let answers = Arc::new(Answers::new(&gateway).await);
        Some(Cluster {
            store,
            gateway,
            calls,
            workers,
            answers,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_answer_each_prompt_once_with_turns_in_order() {
    let Some(Cluster {
        store,
        gateway,
        calls,
        workers,
        answers,
    }) = Cluster::start(
        "three_workers_answer_each_prompt_once_with_turns_in_order",
        2_000,
        None,
    )
    .await
    else {
        return;
    };
    let (asked, said) = run_sessions(&gateway, &answers, 300).await;
    assert!(said.iter().all(|a| a == "2 + 3 = 5"), "{said:?}");
    let calls = calls.lock().unwrap().clone();
    check_sessions(&*store, &asked, &calls).await;
    // The work was shared.
    let mut per_worker = [0usize; 3];
    for c in calls.values().flatten() {
        per_worker[c.0] += 1;
    }
    assert!(
        per_worker.iter().all(|&n| n > 0),
        "model calls per worker: {per_worker:?}"
    );
    for w in &workers {
        let err = w.stderr.lock().unwrap();
        assert!(!err.contains("ERROR"), "a worker logged an error:\n{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_turns_are_resumed_and_none_is_answered_twice() {
    let Some(Cluster {
        store,
        gateway,
        calls,
        mut workers,
        answers,
    }) = Cluster::start(
        "a_killed_workers_turns_are_resumed_and_none_is_answered_twice",
        1_000,
        Some(30),
    )
    .await
    else {
        return;
    };
    // Worker 0 is killed as it logs its 30th model call, mid-turn: it
    // holds a third of the sessions' turns at any moment.
    let (asked, said) = run_sessions(&gateway, &answers, 120).await;
    let status = workers[0].child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "worker 0 was killed"
    );
    // A turn cut off between its call and the call's result is resumed
    // with that call answered as interrupted (as after a crash on
    // SQLite), and the model answers from there.
    assert!(
        said.iter().all(|a| a == "2 + 3 = 5" || a == HEALED),
        "{said:?}"
    );
    let calls = calls.lock().unwrap().clone();
    // Turns the dead worker had begun were resumed by the others.
    let resumed = workers[1..]
        .iter()
        .any(|w| w.stderr.lock().unwrap().contains("resuming turns"));
    assert!(
        resumed,
        "no worker resumed a turn:\n{}\n{}",
        workers[1].stderr.lock().unwrap(),
        workers[2].stderr.lock().unwrap()
    );
    // A call the dead worker had begun was never logged (it logs calls
    // that end); those it finished came before its death, and a turn is
    // resumed only after its lease expired, so every logged call obeys
    // the same rules.
    check_sessions(&*store, &asked, &calls).await;
}

/// How many messages each poster process posts.
const EACH: usize = 400;

/// Ends every connection of this database that is waiting in `LISTEN`
/// (each store's listening one); how many.
async fn cut_listeners(url: &str) -> usize {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'kesoku listener'",
            &[],
        )
        .await
        .unwrap();
    rows.iter().filter(|r| r.get::<_, bool>(0)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_sees_every_message_other_processes_post_in_order_across_reconnects() {
    let Some(url) = pg::fresh_database(
        "a_listener_sees_every_message_other_processes_post_in_order_across_reconnects",
    )
    .await
    else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    // No periodic read: only the store's announcements deliver.
    let gateway =
        Gateway::from_arc(Arc::clone(&store)).with_poll_interval(Duration::from_secs(3600));
    let mut listener = gateway.listen(Filter::new().after(0)).await.unwrap();
    let mut posters = Vec::new();
    for p in 0..2 {
        posters.push(
            Command::new(example("agent_worker"))
                .args(["post", &url, &format!("p{p}"), &EACH.to_string()])
                .stdout(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap(),
        );
    }
    let mut got = Vec::new();
    let mut cuts = 0;
    while got.len() < 2 * EACH {
        let d = tokio::time::timeout(Duration::from_secs(30), listener.next())
            .await
            .unwrap_or_else(|_| panic!("only {} of {} messages arrived", got.len(), 2 * EACH))
            .unwrap()
            .unwrap();
        got.push((d.seq, d.message.id, d.message.content));
        // Twice while they post, the listening connection is cut: what is
        // posted meanwhile comes from the table when it is back.
        if got.len() == EACH / 2 || got.len() == EACH {
            cuts += cut_listeners(&url).await;
        }
    }
    for p in &mut posters {
        assert!(p.wait().await.unwrap().success());
    }
    assert!(cuts >= 2, "the listening connections were cut {cuts} times");
    let stored: Vec<(i64, String, String)> = store
        .after(0, 10 * EACH)
        .await
        .unwrap()
        .into_iter()
        .map(|(s, m)| (s, m.id, m.content))
        .collect();
    assert_eq!(
        got, stored,
        "the listener's messages are the store's, in order, each once"
    );
    for p in 0..2 {
        let mine: Vec<&str> = got
            .iter()
            .map(|g| g.2.as_str())
            .filter(|c| c.starts_with(&format!("p{p} ")))
            .collect();
        let want: Vec<String> = (0..EACH).map(|i| format!("p{p} {i}")).collect();
        assert_eq!(mine, want, "poster {p}'s messages in its order");
    }
    // Messages stored only while the listening connection is down, and
    // none after: no notification will ever name them, so they come from
    // the table once it is back.
    let other: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    assert!(cut_listeners(&url).await >= 1);
    let mut quiet = Vec::new();
    for i in 0..20 {
        let m = Message::new("gap", Role::System, MessageType::Text, format!("gap {i}"));
        quiet.push((other.insert(&m).await.unwrap(), m.id));
    }
    for (seq, id) in &quiet {
        let d = tokio::time::timeout(Duration::from_secs(30), listener.next())
            .await
            .expect("a message stored during the reconnect never arrived")
            .unwrap()
            .unwrap();
        assert_eq!((&d.seq, &d.message.id), (seq, id));
    }
    // Nothing more comes.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), listener.next())
            .await
            .is_err()
    );
}

/// A front end in another process sees a worker's reply as it is written
/// (deltas relayed through the database), and then the reply stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_sees_a_workers_reply_as_it_streams() {
    let Some(url) = pg::fresh_database("a_front_end_sees_a_workers_reply_as_it_streams").await
    else {
        return;
    };
    let relay = PostgresOptions::new().with_relay_deltas(true);
    let front = Gateway::new(PostgresStore::connect_with(&url, relay).await.unwrap());
    let mut child = Command::new(example("agent_worker"))
        .args(["serve", &url, "--relay-deltas", "--latency-ms", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start agent_worker");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line == "ready" {
            break;
        }
    }
    let mut deltas = front.deltas(Some("s"));
    let prompt =
        Message::new("s", Role::User, MessageType::Text, "add").with_status(Status::PendingAgent);
    let prompt_id = prompt.id.clone();
    front.post(prompt).await.unwrap();

    let mut kinds = Vec::new();
    let text = loop {
        let delta = tokio::time::timeout(Duration::from_secs(20), deltas.next())
            .await
            .expect("no delta from the worker within 20 s")
            .unwrap();
        assert_eq!(delta.reply_to.as_deref(), Some(prompt_id.as_str()));
        match delta.kind {
            DeltaKind::Text(text) => break text,
            other => kinds.push(other),
        }
    };
    assert_eq!(text, "2 + 3 = 5");
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, DeltaKind::ToolCall { name, .. } if name == "add")),
        "the tool call's start was not streamed: {kinds:?}"
    );
    let mut stored = front
        .listen(Filter::new().session("s").roles([Role::Assistant]).after(0))
        .await
        .unwrap();
    loop {
        let delivery = tokio::time::timeout(Duration::from_secs(20), stored.next())
            .await
            .expect("the reply was not stored")
            .unwrap()
            .unwrap();
        if delivery.message.kind == MessageType::Text {
            assert_eq!(delivery.message.content, "2 + 3 = 5");
            break;
        }
    }
    child.kill().await.unwrap();
}

/// Turns paused for approval on three workers; a front end (this process)
/// approves half of them and denies the rest while a worker is killed.
/// Every waiting call is answered once, nothing runs unapproved, and each
/// approved call runs at most once (once, unless its worker died running
/// it: then the model reads that it was interrupted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_decides_paused_turns_while_a_worker_dies() {
    const SESSIONS: usize = 24;
    let test = "a_front_end_decides_paused_turns_while_a_worker_dies";
    let Some(url) = pg::fresh_database(test).await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    let gateway = Gateway::from_arc(Arc::clone(&store));
    let calls = Arc::default();
    let mut workers = Vec::new();
    for n in 0..3 {
        // Worker 0 dies as it begins running its first approved call.
        let doomed = n == 0;
        workers.push(worker_with(n, &url, 1_000, &calls, None, doomed, &["--approval"]).await);
    }
    let mut prompts = Vec::new();
    for i in 0..SESSIONS {
        let m = Message::new(
            format!("a{i}"),
            Role::User,
            MessageType::Text,
            "Delete note 1",
        )
        .with_status(Status::PendingAgent);
        prompts.push(m.id.clone());
        gateway.post(m).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let paused = store
            .with_status(Status::AwaitingApproval)
            .await
            .unwrap()
            .len();
        if paused == SESSIONS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{paused} of {SESSIONS} paused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        workers.iter().all(|w| w.ran.lock().unwrap().is_empty()),
        "a call ran before it was approved"
    );
    let front = kesoku::llm::Agent::builder(
        kesoku::llm::ScriptedLlm::from_json(serde_json::json!([])).unwrap(),
    )
    .store(Arc::clone(&store))
    .build()
    .unwrap();
    for i in 0..SESSIONS {
        let waiting = front.pending_approvals(&format!("a{i}")).await.unwrap();
        assert_eq!(waiting.len(), 1, "session a{i}");
        // Whether this decision or a worker's sweep puts the turn back
        // (both may see it decided first) does not matter: one does.
        if i % 2 == 0 {
            front.approve(&waiting[0].id).await.unwrap();
        } else {
            front.deny(&waiting[0].id, Some("keep it")).await.unwrap();
        }
        // A second decision, from any process, is refused.
        assert!(front.approve(&waiting[0].id).await.is_err());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for prompt in &prompts {
        loop {
            let status = store.get(prompt).await.unwrap().unwrap().status;
            if status == Status::Processed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{prompt} is {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let status = workers[0].child.wait().await.unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "worker 0 was killed running an approved call"
    );
    let interrupted = check_decided(&*store, &workers, SESSIONS).await;
    assert!(
        interrupted >= 1,
        "no approved call was cut off by the death"
    );
}

/// Each of the `sessions` decided above (`a{i}`, approved when `i` is
/// even): its call answered once, run at most once and only if approved,
/// and the model's answer from its result. How many approved calls a
/// dead worker cut off (answered as interrupted, never run again).
async fn check_decided(store: &dyn Store, workers: &[Worker], sessions: usize) -> usize {
    let mut interrupted = 0;
    let mut ran: HashMap<String, usize> = HashMap::new();
    for w in workers {
        for s in w.ran.lock().unwrap().iter() {
            *ran.entry(s.clone()).or_default() += 1;
        }
    }
    for i in 0..sessions {
        let session = format!("a{i}");
        let history = store.history(&session).await.unwrap();
        let call = history
            .iter()
            .find(|m| m.kind == MessageType::ToolCall)
            .unwrap();
        let results: Vec<&Message> = history
            .iter()
            .filter(|m| {
                m.kind == MessageType::ToolResult
                    && m.parent_id.as_deref() == Some(call.id.as_str())
            })
            .collect();
        assert_eq!(results.len(), 1, "{session}: {history:#?}");
        let answer = &history.last().unwrap().content;
        let runs = ran.get(&session).copied().unwrap_or(0);
        if i % 2 == 0 {
            assert_eq!(runs, 1, "{session}: approved, so run once");
            if answer.contains("interrupted") {
                interrupted += 1;
            } else {
                assert_eq!(answer, "deleted: deleted 1", "{session}");
            }
        } else {
            assert_eq!(runs, 0, "{session} ran, denied");
            assert!(
                answer.contains("not approved: keep it"),
                "{session}: {answer}"
            );
        }
    }
    interrupted
}
