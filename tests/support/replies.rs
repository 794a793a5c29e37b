//! A loopback model server that answers its requests in turn, each with
//! the next of a list of replies (wiremock).

use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server answering each request in turn with `replies`.
pub(crate) async fn server(replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    for (i, reply) in replies.into_iter().enumerate() {
        Mock::given(method("POST"))
            .respond_with(reply)
            .up_to_n_times(1)
            .with_priority(u8::try_from(i + 1).unwrap())
            .mount(&server)
            .await;
    }
    server
}
