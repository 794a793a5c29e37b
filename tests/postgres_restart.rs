//! PostgreSQL restarted under agents at work (issue 18, item 18): the
//! restart completes at once, and every turn in flight goes on once the
//! server is back. Each test starts a server of its own (PostgreSQL's
//! programs, with `tools/postgres/start.sh`) so it can restart it, and is
//! skipped without them.
#![cfg(feature = "postgres")]

use kesoku::store::MessageLog;
use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku::gateway::{Filter, Gateway};
use kesoku::store::{PostgresOptions, PostgresStore, Store};
use kesoku::{Message, MessageType, Role, Status};
use tokio::process::Command;

/// A PostgreSQL server of this test's own (`tools/postgres/start.sh` in a
/// temporary directory, on a free port), so the test can restart it;
/// stopped when dropped.
struct OwnServer {
    /// The server's directory (`data/`, `log`), inside `_dir`.
    root: std::path::PathBuf,
    /// `pg_ctl`.
    pg_ctl: std::path::PathBuf,
    url: String,
    _dir: tempfile::TempDir,
}

/// The directory of PostgreSQL's programs, if they are installed.
fn postgres_bin() -> Option<std::path::PathBuf> {
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").exists() && bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

/// Whether this process runs as root (the server then runs as `postgres`,
/// as `start.sh` arranges).
fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

impl OwnServer {
    /// Starts one; `None` (and a line saying the test is skipped) without
    /// PostgreSQL's programs.
    fn start(test: &str) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        let Some(bin) = postgres_bin() else {
            eprintln!(
                "skipped {test}: no PostgreSQL server programs in /usr/lib/postgresql/*/bin (install Debian's `postgresql`)"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // The server may run as `postgres`: it must reach its directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().join("pg");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/postgres/start.sh");
        let out = std::process::Command::new(script)
            .arg(&root)
            .arg(port.to_string())
            .output()
            .expect("run tools/postgres/start.sh");
        assert!(
            out.status.success(),
            "tools/postgres/start.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Some(OwnServer {
            root,
            pg_ctl: bin.join("pg_ctl"),
            url,
            _dir: dir,
        })
    }

    /// `pg_ctl ARGS` on this server, as the server's user.
    fn pg_ctl(&self, args: &[&str]) -> std::process::Command {
        let mut command = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&self.pg_ctl);
            c
        } else {
            std::process::Command::new(&self.pg_ctl)
        };
        command
            .arg("-D")
            .arg(self.root.join("data"))
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// `pg_ctl restart -m fast`, waiting up to 20 s: whether it succeeded,
    /// and what it said.
    async fn restart(&self) -> (bool, String) {
        let log = self.root.join("restart.log");
        let log = log.display().to_string();
        let out =
            Command::from(self.pg_ctl(&["restart", "-m", "fast", "-w", "-t", "20", "-l", &log]))
                .output()
                .await
                .expect("run pg_ctl");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl(&["stop", "-m", "immediate", "-w", "-t", "10"])
            .output();
    }
}

/// A worker agent (in this process) on its own store at `url`: each
/// prompt's turn calls `add` once and answers with the sum.
async fn restart_worker(url: &str, lease: Duration) -> kesoku::llm::Agent {
    use kesoku::llm::{Agent, ScriptedLlm};
    use kesoku::{DynamicTool, ToolOutput, ToolRegistry};
    let store = PostgresStore::connect(url).await.unwrap();
    let mut tools = ToolRegistry::new();
    tools
        .register(
            DynamicTool::new(
                "add",
                "Adds a and b.",
                serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
                |args, _| async move {
                    let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
                    Ok(ToolOutput::new(serde_json::json!(sum)))
                },
            )
            .unwrap(),
        )
        .unwrap();
    let script = serde_json::json!([
        {"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "2 + 3 = {{c1}}"}
    ]);
    let model = ScriptedLlm::from_json(script)
        .unwrap()
        .per_prompt()
        .with_latency(Duration::from_millis(20));
    Agent::builder(model)
        .registry(tools)
        .store(store)
        .lease(lease)
        .build()
        .unwrap()
}

/// Posts `m` through `gateway`, trying again while the database is away
/// (a try that finds it stored already had it stored: the failure came
/// after the commit).
async fn post_through_outage(gateway: &Gateway, m: &Message) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match gateway.post(m.clone()).await {
            Ok(_)
            | Err(kesoku::GatewayError::Store(kesoku::store::StoreError::Duplicate { .. })) => {
                return;
            }
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "could not post for 60 s: {e}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The restart test's sessions, and prompts in each.
const SESSIONS: usize = 40;
const PROMPTS: usize = 3;

/// Checks each prompt of `asked` (by session) was answered once ("2 + 3 =
/// 5") and marked processed, and each call has one result.
async fn check_answered_once(store: &dyn Store, asked: &BTreeMap<String, Vec<String>>) {
    for (session, prompts) in asked {
        let history = store.history(session).await.unwrap();
        for id in prompts {
            let prompt = history.iter().find(|m| &m.id == id).unwrap();
            let answers = history
                .iter()
                .filter(|m| {
                    m.role == Role::Assistant
                        && m.kind == MessageType::Text
                        && m.parent_id.as_deref() == Some(id.as_str())
                })
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>();
            assert_eq!(answers, ["2 + 3 = 5"], "{session}: answers to {id}");
            // The answer is stored before its prompt is marked.
            let mut status = prompt.status;
            for _ in 0..100 {
                if status == Status::Processed {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                status = store.get(id).await.unwrap().unwrap().status;
            }
            assert_eq!(status, Status::Processed, "{session}: prompt {id}");
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
    }
}

/// Issue 18, item 18: `pg_ctl restart -m fast` in the middle of a run. The
/// restart completes (it used to stall for 30 to 60 s in a quarter of the
/// runs, sometimes leaving the server stopped), and every turn in flight
/// goes on once the server is back: all prompts are answered within 30 s
/// of the restart, each once, every call with one result, although the
/// leases last 60 s (so no turn may wait for its lease to expire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_run_stalls_nothing() {
    let test = "a_postgres_restart_mid_run_stalls_nothing";
    let Some(server) = OwnServer::start(test) else {
        return;
    };
    let lease = Duration::from_secs(60);
    let mut serving = Vec::new();
    for _ in 0..2 {
        let agent = restart_worker(&server.url, lease).await;
        serving.push(tokio::spawn(async move { agent.serve().await }));
    }
    let front = Gateway::new(PostgresStore::connect(&server.url).await.unwrap());
    let mut listener = front
        .listen(Filter::new().roles([Role::Assistant]))
        .await
        .unwrap();
    let answered: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let count = Arc::new(tokio::sync::Notify::new());
    {
        let (answered, count) = (Arc::clone(&answered), Arc::clone(&count));
        tokio::spawn(async move {
            while let Some(d) = listener.next().await {
                let Ok(d) = d else { continue };
                let m = d.message;
                if m.kind == MessageType::Text && m.status == Status::Pending {
                    let parent = m.parent_id.clone().unwrap_or_default();
                    answered.lock().unwrap().insert(parent, m.content);
                    count.notify_waiters();
                }
            }
        });
    }
    // Sessions of prompts, each posted once the one before is answered.
    let asked: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        let (front, answered, asked) = (front.clone(), Arc::clone(&answered), Arc::clone(&asked));
        sessions.push(tokio::spawn(async move {
            let session = format!("s{s:03}");
            for p in 0..PROMPTS {
                let m = Message::new(
                    session.as_str(),
                    Role::User,
                    MessageType::Text,
                    format!("{p}"),
                )
                .with_status(Status::PendingAgent);
                asked
                    .lock()
                    .unwrap()
                    .entry(session.clone())
                    .or_default()
                    .push(m.id.clone());
                post_through_outage(&front, &m).await;
                while !answered.lock().unwrap().contains_key(&m.id) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    // Restart once a third of the prompts are answered, turns in flight.
    while answered.lock().unwrap().len() < SESSIONS * PROMPTS / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let restarted = std::time::Instant::now();
    let (ok, said) = server.restart().await;
    assert!(ok, "pg_ctl restart failed within 20 s: {said}");
    let took = restarted.elapsed();
    let all = async {
        for s in sessions {
            s.await.unwrap();
        }
    };
    eprintln!("pg_ctl restart -m fast took {took:?}");
    let left = Duration::from_secs(30).saturating_sub(took);
    if tokio::time::timeout(left, all).await.is_err() {
        let done = answered.lock().unwrap().len();
        panic!(
            "{done} of {} prompts answered 30 s after the restart (which took {took:?})",
            SESSIONS * PROMPTS
        );
    }
    for s in &serving {
        s.abort();
    }
    // Each prompt processed and answered once; each call one result.
    let asked = asked.lock().unwrap().clone();
    check_answered_once(&**front.store(), &asked).await;
}

/// Issue 18, item 18, the cause: a store call whose future is polled once
/// (it starts opening a connection) and then not again for a while (a
/// stream of deliveries polled now and then; `serve` awaiting a claim
/// while its listener's read stood half done). A connection opened so
/// while the server shuts down gets a backend that waits, up to the
/// server's `authentication_timeout` (a minute), for a startup packet that
/// does not come, and the server waits for it: `pg_ctl restart -m fast`
/// stalled, timed out, and left the server stopped. Connections now open
/// on tasks of their own, so the handshake goes on whoever polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_left_unpolled_does_not_hold_up_a_restart() {
    let test = "a_call_left_unpolled_does_not_hold_up_a_restart";
    let Some(server) = OwnServer::start(test) else {
        return;
    };
    let options = PostgresOptions::new().with_max_connections(400);
    let store = Arc::new(
        PostgresStore::connect_with(&server.url, options)
            .await
            .unwrap(),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Every 5 ms while the server restarts, a call polled once and kept.
    let parked = {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut parked = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let store = Arc::clone(&store);
                let mut call = Box::pin(async move { store.last_seq().await });
                std::future::poll_fn(|cx| {
                    let _ = call.as_mut().poll(cx);
                    std::task::Poll::Ready(())
                })
                .await;
                parked.push(call);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            parked.len()
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let (ok, said) = server.restart().await;
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let calls = parked.await.unwrap();
    eprintln!("pg_ctl restart -m fast took {took:?} with {calls} calls left unpolled");
    assert!(ok, "pg_ctl restart failed within 20 s ({took:?}): {said}");
    // And the store works on the restarted server.
    let after = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(seq) = store.last_seq().await {
                return seq;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(after.ok(), Some(0));
}
