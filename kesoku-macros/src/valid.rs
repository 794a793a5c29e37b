//! Cross-checks of the doc comment against the signature and options.
//! Every problem is recorded in the [`Ctxt`], spanned where the mistake is:
//! the parameter, the doc line, or the option.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::spanned::Spanned;

use crate::ast::{Source, ToolFn};
use crate::attr::ToolOptions;
use crate::ctxt::Ctxt;
use crate::docs::{self, Docs};

/// What the checks established, ready for code generation.
pub(crate) struct Checked {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) returns: Option<String>,
    /// The doc text of each parameter, by parameter index.
    pub(crate) arg_docs: Vec<Option<String>>,
    /// `timeout = "..."` in milliseconds.
    pub(crate) timeout_ms: Option<u64>,
    /// The `kesoku::Target` variants whose refusals fail the build.
    pub(crate) targets: Vec<syn::Ident>,
}

pub(crate) fn check(cx: &Ctxt, f: &ToolFn<'_>, opts: &ToolOptions) -> Checked {
    let lines: Vec<&str> = f.docs.lines.iter().map(|l| l.text.as_str()).collect();
    let parsed = docs::parse(&lines);
    let line_span = |i: usize| {
        f.docs
            .lines
            .get(i)
            .map_or_else(|| f.ident.span(), |l| l.span)
    };

    let name = opts
        .name
        .as_ref()
        .map_or_else(|| f.ident.to_string(), syn::LitStr::value);
    let name = name.strip_prefix("r#").unwrap_or(&name).to_owned();
    if !valid_name(&name) {
        let span = opts
            .name
            .as_ref()
            .map_or_else(|| f.ident.span(), Spanned::span);
        cx.error_at(
            span,
            format!(
                "tool name `{name}` is not accepted by every provider: {}; names must match ^[A-Za-z_][A-Za-z0-9_-]{{0,63}}$",
                name_problem(&name)
            ),
        );
    }

    // `#[tool]` gives `fn f64` a companion type named `f64` (for
    // `f64::SCHEMA`), which would shadow the primitive in this module.
    let ident = unraw(f.ident);
    if PRIMITIVES.contains(&ident.as_str()) {
        cx.error_at(
            f.ident.span(),
            format!(
                "a #[tool] function cannot be named `{ident}`: its `{ident}::SCHEMA` companion would shadow the primitive type `{ident}` in this module; rename the function (and set #[tool(name = \"{ident}\")] if the model should still see that name)"
            ),
        );
    }

    let description = description(cx, f, opts, &parsed);

    for m in &parsed.malformed {
        cx.error_at(
            line_span(m.line),
            format!(
                "cannot read this `# Arguments` entry: {}; write it as `* `name` - description`",
                m.message
            ),
        );
    }

    let arg_docs = match_args(cx, f, opts, &parsed, &line_span);
    check_hints(cx, opts);
    Checked {
        name,
        description,
        returns: parsed.returns,
        arg_docs,
        timeout_ms: opts.timeout.as_ref().and_then(|lit| timeout_ms(cx, lit)),
        targets: crate::targets::resolve(cx, opts.targets.as_ref()),
    }
}

/// `read_only` with `destructive`: a tool that changes nothing destroys
/// nothing, and clients read `destructive` only when `read_only` is off.
fn check_hints(cx: &Ctxt, opts: &ToolOptions) {
    if let (Some(r), Some(d)) = (&opts.read_only, &opts.destructive)
        && **r
        && **d
    {
        cx.error_at(
            d.span(),
            "`destructive` contradicts `read_only`: a tool that changes nothing destroys nothing; drop one of them",
        );
    }
    if let Some(uses) = &opts.max_uses
        && **uses == 0
    {
        cx.error_at(
            uses.span(),
            "`max_uses = 0` allows no call at all: remove the tool from the registry instead, or allow at least 1",
        );
    }
    if let Some(calls) = &opts.max_parallel {
        if **calls == 0 {
            cx.error_at(
                calls.span(),
                "`max_parallel = 0` lets no call run: allow at least 1",
            );
        } else if opts.sequential.is_present() {
            cx.error_at(
                calls.span(),
                "`max_parallel` and `sequential` both set how calls share time: `sequential` already runs each call alone; drop one of them",
            );
        }
    }
    if let Some(t) = &opts.title
        && t.value().trim().is_empty()
    {
        cx.error_spanned_by(t, "`title` is empty: give a short human-readable name");
    }
}

fn description(cx: &Ctxt, f: &ToolFn<'_>, opts: &ToolOptions, parsed: &Docs) -> String {
    if let Some(d) = &opts.description {
        let text = d.value().trim().to_owned();
        if text.is_empty() {
            cx.error_spanned_by(d, "`description` is empty: say what the tool does");
        }
        return text;
    }
    if let Some(attr) = &f.docs.unreadable {
        cx.error_spanned_by(
            attr,
            "#[tool] cannot read this doc attribute at compile time (only string literals can be read); set #[tool(description = \"...\")] instead",
        );
        return String::new();
    }
    if parsed.description.trim().is_empty() {
        cx.error_at(
            f.ident.span(),
            format!(
                "tool `{}` has no description: add a doc comment saying what it does (the text before the first `#` heading), or #[tool(description = \"...\")]",
                f.ident
            ),
        );
    }
    parsed.description.clone()
}

/// Pairs `# Arguments` entries with parameters, both ways.
fn match_args(
    cx: &Ctxt,
    f: &ToolFn<'_>,
    opts: &ToolOptions,
    parsed: &Docs,
    line_span: &dyn Fn(usize) -> Span,
) -> Vec<Option<String>> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    // Parameters an unknown entry was probably meant for: their own
    // "undocumented" error would repeat the same mistake.
    let mut typo_targets: Vec<String> = Vec::new();
    for entry in &parsed.args {
        if seen.insert(entry.name.as_str(), entry.line).is_some() {
            cx.error_at(
                line_span(entry.line),
                format!(
                    "`{}` is documented twice under `# Arguments`; keep one entry",
                    entry.name
                ),
            );
        }
        let known = f.params.iter().any(|p| unraw(p.ident) == entry.name);
        // A rejected parameter has no name here; its own error says why.
        if !known && !f.rejected_params {
            let names: Vec<String> = f.model_params().map(|p| unraw(p.ident)).collect();
            let suggestion = suggest(&entry.name, &names);
            if let Some(m) = suggestion {
                typo_targets.push(m.to_owned());
            }
            let hint = suggestion
                .map(|m| format!("; did you mean `{m}`?"))
                .unwrap_or_default();
            cx.error_at(
                line_span(entry.line),
                format!(
                    "`# Arguments` documents `{}`, but `{}` has no such parameter{hint}",
                    entry.name, f.ident
                ),
            );
        }
        if entry.text.trim().is_empty() && known {
            cx.error_at(
                line_span(entry.line),
                format!(
                    "the `# Arguments` entry of `{}` is empty: say what the argument means",
                    entry.name
                ),
            );
        }
    }

    f.params
        .iter()
        .map(|p| {
            let key = unraw(p.ident);
            let doc = parsed.args.iter().find(|a| a.name == key).map(|a| a.text.clone());
            if doc.is_none()
                && p.source == Source::Model
                && !opts.allow_undocumented_args.is_present()
                && !typo_targets.contains(&key)
            {
                cx.error_at(
                    p.ident.span(),
                    format!(
                        "parameter `{key}` has no `# Arguments` entry: document it as `* `{key}` - what it means` (the model reads it), or set #[tool(allow_undocumented_args)]"
                    ),
                );
            }
            doc
        })
        .collect()
}

/// Reads `timeout = "30s"`; zero and unreadable durations are errors at the literal.
fn timeout_ms(cx: &Ctxt, lit: &syn::LitStr) -> Option<u64> {
    match humantime::parse_duration(&lit.value()) {
        Ok(d) if d.as_millis() == 0 => {
            cx.error_spanned_by(lit, "`timeout` must be at least 1ms");
            None
        }
        Ok(d) => Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        Err(e) => {
            cx.error_spanned_by(
                lit,
                format!("cannot read `timeout = \"{}\"`: {e}; write a duration such as \"30s\", \"500ms\" or \"2m\"", lit.value()),
            );
            None
        }
    }
}

/// The JSON key of a parameter: its name without `r#`.
pub(crate) fn unraw(ident: &syn::Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#")
        .map_or_else(|| s.clone(), ToOwned::to_owned)
}

fn suggest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::normalized_damerau_levenshtein(word, c), c.as_str()))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The primitive type names, which a tool's companion type must not shadow.
pub(crate) const PRIMITIVES: [&str; 17] = [
    "bool", "char", "str", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16",
    "u32", "u64", "u128", "usize",
];

/// Why a name fails [`valid_name`], in words.
fn name_problem(name: &str) -> String {
    let len = name.chars().count();
    if name.is_empty() {
        "it is empty".into()
    } else if len > 64 {
        format!("it is {len} characters long, and the limit is 64")
    } else if let Some(c) = name
        .chars()
        .next()
        .filter(|c| !(c.is_ascii_alphabetic() || *c == '_'))
    {
        format!("it starts with `{c}`, and names start with a letter or `_`")
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        format!("it contains `{c}`, and names use only ASCII letters, digits, `_` and `-`")
    } else {
        "it is not a valid name".into()
    }
}

/// `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("calculate_sum"));
        assert!(valid_name("_x-1"));
        assert!(valid_name(&"a".repeat(64)));
        assert!(!valid_name(&"a".repeat(65)));
        assert!(!valid_name("1abc"));
        assert!(!valid_name("has space"));
        assert!(!valid_name("dotted.name"));
        assert!(!valid_name(""));
        assert!(!valid_name("größe"));
    }

    #[test]
    fn suggestions() {
        let names = vec!["path".to_owned(), "prompt".to_owned()];
        assert_eq!(suggest("pth", &names), Some("path"));
        assert_eq!(suggest("promt", &names), Some("prompt"));
        assert_eq!(suggest("zzz", &names), None);
    }
}
