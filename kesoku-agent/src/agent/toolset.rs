//! [`Toolset`]: an agent's tools, fixed or live. A live registry is read
//! as each turn starts, and its declarations made again only when it
//! changed.

use std::sync::{Arc, Mutex, PoisonError};

use kesoku_core::{LiveRegistry, RegistryRef, Tool, ToolRegistry};

use kesoku_llm::ToolDeclaration;

/// The tools, and their declarations as the model sees them.
pub(crate) enum Toolset {
    Fixed {
        registry: RegistryRef,
        declarations: Arc<Vec<ToolDeclaration>>,
    },
    Live {
        live: LiveRegistry,
        /// The version last read, with what it gave.
        seen: Mutex<(u64, RegistryRef, Arc<Vec<ToolDeclaration>>)>,
    },
}

impl Toolset {
    pub(crate) fn fixed(registry: RegistryRef) -> Self {
        let declarations = Arc::new(ToolDeclaration::all(&registry));
        Toolset::Fixed {
            registry,
            declarations,
        }
    }

    pub(crate) fn live(live: LiveRegistry) -> Self {
        let (version, registry, declarations) = read(&live);
        Toolset::Live {
            live,
            seen: Mutex::new((version, registry, declarations)),
        }
    }

    /// The tools for a turn starting now.
    pub(crate) fn current(&self) -> (RegistryRef, Arc<Vec<ToolDeclaration>>) {
        match self {
            Toolset::Fixed {
                registry,
                declarations,
            } => (registry.clone(), Arc::clone(declarations)),
            Toolset::Live { live, seen } => {
                {
                    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                    if seen.0 == live.version() {
                        return (seen.1.clone(), Arc::clone(&seen.2));
                    }
                }
                // Lowered outside the lock, so turns starting at once do
                // not wait on each other; the newest reading is kept.
                let fresh = read(live);
                let out = (fresh.1.clone(), Arc::clone(&fresh.2));
                let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                if fresh.0 >= seen.0 {
                    *seen = fresh;
                }
                out
            }
        }
    }

    /// These tools and `extra` (agents offered as tools), in one fixed
    /// registry; an error names what cannot be added (a name taken).
    pub(crate) fn with(self, extra: Vec<Tool>) -> Result<Self, String> {
        if extra.is_empty() {
            return Ok(self);
        }
        let Toolset::Fixed { registry, .. } = self else {
            return Err("sub-agents are offered with a fixed registry (`registry`), not a live one; register the agent's tool (`AgentTool::into_tool`) in the live registry instead".into());
        };
        let mut all = ToolRegistry::new();
        for tool in registry.iter().cloned().chain(extra) {
            all.register(tool).map_err(|e| e.to_string())?;
        }
        Ok(Toolset::fixed(RegistryRef::from(all)))
    }

    /// How many tools there are now.
    pub(crate) fn len(&self) -> usize {
        self.current().1.len()
    }
}

/// The version first: the snapshot after it is at least that new, so a
/// change between the two is read again next time, never missed.
fn read(live: &LiveRegistry) -> (u64, RegistryRef, Arc<Vec<ToolDeclaration>>) {
    let version = live.version();
    let registry = RegistryRef::from(live.snapshot());
    let declarations = Arc::new(ToolDeclaration::all(&registry));
    (version, registry, declarations)
}
