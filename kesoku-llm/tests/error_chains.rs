//! A chain of errors says each thing once: an error that returns its
//! cause as `source()` does not print it in its `Display` too (issue 43).
//! Walks the chain of each error that used to, and checks every level's
//! text appears exactly once in the whole.

use std::error::Error;
use std::sync::Arc;

use kesoku_core::store::StoreError;
use kesoku_core::{ErrorChain, GatewayError, ProgressError};
use kesoku_llm::testing::{CassetteError, ReplayTransport};
use kesoku_llm::{LlmError, TransportError};

/// Each level's `Display`, from `e` down.
fn levels(e: &(dyn Error + 'static)) -> Vec<String> {
    let mut texts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        texts.push(cause.to_string());
        next = cause.source();
    }
    texts
}

/// Asserts the chain of `e` has `depth` levels and that, printed whole,
/// each level's text is in it exactly once; returns the whole.
fn said_once(e: &(dyn Error + 'static), depth: usize) -> String {
    let texts = levels(e);
    assert_eq!(texts.len(), depth, "{texts:?}");
    let whole = texts.join(": ");
    for text in &texts {
        assert_eq!(
            whole.matches(text.as_str()).count(),
            1,
            "`{text}` in `{whole}`"
        );
    }
    whole
}

#[test]
fn store_backend_says_the_database_error_once() {
    let e = StoreError::backend(
        "MyStore",
        "save message `m1`",
        std::io::Error::other("disk full"),
    );
    let whole = said_once(&e, 2);
    assert_eq!(
        whole,
        "the MyStore store failed to save message `m1`: disk full"
    );
    // Through the gateway (transparent), the same.
    let e = GatewayError::from(e);
    assert_eq!(said_once(&e, 2), whole);
    assert_eq!(ErrorChain(&e).to_string(), whole);
    // Without a source kept, the message says it, once.
    let e = StoreError::Backend {
        store: "MyStore".into(),
        action: "connect".into(),
        message: "refused".into(),
        source: None,
    };
    assert_eq!(
        said_once(&e, 1),
        "the MyStore store failed to connect: refused"
    );
}

#[test]
fn progress_error_says_its_cause_once() {
    let e = ProgressError::new(std::io::Error::other("the gateway is closed"));
    assert_eq!(
        said_once(&e, 2),
        "the progress note was not posted: the gateway is closed"
    );
}

#[test]
fn llm_transport_says_the_transport_error_once() {
    let e = LlmError::Transport {
        provider: "Claude",
        url: "https://api.anthropic.com/v1/messages".into(),
        source: TransportError::Replay("the cassette has no answer".into()),
        attempts: 3,
    };
    assert_eq!(
        said_once(&e, 2),
        "could not reach Claude at https://api.anthropic.com/v1/messages (after 3 attempts): \
         the cassette has no answer"
    );
    // `ErrorChain`, as the agent stores a failed call's note, says it all.
    assert_eq!(ErrorChain(&e).to_string(), levels(&e).join(": "));
}

#[test]
fn llm_transport_leaves_a_connect_error_to_its_source() {
    let refused: kesoku_llm::BoxError = Arc::new(std::io::Error::other("connection refused"));
    let e = LlmError::Transport {
        provider: "Claude",
        url: "http://127.0.0.1:1".into(),
        source: TransportError::Connect(refused),
        attempts: 1,
    };
    assert_eq!(
        e.to_string(),
        "could not reach Claude at http://127.0.0.1:1"
    );
    // Each level says its own part once, the connect error's cause too.
    let whole = said_once(&e, 3);
    assert_eq!(
        whole,
        "could not reach Claude at http://127.0.0.1:1: cannot connect: connection refused"
    );
    assert_eq!(ErrorChain(&e).to_string(), whole);
}

#[test]
fn transport_errors_say_their_cause_once() {
    let cause = || -> kesoku_llm::BoxError { Arc::new(std::io::Error::other("reset by peer")) };
    assert_eq!(
        said_once(&TransportError::Timeout(cause()), 2),
        "timed out: reset by peer"
    );
    // Anything else is the client's error itself.
    assert_eq!(
        said_once(&TransportError::Other(cause()), 1),
        "reset by peer"
    );
}

#[test]
fn cassette_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.jsonl");
    let e = ReplayTransport::open(&missing).unwrap_err();
    assert!(matches!(e, CassetteError::Io { .. }), "{e:?}");
    let whole = said_once(&e, 2);
    assert!(
        whole.starts_with(&format!("cassette {}: ", missing.display())),
        "{whole}"
    );

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let e = ReplayTransport::open(&bad).unwrap_err();
    assert!(matches!(e, CassetteError::Line { line: 1, .. }), "{e:?}");
    let whole = said_once(&e, 2);
    assert!(
        whole.starts_with(&format!("cassette {}, line 1: ", bad.display())),
        "{whole}"
    );
}
