//! MCP over HTTP at its connection limit, in process on loopback: clients
//! that hold connections without sending a request (kept alive and idle,
//! silent, trickling their headers) are closed to make room for a normal
//! client, idle ones first, then those longest in their headers; and a
//! connection slow to send its headers is closed by the header deadline.
#![cfg(feature = "mcp")]

use std::time::Duration;

use kesoku::ToolRegistry;
use kesoku::mcp::{HttpOptions, McpServer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::task::JoinHandle;

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

/// Long enough that no timeout of the server's plays any part in a test
/// that uses it.
const NEVER: Duration = Duration::from_secs(600);

/// A server on 127.0.0.1 with `options`: its `host:port`, and a guard
/// that shuts it down.
async fn serve(options: HttpOptions) -> (String, impl Sized) {
    let server = McpServer::new(ToolRegistry::new())
        .bind_http("127.0.0.1:0", options)
        .await
        .unwrap();
    let authority = server.local_addr().to_string();
    let stop = server.shutdown_token().drop_guard();
    tokio::spawn(server.run());
    (authority, stop)
}

/// A ping, with `Connection: close` or kept alive.
fn ping(authority: &str, close: bool) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n{}\r\n{PING}",
        PING.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// One response read off `stream` (by its `Content-Length`): its status.
async fn response(stream: &mut TcpStream) -> u16 {
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + length {
                    return head.split(' ').nth(1).unwrap().parse().unwrap();
                }
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before a whole response: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("a response")
}

/// A connection that was served one ping and is kept alive, idle.
async fn idle(authority: &str) -> OwnedReadHalf {
    let mut stream = TcpStream::connect(authority).await.unwrap();
    stream
        .write_all(ping(authority, false).as_bytes())
        .await
        .unwrap();
    assert_eq!(response(&mut stream).await, 200);
    stream.into_split().0
}

/// A connection that sends nothing (`trickle: false`), or the start of
/// its headers and then a byte every 100 ms, never ending them: its read
/// half, and the task writing.
async fn holder(authority: &str, trickle: bool) -> (OwnedReadHalf, JoinHandle<()>) {
    let (read, mut write) = TcpStream::connect(authority).await.unwrap().into_split();
    let head = format!("POST /mcp HTTP/1.1\r\nHost: {authority}\r\nX-Pad: ");
    let writer = tokio::spawn(async move {
        if trickle && write.write_all(head.as_bytes()).await.is_ok() {
            // Ends when the server closes the connection.
            while write.write_all(b"a").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            std::future::pending::<()>().await;
        }
        drop(write);
    });
    (read, writer)
}

/// A normal client's call on a new connection: the status (0 if the
/// connection was reset before one came).
async fn call(authority: &str) -> u16 {
    let mut stream = TcpStream::connect(authority).await.unwrap();
    // A connection turned away may be closed before all of this is sent.
    let _ = stream.write_all(ping(authority, true).as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("an answer");
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Whether the server closed `conn` (it reads the end, or a reset),
/// looking without waiting.
fn is_closed(conn: &OwnedReadHalf) -> bool {
    let mut byte = [0; 1];
    loop {
        match conn.try_read(&mut byte) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            // Whatever the server sent before closing.
            Ok(n) if n > 0 => {}
            Ok(_) | Err(_) => return true,
        }
    }
}

/// Whether the server closes `conn` within `within` (reading what it
/// sends until then).
async fn closes(conn: &mut OwnedReadHalf, within: Duration) -> bool {
    let mut sink = Vec::new();
    tokio::time::timeout(within, conn.read_to_end(&mut sink))
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_closes_idle_then_header_stalled_connections_to_serve_a_normal_client() {
    // No timeout of the server's closes anything here: only room made.
    let options = HttpOptions::default()
        .max_connections(8)
        .header_timeout(NEVER)
        .read_timeout(NEVER);
    let (authority, _stop) = serve(options).await;

    // Every slot taken, oldest first: three idle, then two silent and
    // three trickling their headers, in turn.
    let mut held = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..3 {
        held.push(("idle", idle(&authority).await));
    }
    for trickle in [false, true, true, false, true] {
        let (conn, writer) = holder(&authority, trickle).await;
        held.push((if trickle { "trickling" } else { "silent" }, conn));
        writers.push(writer);
    }

    // Each call finds every slot taken (another holder connects after
    // each): all are served.
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(call(&authority).await);
        let (conn, writer) = holder(&authority, true).await;
        held.push(("trickling, later", conn));
        writers.push(writer);
    }
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");

    // Those closed are the first in order: the idle, then the longest in
    // their headers; at least one for each call. (Each older than one
    // seen closed must close: its end may still be on its way.)
    let last = held
        .iter()
        .rposition(|(_, c)| is_closed(c))
        .expect("none was closed");
    for (i, (kind, conn)) in held[..last].iter_mut().enumerate() {
        assert!(
            closes(conn, Duration::from_secs(30)).await,
            "the {kind} connection {i} is open, though {last} is closed"
        );
    }
    assert!(last + 1 >= 10, "only {} closed", last + 1);
    for writer in writers {
        writer.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_closes_a_connection_slow_to_send_its_headers() {
    let options = HttpOptions::default()
        .header_timeout(Duration::from_millis(500))
        .read_timeout(NEVER);
    let (authority, _stop) = serve(options).await;

    // A body stalled after its headers: only the read timeout's to close.
    let mut body = TcpStream::connect(&authority).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\":"
    );
    body.write_all(head.as_bytes()).await.unwrap();
    let (mut trickling, writer) = holder(&authority, true).await;
    let (mut silent, _) = holder(&authority, false).await;
    let mut kept = idle(&authority).await;

    // A byte every 100 ms does not keep headers coming for ever.
    let within = Duration::from_secs(30);
    assert!(closes(&mut trickling, within).await, "still open");
    assert!(closes(&mut silent, within).await, "silent, still open");
    assert!(closes(&mut kept, within).await, "idle, still open");
    writer.abort();
    let (body, _write) = body.into_split();
    assert!(
        !is_closed(&body),
        "a body is not held to the header deadline"
    );
    // And the server serves.
    assert_eq!(call(&authority).await, 200);
}
