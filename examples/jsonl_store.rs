//! A session store of one's own, in one file of JSON lines: the six
//! methods of `MessageLog`, made a whole `Store` by `LocalLeases` (leases
//! in this process's memory). Its tests run kesoku's conformance suite.
//!
//! Each line of the file is one change: a message stored, or a status
//! set. Opening the file replays them; a write appends one line and
//! flushes it before the call returns. A last line cut short by a crash
//! (that write never returned) is cut off when the file is opened again,
//! so the next write starts a line of its own.
//!
//! `cargo run --example jsonl_store` stores a prompt, reopens the file,
//! and prints what it holds; `cargo test --example jsonl_store` runs the
//! conformance suite against it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kesoku::store::{MessageLog, Seq, StoreError, StoreFuture};
use kesoku::{Message, Status};
use serde::{Deserialize, Serialize};

/// One line of the file.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Stored(Message),
    Status { id: String, status: Status },
}

/// The file's messages, in order, and where each id is.
struct State {
    file: File,
    messages: Vec<Message>,
    index: HashMap<String, usize>,
}

/// A message log in a JSON-lines file, for one process.
pub struct JsonlLog {
    state: Mutex<State>,
    name: String,
}

impl JsonlLog {
    /// Opens (or creates) the log at `path`, reading what it holds.
    ///
    /// # Errors
    /// The file cannot be opened or read.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let name = format!("JSON lines at {}", path.display());
        let fail = |action: &str, e: std::io::Error| StoreError::backend(&name, action, e);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| fail("open the file", e))?;
        let mut state = State {
            file,
            messages: Vec::new(),
            index: HashMap::new(),
        };
        let mut reader = BufReader::new(state.file.try_clone().map_err(|e| fail("read", e))?);
        let (mut line, mut good) = (Vec::new(), 0_u64);
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| fail("read", e))?;
            // A line without its end, or that does not parse, is the
            // last write, cut short: cut it off.
            let parsed = line
                .ends_with(b"\n")
                .then(|| serde_json::from_slice(&line).ok());
            match parsed.flatten() {
                Some(Line::Stored(m)) => {
                    state.index.insert(m.id.clone(), state.messages.len());
                    state.messages.push(m);
                }
                Some(Line::Status { id, status }) => {
                    if let Some(&i) = state.index.get(&id) {
                        state.messages[i].status = status;
                    }
                }
                None if n == 0 => break,
                None => {
                    state
                        .file
                        .set_len(good)
                        .map_err(|e| fail("cut a torn line off", e))?;
                    break;
                }
            }
            good += n as u64;
        }
        Ok(JsonlLog {
            state: Mutex::new(state),
            name,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends `line` to the file, flushed, before the state changes.
    fn append(&self, state: &mut State, line: &Line) -> Result<(), StoreError> {
        let mut bytes =
            serde_json::to_vec(line).map_err(|e| StoreError::backend(&self.name, "encode", e))?;
        bytes.push(b'\n');
        state
            .file
            .write_all(&bytes)
            .and_then(|()| state.file.sync_data())
            .map_err(|e| StoreError::backend(&self.name, "append to the file", e))
    }
}

/// A `Seq` is a message's place in the file, from 1.
fn seq(i: usize) -> Seq {
    Seq::try_from(i + 1).expect("fewer messages than i64::MAX")
}

impl MessageLog for JsonlLog {
    fn insert<'a>(&'a self, message: &'a Message) -> StoreFuture<'a, Seq> {
        let mut state = self.lock();
        let result = if state.index.contains_key(&message.id) {
            Err(StoreError::Duplicate {
                id: message.id.clone(),
            })
        } else {
            self.append(&mut state, &Line::Stored(message.clone()))
                .map(|()| {
                    let i = state.messages.len();
                    state.index.insert(message.id.clone(), i);
                    state.messages.push(message.clone());
                    seq(i)
                })
        };
        Box::pin(std::future::ready(result))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Message>> {
        let state = self.lock();
        let found = state.index.get(id).map(|&i| state.messages[i].clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn history_after<'a>(
        &'a self,
        session_id: &'a str,
        after: Seq,
    ) -> StoreFuture<'a, Vec<(Seq, Message)>> {
        let state = self.lock();
        let found = (0..state.messages.len())
            .filter(|&i| seq(i) > after && state.messages[i].session_id == session_id)
            .map(|i| (seq(i), state.messages[i].clone()))
            .collect();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn after(&self, after: Seq, limit: usize) -> StoreFuture<'_, Vec<(Seq, Message)>> {
        let state = self.lock();
        let from = usize::try_from(after.max(0)).unwrap_or(usize::MAX);
        let found = (from..state.messages.len())
            .take(limit)
            .map(|i| (seq(i), state.messages[i].clone()))
            .collect();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        from: &'a [Status],
        to: Status,
    ) -> StoreFuture<'a, bool> {
        let mut state = self.lock();
        let result = match state.index.get(id).copied() {
            Some(i) if from.contains(&state.messages[i].status) => {
                let line = Line::Status {
                    id: id.to_owned(),
                    status: to,
                };
                self.append(&mut state, &line).map(|()| {
                    state.messages[i].status = to;
                    true
                })
            }
            _ => Ok(false),
        };
        Box::pin(std::future::ready(result))
    }

    fn last_seq(&self) -> StoreFuture<'_, Seq> {
        let len = self.lock().messages.len();
        Box::pin(std::future::ready(Ok(
            Seq::try_from(len).unwrap_or(Seq::MAX)
        )))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    use kesoku::store::{LocalLeases, Store};
    use kesoku::{MessageType, Role};

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sessions.jsonl");
    let store: Box<dyn Store> = Box::new(LocalLeases::new(JsonlLog::open(&path)?));
    let prompt = Message::new("s1", Role::User, MessageType::Text, "What is 2 + 40?")
        .with_status(Status::PendingAgent);
    store.insert(&prompt).await?;
    store
        .transition(&prompt.id, &[Status::PendingAgent], Status::Processed)
        .await?;
    drop(store);

    let log = JsonlLog::open(&path)?;
    for (seq, m) in log.after(0, 100).await? {
        println!("{seq}: [{}] {} ({:?})", m.session_id, m.content, m.status);
    }
    for session in log.sessions().await? {
        println!(
            "session {}: {:?}, {} message(s)",
            session.id, session.title, session.messages
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kesoku::store::testing::{Fixture, conformance};
    use kesoku::store::{LocalLeases, MessageLog};
    use kesoku::{Message, MessageType, Role, Status};

    use super::JsonlLog;

    /// The whole conformance suite, each check on a new file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passes_the_conformance_suite() {
        conformance(|| async {
            let dir = tempfile::tempdir().unwrap();
            let log = JsonlLog::open(&dir.path().join("s.jsonl")).unwrap();
            Fixture::new(Arc::new(LocalLeases::new(log))).keeping(dir)
        })
        .await;
    }

    /// What was written is read back from the file; a last line cut short
    /// is cut off, and the next write is read back after it.
    #[tokio::test]
    async fn reopening_reads_the_file_back() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let log = JsonlLog::open(&path).unwrap();
        let m = Message::new("s", Role::User, MessageType::Text, "hi")
            .with_status(Status::PendingAgent);
        log.insert(&m).await.unwrap();
        let claim = [Status::PendingAgent];
        assert!(
            log.transition(&m.id, &claim, Status::Processed)
                .await
                .unwrap()
        );
        drop(log);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"stored\":{\"id").unwrap();
        drop(file);

        let log = JsonlLog::open(&path).unwrap();
        let after = Message::new("s", Role::Assistant, MessageType::Text, "hello");
        log.insert(&after).await.unwrap();
        drop(log);
        let log = JsonlLog::open(&path).unwrap();
        let read = log.history("s").await.unwrap();
        let ids: Vec<&str> = read.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, [m.id.as_str(), after.id.as_str()]);
        assert_eq!(read[0].status, Status::Processed);
    }
}
