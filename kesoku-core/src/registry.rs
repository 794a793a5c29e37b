//! [`ToolRegistry`]: tools by name, and [`default_registry`], which holds
//! every `#[tool]` linked into the binary.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::RegistryError;
use crate::tool::{Tool, ToolDef, check_name};

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
