//! What the console's tests share: an agent over a store, a console
//! served on loopback, and a small HTTP client.

#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kesoku::console::{Console, Running};
use serde_json::Value;

/// A console served on a loopback port.
pub(crate) async fn serve(console: &Console) -> Running {
    console
        .bind("127.0.0.1:0".parse().unwrap())
        .await
        .expect("a loopback port")
}

/// An answer: its status, headers and body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// A request of `method` to `path` on `running`, with `headers`, and a
/// JSON `body` when given.
pub(crate) async fn call(
    running: &Running,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", running.addr()));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    let response = client
        .request(request.body(Full::new(body)).unwrap())
        .await
        .expect("the console answers");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The CSRF token of the console's page, read as the page has it.
pub(crate) async fn csrf(running: &Running, token: &str) -> String {
    let page = call(
        running,
        "GET",
        "/",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    )
    .await;
    let at = page
        .body
        .find("name=\"csrf\" content=\"")
        .expect("the page carries its CSRF token");
    let rest = &page.body[at + "name=\"csrf\" content=\"".len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// A change as the console's page makes it: its Origin, the token (here
/// as a bearer, where the page has its cookie) and the CSRF token.
pub(crate) async fn change(
    running: &Running,
    token: &str,
    method: &str,
    path: &str,
    body: Value,
) -> Answer {
    let csrf = csrf(running, token).await;
    let origin = format!("http://{}", running.addr());
    let bearer = format!("Bearer {token}");
    call(
        running,
        method,
        path,
        &[
            ("origin", &origin),
            ("authorization", &bearer),
            ("x-csrf-token", &csrf),
            ("content-type", "application/json"),
        ],
        Some(body),
    )
    .await
}
