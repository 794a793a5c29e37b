//! Gemini `parameters`: the legacy OpenAPI 3.0 subset.
//!
//! References are inlined (recursion stops at a placeholder and is
//! reported), null unions become `nullable: true`, `const` a one-item
//! `enum`, `oneOf` becomes `anyOf`, tuples become arrays of a union, and
//! types are written in upper case. Keywords the subset rejects are
//! dropped, and the constraints they carried move into the description.

use serde_json::{Value, json};

use super::common::{
    Obj, Sink, append_notes, child, describe, is_null_type, lower_keyword, lower_tuple,
};
use super::report::{LoweringReport, Severity};

/// Keywords the subset takes as they are (`type` and `enum` are checked).
const ACCEPTED: &[&str] = &[
    "format",
    "description",
    "nullable",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "propertyOrdering",
];

/// Structure the subset has no equivalent for.
const REJECTED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Lowers a tool's arguments schema to Gemini's `parameters`.
pub(crate) fn lower(tool: &str, schema: &Value, report: &mut LoweringReport) -> Value {
    let mut g = Gemini {
        sink: Sink { tool, report },
        root: schema,
        inlining: Vec::new(),
    };
    let out = g.node(schema, "");
    // Reported by many users as `parameters.properties: should be non-empty
    // for OBJECT type`; the fix is to declare the function without
    // `parameters`, which a schema cannot say.
    let empty = out
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(Obj::is_empty);
    if out.get("type").is_some_and(|t| t == "OBJECT") && empty {
        g.sink.push(
            "/properties",
            "properties",
            Severity::Unsupported,
            "Gemini rejects OBJECT `parameters` without properties; declare this function without `parameters` instead",
        );
    }
    out
}

struct Gemini<'a, 'r> {
    sink: Sink<'a>,
    /// For resolving `$ref`s.
    root: &'r Value,
    /// The references being inlined, to stop at recursion.
    inlining: Vec<String>,
}

impl Gemini<'_, '_> {
    fn node(&mut self, orig: &Value, path: &str) -> Value {
        let m = match orig {
            Value::Object(m) => m,
            // `true` accepts anything, like the empty schema.
            Value::Bool(true) => return json!({}),
            other => {
                self.sink.push(
                    path,
                    "type",
                    Severity::Unsupported,
                    format!("`{other}` is not a schema Gemini's `parameters` can express"),
                );
                return other.clone();
            }
        };
        if let Some(Value::String(r)) = m.get("$ref") {
            return self.inline_ref(m, r, path);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alts)) = m.get(union)
                && alts.iter().any(is_null_type)
            {
                return self.null_union(m, union, alts, path);
            }
        }
        let (mut out, notes) = self.keywords(m, path);
        append_notes(&mut out, &notes);
        Value::Object(out)
    }

    /// `anyOf: [T, {"type": "null"}]` as `T` with `nullable: true`.
    fn null_union(&mut self, m: &Obj, union: &str, alts: &[Value], path: &str) -> Value {
        let at = child(path, union);
        let (over, notes) = self.keywords(&without(m, union), path);
        let rest: Vec<(usize, &Value)> = alts
            .iter()
            .enumerate()
            .filter(|(_, a)| !is_null_type(a))
            .collect();
        let mut out = match rest.as_slice() {
            [] => {
                self.sink.push(
                    &at,
                    union,
                    Severity::Unsupported,
                    "only null is accepted, which Gemini's `parameters` cannot express",
                );
                Obj::new()
            }
            [(i, t)] => {
                self.sink.push(
                    &at,
                    union,
                    Severity::Rewritten,
                    "the union with null became `nullable: true`",
                );
                match self.node(t, &child(&at, &i.to_string())) {
                    Value::Object(inner) => inner,
                    other => {
                        let mut wrap = Obj::new();
                        wrap.insert("anyOf".into(), json!([other]));
                        wrap
                    }
                }
            }
            many => {
                self.sink.push(
                    &at,
                    union,
                    Severity::Rewritten,
                    "the null alternative became `nullable: true`; the others stay in an `anyOf`",
                );
                let lowered = many
                    .iter()
                    .map(|(i, t)| self.node(t, &child(&at, &i.to_string())))
                    .collect();
                let mut wrap = Obj::new();
                wrap.insert("anyOf".into(), Value::Array(lowered));
                wrap
            }
        };
        out.extend(over);
        out.insert("nullable".into(), true.into());
        append_notes(&mut out, &notes);
        Value::Object(out)
    }

    /// The subset has no references: the target is copied in, and a
    /// reference back into a definition being copied becomes a placeholder.
    fn inline_ref(&mut self, m: &Obj, r: &str, path: &str) -> Value {
        let at = child(path, "$ref");
        let (over, mut notes) = self.keywords(&without(m, "$ref"), path);
        let name = r.rsplit('/').next().unwrap_or(r);
        let target = r
            .strip_prefix('#')
            .and_then(|p| self.root.pointer(p).map(|t| (p, t)));
        let mut out = match target {
            None => {
                self.sink.push(
                    &at,
                    "$ref",
                    Severity::Unsupported,
                    format!("`{r}` does not resolve inside this schema, so it cannot be inlined"),
                );
                Obj::new()
            }
            Some((_, def)) if self.inlining.iter().any(|i| i == r) => {
                self.sink.push(
                    &at,
                    "$ref",
                    Severity::Unsupported,
                    format!("`{name}` contains itself, and Gemini's `parameters` cannot express recursion; the nesting stops here at a placeholder"),
                );
                notes.push(format!(
                    "A nested `{name}`, with the same structure as the enclosing one."
                ));
                placeholder(def)
            }
            Some((def_path, def)) => {
                self.sink.push(
                    &at,
                    "$ref",
                    Severity::Rewritten,
                    format!("inlined `{r}`: Gemini's `parameters` has no references"),
                );
                self.inlining.push(r.to_owned());
                let body = self.node(def, def_path);
                self.inlining.pop();
                match body {
                    Value::Object(b) => b,
                    _ => Obj::new(),
                }
            }
        };
        out.extend(over);
        append_notes(&mut out, &notes);
        Value::Object(out)
    }

    /// `additionalProperties` (`v`) of the object `m` at `path`, which
    /// Gemini's `parameters` does not have.
    fn additional_properties(
        &mut self,
        m: &Obj,
        v: &Value,
        at: &str,
        path: &str,
        notes: &mut Vec<String>,
    ) {
        let k = "additionalProperties";
        if *v == Value::Bool(false) {
            self.sink.push(
                at,
                k,
                Severity::Lossy,
                "Gemini's `parameters` has no `additionalProperties`; the provider no longer rejects extra keys (kesoku still does)",
            );
            return;
        }
        // A map: with no listed properties left, Gemini refuses the OBJECT
        // (`properties: should be non-empty for OBJECT type`), nested as at
        // the root.
        let map = !path.is_empty()
            && m.get("properties")
                .and_then(Value::as_object)
                .is_none_or(Obj::is_empty);
        if map {
            self.sink.push(
                at,
                k,
                Severity::Unsupported,
                "a map (free-form keys) is an OBJECT without properties, which Gemini's `parameters` rejects; kept with its value schema in the description",
            );
        } else {
            self.sink.push(
                at,
                k,
                Severity::Lossy,
                "Gemini's `parameters` has no `additionalProperties`; the value schema moved to the description",
            );
        }
        notes.push(format!(
            "Keys are free-form; each value is {}.",
            describe(v)
        ));
    }

    /// Every keyword of `m`, lowered; returns the sentences to append to
    /// the description.
    fn keywords(&mut self, m: &Obj, path: &str) -> (Obj, Vec<String>) {
        let mut out = Obj::new();
        let mut notes = Vec::new();
        for (k, v) in m {
            let at = child(path, k);
            if is_silent(k, v) {
                continue;
            }
            if let Some(sentences) = moved_notes(k, v) {
                self.sink.push(
                    &at,
                    k,
                    Severity::Lossy,
                    format!("Gemini's `parameters` has no `{k}`; moved to the description"),
                );
                notes.extend(sentences);
                continue;
            }
            match k.as_str() {
                "type" => self.type_keyword(v, &at, &mut out),
                "enum" => self.enum_keyword(v, &at, &mut out),
                // The tuple's own `items` (`false`, or the rest) is folded in below.
                "items" if m.contains_key("prefixItems") => {}
                "prefixItems" => {
                    let Some((items, sentence)) = lower_tuple(m, path, &mut |c, p| self.node(c, p))
                    else {
                        continue;
                    };
                    self.sink.push(
                        &at,
                        k,
                        Severity::Lossy,
                        "Gemini's `parameters` has no tuples; now an array whose items may be any of the item schemas, with the order in the description",
                    );
                    notes.push(sentence);
                    out.insert("items".into(), items);
                }
                "oneOf" if !m.contains_key("anyOf") => {
                    self.sink.push(
                        &at,
                        k,
                        Severity::Rewritten,
                        "became `anyOf`, which Gemini's `parameters` supports instead of `oneOf`",
                    );
                    let alts = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert("anyOf".into(), alts);
                }
                "const" if v.is_string() => {
                    self.sink
                        .push(&at, k, Severity::Rewritten, "became a one-item `enum`");
                    out.insert("enum".into(), json!([v]));
                }
                "additionalProperties" => {
                    self.additional_properties(m, v, &at, path, &mut notes);
                }
                _ if REJECTED.contains(&k.as_str()) || k == "oneOf" || k == "const" => {
                    self.sink.push(
                        &at,
                        k,
                        Severity::Unsupported,
                        format!("Gemini's `parameters` cannot express this `{k}`; kept as is, so Gemini will reject the schema"),
                    );
                    let kept = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert(k.clone(), kept);
                }
                _ if ACCEPTED.contains(&k.as_str()) => {
                    let kept = lower_keyword(k, v, path, &mut |c, p| self.node(c, p));
                    out.insert(k.clone(), kept);
                }
                _ => {
                    self.sink.push(
                        &at,
                        k,
                        Severity::Lossy,
                        format!("`{k}` is outside Gemini's `parameters` subset; moved to the description"),
                    );
                    notes.push(format!("{k}: {v}."));
                }
            }
        }
        // Gemini may otherwise order the generated arguments its own way.
        if let Some(Value::Object(props)) = out.get("properties")
            && props.len() > 1
            && !out.contains_key("propertyOrdering")
        {
            let order: Vec<Value> = props.keys().map(|k| k.as_str().into()).collect();
            out.insert("propertyOrdering".into(), Value::Array(order));
        }
        (out, notes)
    }

    /// One upper-case type; a `[T, "null"]` list becomes `T` + `nullable`.
    fn type_keyword(&mut self, v: &Value, at: &str, out: &mut Obj) {
        if let Some(t) = upper(v.as_str()) {
            out.insert("type".into(), t.into());
            return;
        }
        let list = v.as_array().map(Vec::as_slice).unwrap_or_default();
        let null = list.iter().any(|t| t == "null");
        let rest: Vec<&Value> = list.iter().filter(|t| *t != "null").collect();
        if let [one] = rest.as_slice()
            && let Some(t) = upper(one.as_str())
        {
            out.insert("type".into(), t.into());
            let detail = if null {
                out.insert("nullable".into(), true.into());
                format!("the type list became `\"type\": \"{t}\"` with `nullable: true`")
            } else {
                format!("the type list became `\"type\": \"{t}\"`")
            };
            self.sink.push(at, "type", Severity::Rewritten, detail);
            return;
        }
        let why = if rest.len() > 1 {
            "Gemini's `parameters` takes a single type per schema"
        } else if *v == "null" || null {
            "a value that must be null cannot be expressed in Gemini's `parameters`"
        } else {
            "not a type Gemini's `parameters` knows"
        };
        self.sink.push(
            at,
            "type",
            Severity::Unsupported,
            format!("{why}; kept as is"),
        );
        out.insert("type".into(), v.clone());
    }

    /// String enums pass; a `null` member becomes `nullable: true`.
    fn enum_keyword(&mut self, v: &Value, at: &str, out: &mut Obj) {
        let values = v.as_array().map(Vec::as_slice).unwrap_or_default();
        let strings: Vec<&Value> = values.iter().filter(|x| x.is_string()).collect();
        let nulls = values.iter().filter(|x| x.is_null()).count();
        if strings.len() + nulls != values.len() || strings.is_empty() {
            self.sink.push(
                at,
                "enum",
                Severity::Unsupported,
                "Gemini's `parameters` accepts only string enums; kept as is",
            );
            out.insert("enum".into(), v.clone());
            return;
        }
        out.insert(
            "enum".into(),
            Value::Array(strings.into_iter().cloned().collect()),
        );
        if nulls > 0 {
            out.insert("nullable".into(), true.into());
            self.sink.push(
                at,
                "enum",
                Severity::Rewritten,
                "the `null` member became `nullable: true`",
            );
        }
    }
}

/// Keywords dropped without a word: references are inlined and their
/// definitions go with them, the rest is for humans or says nothing.
fn is_silent(k: &str, v: &Value) -> bool {
    match k {
        "$schema" | "$comment" | "$id" | "$anchor" | "$defs" | "definitions" => true,
        "uniqueItems" => *v != Value::Bool(true),
        "additionalProperties" => *v == Value::Bool(true),
        _ => false,
    }
}

/// The sentences that stand for a constraint the subset cannot carry, or
/// `None` if `k` is not such a constraint.
fn moved_notes(k: &str, v: &Value) -> Option<Vec<String>> {
    Some(match k {
        "uniqueItems" => vec!["Items must be unique.".into()],
        "exclusiveMinimum" => vec![format!("Greater than {v}.")],
        "exclusiveMaximum" => vec![format!("Less than {v}.")],
        "multipleOf" => vec![format!("A multiple of {v}.")],
        "default" => vec![format!("Default: {v}.")],
        "propertyNames" => vec![format!("Each key is {}.", describe(v))],
        "patternProperties" => v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(pattern, s)| format!("Keys matching `{pattern}` take {}.", describe(s)))
            .collect(),
        _ => return None,
    })
}

/// The subset's spelling of a JSON Schema type.
fn upper(t: Option<&str>) -> Option<&'static str> {
    Some(match t? {
        "string" => "STRING",
        "number" => "NUMBER",
        "integer" => "INTEGER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "object" => "OBJECT",
        _ => return None,
    })
}

/// What stands where a recursive definition would repeat: its type and
/// description, nothing deeper.
fn placeholder(def: &Value) -> Obj {
    let mut out = Obj::new();
    if let Some(t) = upper(def.get("type").and_then(Value::as_str)) {
        out.insert("type".into(), t.into());
    }
    if let Some(d) = def.get("description") {
        out.insert("description".into(), d.clone());
    }
    out
}

/// `m` without `key`.
fn without(m: &Obj, key: &str) -> Obj {
    m.iter()
        .filter(|(k, _)| *k != key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
#[path = "gemini_openapi_tests.rs"]
mod tests;
