//! [`ToolHints`]: what a tool says about its effects (MCP's tool
//! annotations), set by `#[tool(read_only, destructive, idempotent,
//! open_world)]`.

/// What a tool says about its effects, for clients that ask before they
/// call (MCP's tool annotations). `None` is "not said"; clients then assume
/// the worst (not read-only, destructive, not idempotent, open world).
///
/// ```
/// use kesoku_core::ToolHints;
///
/// let hints = ToolHints::new().with_read_only(true);
/// assert_eq!(hints.read_only, Some(true));
/// assert!(hints.destructive.is_none());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ToolHints {
    /// The tool changes nothing in its environment.
    pub read_only: Option<bool>,
    /// A change it makes may destroy something (meaningful when not read-only).
    pub destructive: Option<bool>,
    /// Calling it twice with the same arguments does nothing more.
    pub idempotent: Option<bool>,
    /// It reaches outside a closed set of things (the web, say).
    pub open_world: Option<bool>,
}

impl ToolHints {
    /// Nothing said.
    pub const fn new() -> Self {
        ToolHints {
            read_only: None,
            destructive: None,
            idempotent: None,
            open_world: None,
        }
    }

    /// Says whether the tool changes nothing.
    #[must_use]
    pub const fn with_read_only(mut self, yes: bool) -> Self {
        self.read_only = Some(yes);
        self
    }

    /// Says whether a change it makes may destroy something.
    #[must_use]
    pub const fn with_destructive(mut self, yes: bool) -> Self {
        self.destructive = Some(yes);
        self
    }

    /// Says whether repeating a call does nothing more.
    #[must_use]
    pub const fn with_idempotent(mut self, yes: bool) -> Self {
        self.idempotent = Some(yes);
        self
    }

    /// Says whether the tool reaches an open world.
    #[must_use]
    pub const fn with_open_world(mut self, yes: bool) -> Self {
        self.open_world = Some(yes);
        self
    }

    /// Whether nothing is said.
    pub fn is_empty(&self) -> bool {
        *self == Self::new()
    }
}
