//! What a lowering changed, and how much meaning it cost.

use std::collections::HashSet;
use std::fmt;

/// How much a change costs.
///
/// Ordered from harmless to fatal, so `max()` over a report gives its worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Same meaning, other spelling: a null union became `nullable: true`,
    /// `oneOf` became `anyOf`, a `$ref` was inlined.
    Rewritten,
    /// A constraint the provider will not enforce. Where it helps the model,
    /// it was moved into the description; kesoku still checks it when the
    /// call arrives.
    Lossy,
    /// Cannot be represented: the provider would reject the schema or
    /// misread it. The tool should not be sent to this provider as is.
    Unsupported,
}

impl Severity {
    /// The verb used in a report line: a lossy keyword was dropped.
    fn verb(self) -> &'static str {
        match self {
            Severity::Rewritten => "rewritten",
            Severity::Lossy => "dropped",
            Severity::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Rewritten => "rewritten",
            Severity::Lossy => "lossy",
            Severity::Unsupported => "unsupported",
        })
    }
}

/// Whose schema a [`ReportEntry`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Subject {
    /// A tool's input schema; the entry's `tool` is the tool's name.
    #[default]
    Tool,
    /// A typed answer's schema ([`OutputSchema`](crate::OutputSchema));
    /// the entry's `tool` is the answer type's name.
    Answer,
}

/// One change made (or refused) while lowering a tool's schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ReportEntry {
    /// The tool whose schema it is, or the answer type's (see `subject`).
    pub tool: String,
    /// Whether the schema is a tool's or a typed answer's.
    pub subject: Subject,
    /// A JSON pointer into the *original* schema, down to the keyword, such
    /// as `/properties/tags/uniqueItems`. Empty for the root itself.
    pub path: String,
    /// The JSON Schema keyword concerned.
    pub keyword: String,
    /// How much the change costs.
    pub severity: Severity,
    /// What was done and why, for a human.
    pub detail: String,
}

impl fmt::Display for ReportEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.path.is_empty() {
            "the root"
        } else {
            &self.path
        };
        let subject = match self.subject {
            Subject::Tool => "tool",
            Subject::Answer => "answer",
        };
        write!(
            f,
            "{subject} `{}` at {at}: keyword `{}` {}: {}",
            self.tool,
            self.keyword,
            self.severity.verb(),
            self.detail
        )
    }
}

/// Everything a lowering (or a [`lint`](crate::ToolRegistry::lint) over
/// many tools) changed, in walk order.
///
/// ```
/// use kesoku_core::lowering::{Dialect, lower};
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
/// let lowered = lower(Dialect::Anthropic, "noop", &schema);
/// assert!(lowered.report.is_empty());
/// assert_eq!(lowered.report.to_string(), "no changes");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoweringReport {
    /// The entries, in the order the schema was walked.
    pub entries: Vec<ReportEntry>,
}

impl LoweringReport {
    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry.
    pub fn iter(&self) -> std::slice::Iter<'_, ReportEntry> {
        self.entries.iter()
    }

    /// Whether some part cannot be represented for this provider.
    pub fn has_unsupported(&self) -> bool {
        self.unsupported().next().is_some()
    }

    /// Whether every change kept the meaning: no [`Severity::Lossy`] and no
    /// [`Severity::Unsupported`] entry.
    pub fn is_lossless(&self) -> bool {
        self.entries
            .iter()
            .all(|e| e.severity == Severity::Rewritten)
    }

    /// The [`Severity::Unsupported`] entries.
    pub fn unsupported(&self) -> impl Iterator<Item = &ReportEntry> {
        self.of(Severity::Unsupported)
    }

    /// The [`Severity::Lossy`] entries.
    pub fn lossy(&self) -> impl Iterator<Item = &ReportEntry> {
        self.of(Severity::Lossy)
    }

    /// The entries about `tool`.
    pub fn for_tool<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a ReportEntry> {
        self.entries.iter().filter(move |e| e.tool == tool)
    }

    /// Appends `other`'s entries after this report's.
    pub fn merge(&mut self, other: LoweringReport) {
        self.entries.extend(other.entries);
    }

    fn of(&self, severity: Severity) -> impl Iterator<Item = &ReportEntry> {
        self.entries.iter().filter(move |e| e.severity == severity)
    }

    /// Records one entry.
    pub(crate) fn push(
        &mut self,
        tool: &str,
        path: &str,
        keyword: &str,
        severity: Severity,
        detail: impl Into<String>,
    ) {
        self.entries.push(ReportEntry {
            tool: tool.into(),
            subject: Subject::Tool,
            path: path.into(),
            keyword: keyword.into(),
            severity,
            detail: detail.into(),
        });
    }

    /// Drops repeated entries, keeping the first. Inlining one definition at
    /// several places reports the same original location each time.
    pub(crate) fn dedup(&mut self) {
        let mut seen = HashSet::new();
        self.entries.retain(|e| seen.insert(e.clone()));
    }
}

impl<'a> IntoIterator for &'a LoweringReport {
    type Item = &'a ReportEntry;
    type IntoIter = std::slice::Iter<'a, ReportEntry>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for LoweringReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("no changes");
        }
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(severity: Severity, path: &str) -> ReportEntry {
        ReportEntry {
            tool: "t".into(),
            subject: Subject::Tool,
            path: path.into(),
            keyword: "k".into(),
            severity,
            detail: "why".into(),
        }
    }

    #[test]
    fn queries_and_display() {
        let mut r = LoweringReport::default();
        assert!(r.is_lossless() && !r.has_unsupported());
        assert_eq!(r.to_string(), "no changes");
        r.entries.push(entry(Severity::Rewritten, "/a/k"));
        assert!(r.is_lossless());
        let mut other = LoweringReport::default();
        other.entries.push(entry(Severity::Lossy, "/b/k"));
        other.entries.push(entry(Severity::Unsupported, ""));
        r.merge(other);
        assert!(!r.is_lossless() && r.has_unsupported());
        assert_eq!(r.lossy().count(), 1);
        assert_eq!(r.unsupported().count(), 1);
        assert_eq!(
            r.to_string(),
            "tool `t` at /a/k: keyword `k` rewritten: why\n\
             tool `t` at /b/k: keyword `k` dropped: why\n\
             tool `t` at the root: keyword `k` unsupported: why"
        );
        assert_eq!(
            r.iter().map(|e| e.severity).max(),
            Some(Severity::Unsupported)
        );
    }

    #[test]
    fn dedup_keeps_first() {
        let mut r = LoweringReport::default();
        r.entries.push(entry(Severity::Lossy, "/a"));
        r.entries.push(entry(Severity::Rewritten, "/b"));
        r.entries.push(entry(Severity::Lossy, "/a"));
        r.dedup();
        assert_eq!(r.len(), 2);
        assert_eq!(r.entries[1].path, "/b");
    }
}
