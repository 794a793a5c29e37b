//! Agent worker processes (`examples` fixture `agent_worker`) on one
//! PostgreSQL database, and what each logged: for `tests/scale.rs` and
//! `tests/scale_approval.rs`.
#![allow(dead_code)] // each suite file uses its part

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::example::example;

/// A model call a worker logged: (worker, prompt id, start µs, end µs).
pub(crate) type Call = (usize, String, u128, u128);

/// A worker process and what it logged.
pub(crate) struct Worker {
    pub(crate) child: Child,
    pub(crate) stderr: Arc<Mutex<String>>,
    /// The sessions whose `delete` call it ran (`--approval`).
    pub(crate) ran: Arc<Mutex<Vec<String>>>,
}

/// Starts worker `n` serving `url`; its model calls go to `calls`. Returns
/// once it is connected.
pub(crate) async fn worker(
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
pub(crate) async fn worker_with(
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
