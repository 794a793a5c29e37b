//! The closed subsets of JSON Schema that providers compile into a
//! grammar: OpenAI's strict mode (`"strict": true`, and `response_format`'s
//! `json_schema`) and Claude's structured outputs (`output_config.format`,
//! and strict tools). One walker, two [`Profile`]s.
//!
//! Every object is closed (`additionalProperties: false`); for OpenAI every
//! property is also listed in `required`, an optional property becoming
//! nullable (kesoku reads `null` as absent). `oneOf` becomes `anyOf`, a
//! `$ref` with sibling keywords is inlined, tuples become arrays of a
//! union, and constraints outside the subset move into the description.
//! Open maps, schemas without a type and `allOf`/`not`/`if` cannot be
//! expressed (nor, for Claude, recursion): they are kept as they are and
//! reported, never rewritten silently.

use serde_json::{Value, json};

use super::common::{
    Obj, Sink, accepts_null, append_notes, bounds_sentence, check_object_root, child, describe,
    is_object, lower_keyword, lower_tuple,
};
use super::report::{LoweringReport, Severity};

/// What one provider's closed subset takes.
pub(crate) struct Profile {
    /// The mode, as the report names it ("strict mode").
    mode: &'static str,
    /// Who rejects what cannot be expressed.
    provider: &'static str,
    /// Keywords taken as they are.
    kept: &'static [&'static str],
    /// The string formats accepted.
    formats: &'static [&'static str],
    /// Whether every property must be listed in `required`.
    require_all: bool,
    /// The largest `minItems` accepted (Claude: 1).
    max_min_items: Option<u64>,
    /// Whether a recursive schema is accepted.
    recursion: bool,
}

/// OpenAI's strict mode.
pub(crate) const OPENAI: Profile = Profile {
    mode: "strict mode",
    provider: "OpenAI",
    kept: &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ],
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    require_all: true,
    max_min_items: None,
    recursion: true,
};

/// Claude's structured outputs: no numeric or length bounds, `minItems`
/// of 0 or 1 only, no recursion; optional properties may stay optional.
pub(crate) const ANTHROPIC: Profile = Profile {
    mode: "Claude's structured output",
    provider: "Anthropic",
    kept: &[
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minItems",
    ],
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    require_all: false,
    max_min_items: Some(1),
    recursion: false,
};

/// Structure no closed subset takes and no rewrite expresses.
const REJECTED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Keywords that say what a schema accepts; a schema with none of them
/// accepts anything, which a closed subset cannot express.
const SHAPING: &[&str] = &[
    "type",
    "properties",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "enum",
    "const",
    "not",
];

/// Lowers a tool's `parameters` for OpenAI's strict mode.
pub(crate) fn lower(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    lower_with(&OPENAI, tool, schema, report)
}

/// Lowers a schema for Claude's structured outputs.
pub(crate) fn lower_anthropic(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    lower_with(&ANTHROPIC, tool, schema, report)
}

fn lower_with(
    p: &'static Profile,
    tool: &str,
    schema: &Value,
    report: &mut LoweringReport,
) -> Value {
    let mut s = Strict {
        p,
        sink: Sink { tool, report },
        root: schema,
        inlining: Vec::new(),
    };
    check_object_root(schema, &mut s.sink, "parameters");
    if !p.recursion {
        for (path, name) in recursive_defs(schema) {
            s.sink.push(
                &path,
                "$ref",
                Severity::Unsupported,
                format!(
                    "`{name}` contains itself, and {} takes no recursive schema; kept as is, so {} will reject it",
                    p.mode, p.provider
                ),
            );
        }
    }
    for union in ["anyOf", "oneOf"] {
        if schema.get(union).is_some() {
            s.sink.push(
                &child("", union),
                union,
                Severity::Unsupported,
                format!(
                    "the root of a {} schema must be a plain object, not a union",
                    p.mode
                ),
            );
        }
    }
    s.node(schema, "")
}

struct Strict<'a, 'r> {
    p: &'static Profile,
    sink: Sink<'a>,
    /// For resolving `$ref`s.
    root: &'r Value,
    /// The references being inlined, to stop at recursion.
    inlining: Vec<String>,
}

impl Strict<'_, '_> {
    fn node(&mut self, orig: &Value, path: &str) -> Value {
        let Value::Object(m) = orig else {
            return orig.clone();
        };
        if let Some(Value::String(r)) = m.get("$ref")
            && m.len() > 1
        {
            return self.inline_ref(m, r, path);
        }
        let (mut out, notes) = self.keywords(m, path);
        append_notes(&mut out, &notes);
        if is_object(m) {
            self.close_object(m, &mut out, path);
        }
        if !path.is_empty() && !SHAPING.iter().any(|k| m.contains_key(*k)) {
            self.sink.push(
                path,
                "type",
                Severity::Unsupported,
                format!(
                    "accepts any JSON value, but {} needs a `type` on every schema",
                    self.p.mode
                ),
            );
        }
        Value::Object(out)
    }

    /// Every keyword of `m`, lowered; returns the sentences to append to the
    /// description.
    fn keywords(&mut self, m: &Obj, path: &str) -> (Obj, Vec<String>) {
        let mut out = Obj::new();
        let mut notes = Vec::new();
        let mut lengths_noted = false;
        for (k, v) in m {
            let at = child(path, k);
            let mode = self.p.mode;
            let unsupported_here =
                format!("{mode} does not support `{k}`; moved to the description");
            match k.as_str() {
                // Name the dialect or comment for humans: no constraint.
                "$schema" | "$comment" => {}
                "uniqueItems" if *v != Value::Bool(true) => {}
                // The tuple's own `items` (`false`, or the rest) is folded in below.
                "items" if m.contains_key("prefixItems") => {}
                "prefixItems" => {
                    if let Some((items, sentence)) = self.tuple(m, path, &at) {
                        notes.push(sentence);
                        out.insert("items".into(), items);
                    }
                }
                "oneOf" if !m.contains_key("anyOf") => {
                    self.sink.push(
                        &at,
                        k,
                        Severity::Rewritten,
                        format!("became `anyOf`, which {mode} supports instead of `oneOf`"),
                    );
                    let alts = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert("anyOf".into(), alts);
                }
                "default" => {
                    self.lossy(&at, k, unsupported_here);
                    notes.push(format!("Default: {v}."));
                }
                "minLength" | "maxLength" => {
                    self.lossy(&at, k, unsupported_here);
                    if !lengths_noted {
                        lengths_noted = true;
                        notes.push(bounds_sentence(
                            m.get("minLength"),
                            m.get("maxLength"),
                            "character",
                        ));
                    }
                }
                "uniqueItems" => {
                    self.lossy(&at, k, unsupported_here);
                    notes.push("Items must be unique.".into());
                }
                "format" if !v.as_str().is_some_and(|f| self.p.formats.contains(&f)) => {
                    self.lossy(
                        &at,
                        k,
                        format!(
                            "{mode} supports only the formats {}; moved to the description",
                            self.p.formats.join(", ")
                        ),
                    );
                    notes.push(format!("Format: {v}."));
                }
                _ if REJECTED.contains(&k.as_str()) || k == "oneOf" => {
                    self.sink.push(
                        &at,
                        k,
                        Severity::Unsupported,
                        format!("{mode} does not support `{k}`; kept as is, so {} will reject the schema", self.p.provider),
                    );
                    let kept = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert(k.clone(), kept);
                }
                "minItems"
                    if self
                        .p
                        .max_min_items
                        .is_some_and(|max| v.as_u64().is_none_or(|n| n > max)) =>
                {
                    self.lossy(
                        &at,
                        k,
                        format!("{mode} takes `minItems` of 0 or 1 only; moved to the description"),
                    );
                    notes.push(format!("At least {v} items."));
                }
                _ if self.p.kept.contains(&k.as_str()) => {
                    let kept = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert(k.clone(), kept);
                }
                _ => {
                    self.lossy(
                        &at,
                        k,
                        format!(
                            "`{k}` is outside the subset {mode} takes; moved to the description"
                        ),
                    );
                    notes.push(format!("{k}: {v}."));
                }
            }
        }
        (out, notes)
    }

    /// A tuple (`prefixItems`) as an array of any of its item schemas, and the
    /// sentence giving their order.
    fn tuple(&mut self, m: &Obj, path: &str, at: &str) -> Option<(Value, String)> {
        let lowered = lower_tuple(m, path, &mut |c, p| self.node(c, p))?;
        let mode = self.p.mode;
        self.lossy(
            at,
            "prefixItems",
            format!(
                "{mode} does not support tuples; now an array whose items may be any of the \
                 item schemas, with the order in the description"
            ),
        );
        Some(lowered)
    }

    /// Records a keyword moved to the description.
    fn lossy(&mut self, at: &str, k: &str, message: String) {
        self.sink.push(at, k, Severity::Lossy, message);
    }

    /// Closes the object and makes every property required.
    fn close_object(&mut self, m: &Obj, out: &mut Obj, path: &str) {
        let at = child(path, "additionalProperties");
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(values) => self.sink.push(
                &at,
                "additionalProperties",
                Severity::Unsupported,
                format!(
                    "an open map (any key, each value {}) cannot be expressed in {}, where every key must be listed; kept as is",
                    describe(values),
                    self.p.mode
                ),
            ),
            None if m.contains_key("properties") => {
                out.insert("additionalProperties".into(), false.into());
                self.sink.push(
                    &at,
                    "additionalProperties",
                    Severity::Rewritten,
                    format!("added `additionalProperties: false`, which {} requires on every object", self.p.mode),
                );
            }
            None => self.sink.push(
                path,
                "additionalProperties",
                Severity::Unsupported,
                format!("an object without listed properties accepts any keys, which {} cannot express", self.p.mode),
            ),
        }
        if !self.p.require_all {
            return;
        }
        let Some(Value::Object(props)) = out.get_mut("properties") else {
            return;
        };
        let mut required: Vec<Value> = m
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let props_at = child(path, "properties");
        for (name, prop) in props.iter_mut() {
            if required.iter().any(|r| r == name.as_str()) {
                continue;
            }
            required.push(name.as_str().into());
            let detail = if accepts_null(prop) {
                format!(
                    "optional property `{name}` is now listed in `required`, as strict mode requires; it already accepts null, which means absent"
                )
            } else {
                *prop = nullable(prop.take());
                format!(
                    "optional property `{name}` is now required and accepts null, as strict mode requires; null means absent"
                )
            };
            self.sink.push(
                &child(&props_at, name),
                "required",
                Severity::Rewritten,
                detail,
            );
        }
        out.insert("required".into(), Value::Array(required));
    }

    /// OpenAI rejects keywords next to `$ref` (a property's description,
    /// typically), so the target is inlined one level and the siblings laid
    /// over it; deeper references stay references, so recursion still works.
    fn inline_ref(&mut self, m: &Obj, r: &str, path: &str) -> Value {
        let at = child(path, "$ref");
        let target = r
            .strip_prefix('#')
            .and_then(|p| self.root.pointer(p).map(|t| (p, t)));
        let siblings: Obj = m
            .iter()
            .filter(|(k, _)| *k != "$ref")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let names: Vec<&str> = siblings.keys().map(String::as_str).collect();
        let Some((def_path, def)) = target.filter(|_| !self.inlining.iter().any(|i| i == r)) else {
            self.sink.push(
                &at,
                "$ref",
                Severity::Lossy,
                format!(
                    "{} rejects keywords next to `$ref`, and `{r}` cannot be inlined here; dropped {}",
                    self.p.mode,
                    names.join(", ")
                ),
            );
            let mut plain = Obj::new();
            plain.insert("$ref".into(), r.into());
            return Value::Object(plain);
        };
        self.sink.push(
            &at,
            "$ref",
            Severity::Rewritten,
            format!(
                "inlined `{r}`: {} rejects keywords next to `$ref` (here {})",
                self.p.mode,
                names.join(", ")
            ),
        );
        self.inlining.push(r.to_owned());
        let body = self.node(def, def_path);
        let (over, notes) = self.keywords(&siblings, path);
        self.inlining.pop();
        let mut out = match body {
            Value::Object(b) => b,
            other => {
                let mut wrap = Obj::new();
                wrap.insert("anyOf".into(), json!([other]));
                wrap
            }
        };
        out.extend(over);
        append_notes(&mut out, &notes);
        Value::Object(out)
    }
}

/// The definitions (`$defs`, `definitions`) that reach themselves through
/// `$ref`s, each with its path and name.
fn recursive_defs(root: &Value) -> Vec<(String, String)> {
    fn refs<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for section in ["$defs", "definitions"] {
        let Some(Value::Object(defs)) = root.get(section) else {
            continue;
        };
        for name in defs.keys() {
            let me = format!("#/{section}/{name}");
            // Follow the references from this definition; a path back to
            // it is a cycle.
            let mut seen: Vec<&str> = Vec::new();
            let mut todo: Vec<&str> = Vec::new();
            refs(&defs[name], &mut todo);
            let mut cyclic = false;
            while let Some(r) = todo.pop() {
                if r == me {
                    cyclic = true;
                    break;
                }
                if seen.contains(&r) {
                    continue;
                }
                seen.push(r);
                if let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                    refs(target, &mut todo);
                }
            }
            if cyclic {
                found.push((child(&child("", section), name), name.clone()));
            }
        }
    }
    found
}

/// `T | null`: a type list when `T` has a plain `type`, else `anyOf`. The
/// description goes on the outside, where the model reads it first.
fn nullable(v: Value) -> Value {
    let Value::Object(mut m) = v else {
        return json!({"anyOf": [v, {"type": "null"}]});
    };
    let plain = !m.contains_key("enum") && !m.contains_key("const");
    match m.get_mut("type") {
        Some(t @ Value::String(_)) if plain => {
            *t = json!([t.take(), "null"]);
            return Value::Object(m);
        }
        Some(Value::Array(types)) if plain => {
            types.push("null".into());
            return Value::Object(m);
        }
        _ => {}
    }
    let mut outer = Obj::new();
    for k in ["title", "description"] {
        if let Some(v) = m.shift_remove(k) {
            outer.insert(k.into(), v);
        }
    }
    outer.insert("anyOf".into(), json!([m, {"type": "null"}]));
    Value::Object(outer)
}

#[cfg(test)]
#[path = "strict_tests.rs"]
mod tests;
