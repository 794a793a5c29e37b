//! [`Gateway`]: how a running tool talks to the user (progress notes,
//! partial results) before its result is ready.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

use crate::future::BoxFuture;
use crate::message::Message;

/// Why a gateway could not deliver a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the gateway could not deliver the message: {0}")]
pub struct GatewayError(pub String);

/// Delivers messages to the session's user: a chat connector, a websocket,
/// a database outbox. Tools reach it through [`ToolContext::post`](crate::ToolContext::post).
///
/// A trait object, so any transport plugs in; `post` returns a boxed
/// future to stay object-safe.
pub trait Gateway: Send + Sync + 'static {
    /// Sends `message` to the user.
    fn post(&self, message: Message) -> BoxFuture<Result<(), GatewayError>>;
}

/// A gateway that keeps every message in memory and broadcasts it to
/// subscribers: for tests, demos and single-process apps.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use kesoku_core::{InMemoryGateway, ToolContext};
///
/// let gateway = Arc::new(InMemoryGateway::new());
/// let mut inbox = gateway.subscribe();
/// let ctx = ToolContext::new("s").with_gateway(gateway.clone());
/// ctx.post("halfway there").await.unwrap();
/// assert_eq!(gateway.messages()[0].content, "halfway there");
/// assert_eq!(inbox.recv().await.unwrap().session_id, "s");
/// # });
/// ```
#[derive(Debug)]
pub struct InMemoryGateway {
    messages: Mutex<Vec<Message>>,
    sender: broadcast::Sender<Message>,
}

impl Default for InMemoryGateway {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryGateway {
    /// An empty gateway.
    pub fn new() -> Self {
        InMemoryGateway {
            messages: Mutex::new(Vec::new()),
            sender: broadcast::channel(1024).0,
        }
    }

    /// Every message posted so far, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A receiver of the messages posted from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Message> {
        self.sender.subscribe()
    }
}

impl Gateway for InMemoryGateway {
    fn post(&self, message: Message) -> BoxFuture<Result<(), GatewayError>> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message.clone());
        // No subscriber is fine: the message is kept either way.
        let _ = self.sender.send(message);
        Box::pin(async { Ok(()) })
    }
}

impl<G: Gateway + ?Sized> Gateway for Arc<G> {
    fn post(&self, message: Message) -> BoxFuture<Result<(), GatewayError>> {
        (**self).post(message)
    }
}
