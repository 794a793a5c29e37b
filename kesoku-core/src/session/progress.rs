//! [`Progress`]: where a tool's progress notes go. The tool system knows
//! only this trait; the session runtime's [`Gateway`](crate::Gateway)
//! implements it, and so can anything else that shows a note to a user.

use std::future::Future;
use std::pin::Pin;

use crate::error_source::ErrorSource;
use crate::session::message::Message;

/// The future of [`Progress::post`].
pub type ProgressFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ProgressError>> + Send + 'a>>;

/// Takes the progress notes tools post through
/// [`ToolContext::post`](crate::ToolContext::post): in an agent, the
/// session's [`Gateway`](crate::Gateway), which stores each and relays it
/// to whoever watches the session.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::{Arc, Mutex};
/// use kesoku_core::{Message, Progress, ProgressFuture, ToolContext};
///
/// #[derive(Default)]
/// struct Notes(Mutex<Vec<String>>);
///
/// impl Progress for Notes {
///     fn post(&self, message: Message) -> ProgressFuture<'_> {
///         self.0.lock().unwrap().push(message.content);
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// let notes = Arc::new(Notes::default());
/// let ctx = ToolContext::new("s").with_progress(Arc::clone(&notes));
/// ctx.post("halfway there").await.unwrap();
/// assert_eq!(*notes.0.lock().unwrap(), ["halfway there"]);
/// # });
/// ```
pub trait Progress: Send + Sync {
    /// Shows `message`, a text note of the call's session answering the
    /// message that started it, to the user.
    fn post(&self, message: Message) -> ProgressFuture<'_>;
}

impl<P: Progress + ?Sized> Progress for std::sync::Arc<P> {
    fn post(&self, message: Message) -> ProgressFuture<'_> {
        (**self).post(message)
    }
}

/// A progress note that could not be posted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the progress note was not posted")]
pub struct ProgressError(#[source] pub ErrorSource);

impl ProgressError {
    /// The note was not posted because of `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ProgressError(ErrorSource::new(error))
    }
}
