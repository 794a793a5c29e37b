//! [`ToolRegistry`]: tools by name, and [`default_registry`], which holds
//! every `#[tool]` linked into the binary.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use tokio::sync::watch;

use crate::tool::def::{Tool, ToolDef, check_name};
use crate::tool::error::RegistryError;

/// How `#[tool]` submits its definition to the global registry.
#[doc(hidden)]
pub struct ToolEntry(pub &'static ToolDef);

inventory::collect!(ToolEntry);

/// Tools by name.
///
/// Either the global one, [`default_registry`], or an explicit one built
/// with [`ToolRegistry::new`] and [`register`](ToolRegistry::register), which
/// takes `#[tool]` handles (`my_tool::TOOL`) and [`DynamicTool`](crate::DynamicTool)s.
///
/// ```
/// use kesoku_core::{DynamicTool, ToolRegistry, ToolOutput};
///
/// let mut registry = ToolRegistry::new();
/// let noop = DynamicTool::new("noop", "Does nothing.", serde_json::json!({"type": "object"}),
///     |_, _| async { Ok(ToolOutput::new(serde_json::Value::Null)) }).unwrap();
/// registry.register(noop).unwrap();
/// assert_eq!(registry.get("noop").unwrap().description(), "Does nothing.");
/// assert!(registry.get("missing").is_none());
/// ```
#[derive(Debug, Default, Clone)]
pub struct ToolRegistry {
    /// Sorted by name, so iteration order is stable.
    tools: Vec<Tool>,
    /// For lookups on the per-call path. `Tool` is a two-word handle (a
    /// `&'static` or an `Arc`), so keeping it twice costs little and keeps
    /// `register` O(n).
    by_name: HashMap<Box<str>, Tool>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every `#[tool]` linked into the binary, or the first name clash.
    pub fn from_inventory() -> Result<Self, RegistryError> {
        let mut tools: Vec<Tool> = inventory::iter::<ToolEntry>
            .into_iter()
            .map(|e| Tool::from(e.0))
            .collect();
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        for pair in tools.windows(2) {
            if let [a, b] = pair
                && a.name() == b.name()
            {
                return Err(duplicate(a, b));
            }
        }
        let by_name = index(&tools);
        Ok(ToolRegistry { tools, by_name })
    }

    /// Adds a tool: a `#[tool]` handle (`my_tool::TOOL`) or a
    /// [`DynamicTool`](crate::DynamicTool). A name already taken is an error
    /// naming both definitions; nothing is overwritten.
    pub fn register(&mut self, tool: impl Into<Tool>) -> Result<&Tool, RegistryError> {
        let tool = tool.into();
        check_name(tool.name())?;
        let pos = match self.tools.binary_search_by(|t| t.name().cmp(tool.name())) {
            Ok(i) => return Err(duplicate(&self.tools[i], &tool)),
            Err(pos) => pos,
        };
        self.by_name.insert(tool.name().into(), tool.clone());
        self.tools.insert(pos, tool);
        Ok(&self.tools[pos])
    }

    /// Takes out the tool called `name`, if there is one.
    pub fn remove(&mut self, name: &str) -> Option<Tool> {
        let i = self.tools.binary_search_by(|t| t.name().cmp(name)).ok()?;
        self.by_name.remove(name);
        Some(self.tools.remove(i))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name)
    }

    /// Every tool, by name.
    pub fn iter(&self) -> std::slice::Iter<'_, Tool> {
        self.tools.iter()
    }

    /// The tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(Tool::name)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl<'a> IntoIterator for &'a ToolRegistry {
    type Item = &'a Tool;
    type IntoIter = std::slice::Iter<'a, Tool>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

fn index(tools: &[Tool]) -> HashMap<Box<str>, Tool> {
    tools.iter().map(|t| (t.name().into(), t.clone())).collect()
}

fn duplicate(first: &Tool, second: &Tool) -> RegistryError {
    RegistryError::Duplicate {
        name: first.name().into(),
        first: first.location().copied(),
        second: second.location().copied(),
    }
}

/// A registry whose tools can change while it is in use: tools imported
/// from an MCP server that says its list changed, plugins loaded at run
/// time. Readers take a [`snapshot`](Self::snapshot), which never changes
/// under them; [`update`](Self::update) publishes a new one.
///
/// Cheap to clone: clones share the registry.
///
/// ```
/// use kesoku_core::{DynamicTool, LiveRegistry, ToolOutput, ToolRegistry};
///
/// let live = LiveRegistry::new(ToolRegistry::new());
/// let before = live.snapshot();
/// live.update(|r| {
///     let noop = DynamicTool::new("noop", "Does nothing.", serde_json::json!({"type": "object"}),
///         |_, _| async { Ok(ToolOutput::new(serde_json::Value::Null)) }).unwrap();
///     r.register(noop).map(drop)
/// }).unwrap();
/// assert!(before.get("noop").is_none());
/// assert!(live.snapshot().get("noop").is_some());
/// assert_eq!(live.version(), 1);
/// ```
#[derive(Clone)]
pub struct LiveRegistry {
    current: Arc<RwLock<Arc<ToolRegistry>>>,
    version: Arc<watch::Sender<u64>>,
}

impl LiveRegistry {
    /// Starts from `registry`, at version 0.
    pub fn new(registry: ToolRegistry) -> Self {
        LiveRegistry {
            current: Arc::new(RwLock::new(Arc::new(registry))),
            version: Arc::new(watch::Sender::new(0)),
        }
    }

    /// The tools now.
    pub fn snapshot(&self) -> Arc<ToolRegistry> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// How many updates have been published.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// Changes the tools: `f` edits a copy, which is published as the new
    /// snapshot (with a new version) when `f` returns `Ok`; on `Err`
    /// nothing changes. Updates are serialized.
    pub fn update<T, E>(&self, f: impl FnOnce(&mut ToolRegistry) -> Result<T, E>) -> Result<T, E> {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = ToolRegistry::clone(&current);
        let out = f(&mut next)?;
        *current = Arc::new(next);
        drop(current);
        self.version.send_modify(|v| *v += 1);
        Ok(out)
    }

    /// A receiver that sees each new version.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// A handle that does not keep the registry alive, for a task that
    /// updates it only while someone uses it.
    pub fn downgrade(&self) -> WeakLiveRegistry {
        WeakLiveRegistry {
            current: Arc::downgrade(&self.current),
            version: Arc::downgrade(&self.version),
        }
    }
}

/// A [`LiveRegistry`] that may be gone: see [`LiveRegistry::downgrade`].
#[derive(Clone, Debug)]
pub struct WeakLiveRegistry {
    current: std::sync::Weak<RwLock<Arc<ToolRegistry>>>,
    version: std::sync::Weak<watch::Sender<u64>>,
}

impl WeakLiveRegistry {
    /// The registry, if anyone still holds it.
    pub fn upgrade(&self) -> Option<LiveRegistry> {
        Some(LiveRegistry {
            current: self.current.upgrade()?,
            version: self.version.upgrade()?,
        })
    }
}

impl fmt::Debug for LiveRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveRegistry")
            .field("version", &self.version())
            .field("tools", &self.snapshot().len())
            .finish()
    }
}

static DEFAULT: OnceLock<Result<ToolRegistry, RegistryError>> = OnceLock::new();

/// The registry of every `#[tool]` linked into the binary, collected on
/// first access and shared after that.
///
/// # Panics
///
/// If two `#[tool]`s share a name, with a message naming both definitions
/// by file and line. A tool set is fixed at link time, so a clash is a
/// programming error that should stop the program at start-up, not a
/// condition to handle; use [`try_default_registry`] to handle it anyway.
///
/// ```
/// let registry = kesoku_core::default_registry();
/// for tool in registry {
///     println!("{}: {}", tool.name(), tool.description());
/// }
/// ```
pub fn default_registry() -> &'static ToolRegistry {
    match try_default_registry() {
        Ok(r) => r,
        Err(e) => panic!("kesoku: {e}"),
    }
}

/// Like [`default_registry`], returning a name clash instead of panicking.
pub fn try_default_registry() -> Result<&'static ToolRegistry, &'static RegistryError> {
    DEFAULT.get_or_init(ToolRegistry::from_inventory).as_ref()
}
