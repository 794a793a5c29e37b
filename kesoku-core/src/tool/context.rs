//! [`ToolContext`]: what the runner hands every tool call besides its
//! arguments, and [`FromToolContext`], the trait behind injected parameters.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::session::message::{Message, MessageType, Role, Status};
use crate::session::progress::{Progress, ProgressError};

/// The call's surroundings: which session, which user message started it,
/// the session's workspace, where progress notes go ([`Progress`]), a cancellation
/// token, and typed state inserted at setup.
///
/// Cloning is cheap (one `Arc`). A `#[tool]` parameter of type `ToolContext`
/// or `&ToolContext` receives it and is never shown to the model.
///
/// ```
/// use kesoku_core::ToolContext;
///
/// struct Db(&'static str);
/// let ctx = ToolContext::new("session-1")
///     .with_original_msg_id("msg-9")
///     .with_state(Db("sqlite://memory"));
/// assert_eq!(ctx.session_id(), "session-1");
/// assert_eq!(ctx.state::<Db>().unwrap().0, "sqlite://memory");
/// ```
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<Inner>,
    /// The id of the `tool_call` message being answered: set per call,
    /// only for the tools that ask for it
    /// ([`DynamicTool::needs_tool_call_id`](crate::DynamicTool::needs_tool_call_id)),
    /// so other calls share the one context untouched.
    tool_call: Option<Arc<str>>,
}

#[derive(Clone, Default)]
struct Inner {
    session_id: String,
    original_msg_id: Option<String>,
    workspace: Option<PathBuf>,
    progress: Option<Arc<dyn Progress>>,
    cancel: CancellationToken,
    state: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl ToolContext {
    /// A context for `session_id`, with nothing else set.
    pub fn new(session_id: impl Into<String>) -> Self {
        ToolContext {
            inner: Arc::new(Inner {
                session_id: session_id.into(),
                ..Inner::default()
            }),
            tool_call: None,
        }
    }

    /// Sets the id of the user message that led to this call.
    #[must_use]
    pub fn with_original_msg_id(mut self, id: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.inner).original_msg_id = Some(id.into());
        self
    }

    /// Sets the session's workspace directory.
    #[must_use]
    pub fn with_workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        Arc::make_mut(&mut self.inner).workspace = Some(dir.into());
        self
    }

    /// Sets where tools' progress notes go: in an agent, the session's
    /// [`Gateway`](crate::Gateway).
    #[must_use]
    pub fn with_progress(mut self, progress: impl Progress + 'static) -> Self {
        Arc::make_mut(&mut self.inner).progress = Some(Arc::new(progress));
        self
    }

    /// Uses `token` for cancellation: cancelling it stops the async tools
    /// of this context that are waiting.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        Arc::make_mut(&mut self.inner).cancel = token;
        self
    }

    /// Inserts typed state, read by [`State<T>`] parameters. A second value
    /// of the same type replaces the first.
    #[must_use]
    pub fn with_state<T: Send + Sync + 'static>(self, value: T) -> Self {
        self.with_state_arc(Arc::new(value))
    }

    /// Like [`with_state`](Self::with_state), sharing an existing `Arc`.
    #[must_use]
    pub fn with_state_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        Arc::make_mut(&mut self.inner)
            .state
            .insert(TypeId::of::<T>(), value);
        self
    }

    /// Sets the id of the `tool_call` message this call answers (its
    /// result's `parent_id`). The runner sets it for the tools that ask
    /// for it ([`DynamicTool::needs_tool_call_id`](crate::DynamicTool::needs_tool_call_id)).
    ///
    /// ```
    /// use kesoku_core::ToolContext;
    ///
    /// let ctx = ToolContext::new("s").with_tool_call_id("call-message-1");
    /// assert_eq!(ctx.tool_call_id(), Some("call-message-1"));
    /// assert_eq!(ToolContext::new("s").tool_call_id(), None);
    /// ```
    #[must_use]
    pub fn with_tool_call_id(mut self, id: &str) -> Self {
        self.tool_call = Some(Arc::from(id));
        self
    }

    /// The id of the `tool_call` message this call answers, when set: a
    /// name for the call that stays the same when a resumed turn runs it
    /// again.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call.as_deref()
    }

    /// The session this call belongs to.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The user message that led to this call, if known.
    pub fn original_msg_id(&self) -> Option<&str> {
        self.inner.original_msg_id.as_deref()
    }

    /// The session's workspace directory, if set.
    pub fn workspace(&self) -> Option<&Path> {
        self.inner.workspace.as_deref()
    }

    /// Posts a progress note to the user (see [`with_progress`](Self::with_progress)),
    /// as a text message of this session answering the original message.
    /// With nowhere set this is a no-op, so tools need not care whether
    /// one is.
    ///
    /// # Errors
    /// When the note could not be posted (the store failed, say).
    pub async fn post(&self, text: impl Into<String>) -> Result<(), ProgressError> {
        let Some(progress) = &self.inner.progress else {
            return Ok(());
        };
        let mut message = Message::new(
            self.inner.session_id.clone(),
            Role::Assistant,
            MessageType::Text,
            text,
        )
        .with_status(Status::Pending);
        message.parent_id.clone_from(&self.inner.original_msg_id);
        message.metadata.insert("progress".into(), true.into());
        progress.post(message).await
    }

    /// The token whose cancellation stops this context's waiting tools.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Whether this context was cancelled; long sync tools may poll it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// The state of type `T`, if it was inserted.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let any = self.inner.state.get(&TypeId::of::<T>())?.clone();
        any.downcast::<T>().ok()
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.inner.session_id)
            .field("original_msg_id", &self.inner.original_msg_id)
            .field("workspace", &self.inner.workspace)
            .field("progress", &self.inner.progress.is_some())
            .field("cancelled", &self.inner.cancel.is_cancelled())
            .field("state_types", &self.inner.state.len())
            .field("tool_call_id", &self.tool_call)
            .finish()
    }
}

/// Why an injected parameter could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot inject `{type_name}`: {reason}")]
pub struct InjectError {
    /// The parameter's type.
    pub type_name: &'static str,
    /// What is missing.
    pub reason: String,
}

/// A type that a tool parameter receives from the [`ToolContext`] instead of
/// from the model's arguments, as axum's extractors do for requests.
///
/// `ToolContext` and [`State<T>`] implement it and are injected
/// automatically; mark a parameter of your own implementing type with
/// `#[inject]`.
///
/// ```
/// use kesoku_core::{FromToolContext, InjectError, ToolContext};
///
/// struct SessionId(String);
/// impl FromToolContext for SessionId {
///     fn from_tool_context(ctx: &ToolContext) -> Result<Self, InjectError> {
///         Ok(SessionId(ctx.session_id().to_owned()))
///     }
/// }
/// assert_eq!(SessionId::from_tool_context(&ToolContext::new("s")).unwrap().0, "s");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be injected into a tool",
    label = "this type does not implement `kesoku::FromToolContext`",
    note = "injected parameters are `ToolContext`, `&ToolContext`, `State<T>`, or `#[inject]` types implementing `kesoku::FromToolContext`"
)]
pub trait FromToolContext: Sized {
    /// Produces the value from the call's context.
    fn from_tool_context(ctx: &ToolContext) -> Result<Self, InjectError>;
}

impl FromToolContext for ToolContext {
    fn from_tool_context(ctx: &ToolContext) -> Result<Self, InjectError> {
        Ok(ctx.clone())
    }
}

/// Typed state inserted with [`ToolContext::with_state`], injected into a
/// tool parameter. A call whose context lacks it fails with an error naming
/// the type.
///
/// ```
/// use kesoku_core::{FromToolContext, State, ToolContext};
///
/// let ctx = ToolContext::new("s").with_state(41_u32);
/// let State(n) = State::<u32>::from_tool_context(&ctx).unwrap();
/// assert_eq!(*n + 1, 42);
/// let err = State::<String>::from_tool_context(&ctx).unwrap_err();
/// assert!(err.to_string().contains("alloc::string::String"));
/// ```
#[derive(Debug)]
pub struct State<T>(pub Arc<T>);

impl<T> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> FromToolContext for State<T> {
    fn from_tool_context(ctx: &ToolContext) -> Result<Self, InjectError> {
        ctx.state::<T>().map(State).ok_or_else(|| InjectError {
            type_name: type_name::<State<T>>(),
            reason: format!(
                "no state of type `{}` was inserted into the context (use `ToolContext::with_state`)",
                type_name::<T>()
            ),
        })
    }
}
