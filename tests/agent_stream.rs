//! An agent streams its model's reply: listeners see the text grow as it
//! is written (deltas, live, never stored), the finished message is stored
//! once, and a newer prompt drops the stream at once.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kesoku::llm::{Agent, ClaudeLlm, HttpOptions, TurnStatus};
use kesoku::{DeltaKind, MessageType, Role, ToolArg};
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A Claude stream of a text reply written in `pieces`.
fn text_stream(pieces: &[&str]) -> String {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    )];
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for p in pieces {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 7}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let mut out = String::new();
    for (name, data) in events {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
    }
    out
}

/// A server that answers each request with `body` in chunks, waiting
/// `pause` between them.
async fn slow_server(chunks: Vec<String>, pause: Duration) -> String {
    slow_server_seeing(chunks, pause, Arc::default()).await
}

/// [`slow_server`], keeping the start of each request it is sent in
/// `requests` (head and body, as far as one read takes them).
async fn slow_server_seeing(
    chunks: Vec<String>,
    pause: Duration,
    requests: Arc<Mutex<Vec<String>>>,
) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let chunks = chunks.clone();
            let requests = Arc::clone(&requests);
            tokio::spawn(async move {
                let request = read_request(&mut socket).await;
                requests.lock().unwrap().push(request);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for chunk in chunks {
                    let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                    if socket.write_all(framed.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    tokio::time::sleep(pause).await;
                }
                let _ = socket.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    base
}

/// One HTTP request, head and body (as long as its `content-length`).
async fn read_request(socket: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0; 8192];
    loop {
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                return text.into_owned();
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).into_owned(),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn claude(base: &str) -> ClaudeLlm {
    ClaudeLlm::new("k")
        .with_base_url(base)
        .with_http_options(HttpOptions {
            max_retries: 0,
            ..HttpOptions::default()
        })
}

#[tokio::test]
async fn listeners_see_the_text_grow_and_the_store_keeps_one_message() {
    let pieces = ["The ", "weather ", "is ", "fine."];
    let stream = text_stream(&pieces);
    // One event per chunk, so each piece arrives on its own.
    let chunks: Vec<String> = stream.split_inclusive("\n\n").map(str::to_owned).collect();
    let base = slow_server(chunks, Duration::from_millis(20)).await;
    let agent = Agent::builder(claude(&base)).build().unwrap();
    let mut deltas = agent.gateway().deltas(Some("s"));
    let turn = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "Weather?").await })
    };
    // The first piece is seen while the reply is still being written.
    let first = tokio::time::timeout(Duration::from_secs(5), deltas.next())
        .await
        .expect("a delta")
        .unwrap();
    assert!(!turn.is_finished(), "a delta came only after the turn");
    let outcome = turn.await.unwrap().unwrap();
    assert_eq!(outcome.status, TurnStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("The weather is fine."));

    let DeltaKind::Text(t) = first.kind else {
        panic!("{first:?}")
    };
    let mut seen = vec![t];
    while seen.len() < pieces.len() {
        let delta = tokio::time::timeout(Duration::from_secs(5), deltas.next())
            .await
            .expect("a delta")
            .unwrap();
        assert_eq!(delta.session_id, "s");
        assert!(delta.reply_to.is_some());
        let DeltaKind::Text(t) = delta.kind else {
            panic!("{delta:?}")
        };
        seen.push(t);
    }
    assert_eq!(seen, pieces);

    // Deltas are not stored: one assistant text, the whole reply.
    let history = agent.gateway().history("s").await.unwrap();
    let texts: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(texts, ["The weather is fine."]);
}

/// The weather in a city.
#[derive(Debug, PartialEq, Deserialize, ToolArg)]
struct Weather {
    /// The city.
    city: String,
    /// The highest temperature, in degrees Celsius.
    high: f64,
}

#[tokio::test]
async fn a_typed_answer_streams_its_text_and_gives_the_value_at_the_end() {
    let pieces = [r#"{"city": "#, r#""Oslo", "#, r#""high": 3.5}"#];
    let stream = text_stream(&pieces);
    let chunks: Vec<String> = stream.split_inclusive("\n\n").map(str::to_owned).collect();
    let requests = Arc::default();
    let base = slow_server_seeing(chunks, Duration::from_millis(20), Arc::clone(&requests)).await;
    let agent = Agent::builder(claude(&base)).build().unwrap();
    let mut deltas = agent.gateway().deltas(Some("s"));
    let turn = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send_as::<Weather>("s", "Weather in Oslo?").await })
    };
    let mut seen = Vec::new();
    while seen.len() < pieces.len() {
        let delta = tokio::time::timeout(Duration::from_secs(5), deltas.next())
            .await
            .expect("a delta")
            .unwrap();
        let DeltaKind::Text(t) = delta.kind else {
            panic!("{delta:?}")
        };
        if seen.is_empty() {
            assert!(!turn.is_finished(), "a delta came only after the turn");
        }
        seen.push(t);
    }
    assert_eq!(seen, pieces);
    let typed = turn.await.unwrap().unwrap();
    assert_eq!(
        typed.value,
        Weather {
            city: "Oslo".into(),
            high: 3.5
        }
    );
    assert_eq!(typed.outcome.status, TurnStatus::Completed);

    // The streamed request asked for the shape.
    let request = requests.lock().unwrap()[0].clone();
    let body: serde_json::Value =
        serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(body["output_config"]["format"]["type"], "json_schema");
    assert_eq!(
        body["output_config"]["format"]["schema"]["required"],
        json!(["city", "high"])
    );
    // The answer is stored once, whole.
    let history = agent.gateway().history("s").await.unwrap();
    let last = history.last().unwrap();
    assert_eq!((last.role, last.kind), (Role::Assistant, MessageType::Text));
    assert_eq!(last.content, pieces.concat());
}

#[tokio::test]
async fn a_newer_prompt_drops_the_stream_at_once() {
    let pieces: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let stream = text_stream(&refs);
    let chunks: Vec<String> = stream.split_inclusive("\n\n").map(str::to_owned).collect();
    // 200 pieces 50 ms apart: ten seconds if nothing stops it.
    let base = slow_server(chunks, Duration::from_millis(50)).await;
    let agent = Agent::builder(claude(&base)).build().unwrap();
    let mut deltas = agent.gateway().deltas(Some("s"));
    let first = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.send("s", "Talk at length.").await })
    };
    // The reply has begun.
    tokio::time::timeout(Duration::from_secs(5), deltas.next())
        .await
        .expect("streaming began");
    let started = Instant::now();
    assert!(agent.interrupt("s"), "a turn was running");
    let outcome = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("the turn ends")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.status, TurnStatus::Interrupted);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
