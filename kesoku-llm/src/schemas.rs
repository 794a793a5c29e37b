//! Tool schemas lowered for a provider, once per declaration set.
//!
//! An agent sends the same tools on every call, so lowering them on every
//! request would redo the same work and, worse, repeat its findings. Each
//! backend keeps a small [`SchemaCache`]: a set of declarations is lowered
//! the first time it is seen, its `Lossy` and `Unsupported` findings are
//! logged then (once), and later requests reuse the result.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use kesoku_core::lowering::{Dialect, LoweringReport, Severity, ToolNames, lower};
use serde_json::Value;

use crate::declaration::ToolDeclaration;

/// How many declaration sets a backend remembers. An agent uses one or a
/// few; the bound keeps a caller that builds a new set per call from
/// growing the cache without end (the oldest set is forgotten first).
const CAPACITY: usize = 16;

/// A declaration set lowered for one provider.
#[derive(Debug)]
pub(crate) struct LoweredTools {
    /// How tool names are mapped for the provider.
    pub(crate) names: ToolNames,
    /// Each tool's lowered schema, in declaration order; `None` where the
    /// wire format sends no schema for that tool.
    pub(crate) schemas: Vec<Option<Value>>,
    /// What the lowering changed, tool by tool.
    pub(crate) report: Arc<LoweringReport>,
}

/// What a set of declarations is recognised by: its dialect, and each
/// tool's name and parameters (descriptions do not change the lowering).
#[derive(Debug)]
struct Entry {
    dialect: Dialect,
    tools: Vec<(String, Value)>,
    lowered: Arc<LoweredTools>,
}

impl Entry {
    fn matches(&self, dialect: Dialect, tools: &[ToolDeclaration]) -> bool {
        self.dialect == dialect
            && self.tools.len() == tools.len()
            && self
                .tools
                .iter()
                .zip(tools)
                .all(|((name, params), t)| *name == t.name && *params == t.parameters)
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: VecDeque<Entry>,
}

/// The declaration sets a backend has lowered.
#[derive(Debug, Default)]
pub(crate) struct SchemaCache {
    inner: Mutex<Inner>,
}

impl SchemaCache {
    /// `tools` lowered to `dialect`, with names mapped for `names`; lowered
    /// and logged now if this set was not seen before. `sends_schema` says
    /// which tools the wire format declares with a schema.
    pub(crate) fn get(
        &self,
        provider: &'static str,
        names: Dialect,
        dialect: Dialect,
        tools: &[ToolDeclaration],
        sends_schema: impl Fn(&ToolDeclaration) -> bool,
    ) -> Arc<LoweredTools> {
        // Lowering under the lock costs microseconds once per set, and
        // makes "logged once" hold when two calls race on a new set.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = inner.entries.iter().find(|e| e.matches(dialect, tools)) {
            return Arc::clone(&e.lowered);
        }
        let mut report = LoweringReport::default();
        let schemas = tools
            .iter()
            .map(|t| {
                sends_schema(t).then(|| {
                    let lowered = lower(dialect, &t.name, &t.parameters);
                    report.merge(lowered.report);
                    lowered.schema
                })
            })
            .collect();
        for e in report.iter().filter(|e| e.severity >= Severity::Lossy) {
            tracing::warn!(
                provider,
                tool = %e.tool,
                path = %e.path,
                severity = %e.severity,
                "{provider} tool schema lowered to {dialect}: {e}"
            );
        }
        let lowered = Arc::new(LoweredTools {
            names: ToolNames::new(names, tools.iter().map(|t| t.name.as_str())),
            schemas,
            report: Arc::new(report),
        });
        if inner.entries.len() == CAPACITY {
            inner.entries.pop_front();
        }
        inner.entries.push_back(Entry {
            dialect,
            tools: tools
                .iter()
                .map(|t| (t.name.clone(), t.parameters.clone()))
                .collect(),
            lowered: Arc::clone(&lowered),
        });
        lowered
    }
}
