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

#[path = "support/workers.rs"]
mod workers;
use workers::{Call, Worker, worker};

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku::gateway::{Filter, Gateway};
use kesoku::store::{PostgresOptions, PostgresStore, Store};
use kesoku::{DeltaKind, Message, MessageType, Role, Status};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::oneshot;

/// An answer that quotes a call cut off by a worker's death: the turn
/// resumed with that call answered as interrupted (as after a crash on
/// `SQLite`), and the model answered from there.
const HEALED: &str = "2 + 3 = Error: the call to `add` was interrupted before it returned a result; it may or may not have run";

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
    let status = tokio::time::timeout(Duration::from_secs(60), workers[0].child.wait())
        .await
        .expect("worker 0 did not make its 30th model call")
        .unwrap();
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
