//! Helpers the dialects share: JSON pointers, the subschema walk, short
//! human descriptions of schemas, and description notes.

use serde_json::{Map, Value};

use super::report::{LoweringReport, Severity};

/// A JSON object, as schemas are.
pub(crate) type Obj = Map<String, Value>;

/// Collects report entries for one tool.
pub(crate) struct Sink<'a> {
    pub(crate) tool: &'a str,
    pub(crate) report: &'a mut LoweringReport,
}

impl Sink<'_> {
    pub(crate) fn push(
        &mut self,
        path: &str,
        keyword: &str,
        severity: Severity,
        detail: impl Into<String>,
    ) {
        self.report.push(self.tool, path, keyword, severity, detail);
    }
}

/// `path` extended by one reference token, escaped per RFC 6901.
pub(crate) fn child(path: &str, key: &str) -> String {
    let mut out = String::with_capacity(path.len() + key.len() + 1);
    out.push_str(path);
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// How a keyword holds subschemas.
enum Holds {
    /// One schema (`items`, `not`, …).
    One,
    /// A list of schemas (`anyOf`, `prefixItems`, …).
    List,
    /// Schemas by name (`properties`, `$defs`, …).
    Named,
}

fn holds(keyword: &str) -> Option<Holds> {
    Some(match keyword {
        "items"
        | "additionalProperties"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "additionalItems" => Holds::One,
        "prefixItems" | "anyOf" | "oneOf" | "allOf" => Holds::List,
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            Holds::Named
        }
        _ => return None,
    })
}

/// Rebuilds one keyword's value, passing each subschema in it through `f`
/// with its pointer in the original schema. Values of keywords that hold no
/// schemas (`enum`, `default`, …) are copied as they are.
pub(crate) fn lower_keyword(
    keyword: &str,
    value: &Value,
    path: &str,
    f: &mut dyn FnMut(&Value, &str) -> Value,
) -> Value {
    let at = child(path, keyword);
    match (holds(keyword), value) {
        // `items` as an array is the pre-2020 tuple form: still schemas.
        (Some(Holds::One | Holds::List), Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, s)| f(s, &child(&at, &i.to_string())))
            .collect(),
        (Some(Holds::One), v) => f(v, &at),
        (Some(Holds::Named), Value::Object(named)) => Value::Object(
            named
                .iter()
                .map(|(name, s)| (name.clone(), f(s, &child(&at, name))))
                .collect(),
        ),
        _ => value.clone(),
    }
}

/// Whether the schema describes an object.
pub(crate) fn is_object(m: &Obj) -> bool {
    match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => m.contains_key("properties"),
    }
}

/// Whether `null` validates against the schema, as far as its own keywords
/// tell (references are not followed).
pub(crate) fn accepts_null(v: &Value) -> bool {
    let Value::Object(m) = v else {
        return *v == Value::Bool(true);
    };
    if let Some(Value::Array(values)) = m.get("enum") {
        return values.contains(&Value::Null);
    }
    if let Some(c) = m.get("const") {
        return c.is_null();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = m.get(key) {
            return alts.iter().any(accepts_null);
        }
    }
    match m.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        Some(_) => false,
        None => !["$ref", "allOf", "not"].iter().any(|k| m.contains_key(*k)),
    }
}

/// Whether the schema is exactly the `null` branch of a union.
pub(crate) fn is_null_type(v: &Value) -> bool {
    v.get("type").is_some_and(|t| t == "null")
}

/// A short phrase for what a schema accepts, for descriptions: "string",
/// "array of integer", "`Tree`", `"Dot"`.
pub(crate) fn describe(v: &Value) -> String {
    let Value::Object(m) = v else {
        return if *v == Value::Bool(false) {
            "nothing".into()
        } else {
            "any value".into()
        };
    };
    if let Some(Value::String(r)) = m.get("$ref") {
        return format!("`{}`", r.rsplit('/').next().unwrap_or(r));
    }
    if let Some(c) = m.get("const") {
        return c.to_string();
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        let list: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("one of {}", list.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = m.get(key) {
            let list: Vec<String> = alts.iter().map(describe).collect();
            return list.join(" or ");
        }
    }
    match m.get("type") {
        Some(Value::String(t)) => type_phrase(t, m),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(|t| type_phrase(t, m))
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any value".into(),
    }
}

fn type_phrase(t: &str, m: &Obj) -> String {
    let t = t.to_ascii_lowercase();
    match (t.as_str(), m.get("items"), m.get("additionalProperties")) {
        ("array", Some(items @ Value::Object(_)), _) => format!("array of {}", describe(items)),
        ("object", _, Some(values @ Value::Object(_))) if !m.contains_key("properties") => {
            format!("object mapping keys to {}", describe(values))
        }
        _ => t,
    }
}

/// Appends sentences to the schema's description, creating it if needed.
pub(crate) fn append_notes(m: &mut Obj, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let extra = notes.join(" ");
    match m.get_mut("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => {
            let mut text = d.trim_end().to_owned();
            if !text.ends_with(['.', '!', '?', ':']) {
                text.push('.');
            }
            text.push(' ');
            text.push_str(&extra);
            *d = text;
        }
        _ => {
            m.insert("description".into(), extra.into());
        }
    }
}

/// "Exactly 1 character.", "At least 2 items.", "Between 1 and 5 characters."
pub(crate) fn bounds_sentence(min: Option<&Value>, max: Option<&Value>, unit: &str) -> String {
    let plural = |n: &Value| {
        if n.as_u64() == Some(1) {
            unit.to_owned()
        } else {
            format!("{unit}s")
        }
    };
    match (min, max) {
        (Some(a), Some(b)) if a == b => format!("Exactly {a} {}.", plural(a)),
        (Some(a), Some(b)) => format!("Between {a} and {b} {}.", plural(b)),
        (Some(a), None) => format!("At least {a} {}.", plural(a)),
        (None, Some(b)) => format!("At most {b} {}.", plural(b)),
        (None, None) => String::new(),
    }
}

/// A tuple (`prefixItems`) as a plain array: `items` becomes the union of
/// the item schemas. Returns that `items` schema and a sentence giving the
/// order the provider no longer enforces.
///
/// `lowered` are the already lowered `prefixItems`, `rest` the lowered
/// `items` next to them (`false` for a closed tuple).
pub(crate) fn tuple_as_array(
    original: &[Value],
    lowered: Vec<Value>,
    rest: Option<Value>,
) -> (Value, String) {
    let mut alts: Vec<Value> = Vec::new();
    let open = rest.as_ref().is_some_and(|r| *r != Value::Bool(false));
    for s in lowered.into_iter().chain(rest.filter(Value::is_object)) {
        if !alts.contains(&s) {
            alts.push(s);
        }
    }
    let items = if alts.len() == 1 {
        alts.remove(0)
    } else {
        let mut m = Obj::new();
        m.insert("anyOf".into(), Value::Array(alts));
        Value::Object(m)
    };
    let order: Vec<String> = original.iter().map(describe).collect();
    let n = original.len();
    let sentence = if open {
        format!("The first {n} items, in this order: {}.", order.join(", "))
    } else {
        format!("Exactly {n} items, in this order: {}.", order.join(", "))
    };
    (items, sentence)
}

/// Lowers the `prefixItems` tuple of `m` (with its closing `items`)
/// through `f`, and turns it into a plain array with [`tuple_as_array`].
pub(crate) fn lower_tuple(
    m: &Obj,
    path: &str,
    f: &mut dyn FnMut(&Value, &str) -> Value,
) -> Option<(Value, String)> {
    let list = m.get("prefixItems")?.as_array()?;
    let at = child(path, "prefixItems");
    let lowered = list
        .iter()
        .enumerate()
        .map(|(i, s)| f(s, &child(&at, &i.to_string())))
        .collect();
    // `items: false` closes the tuple: not a schema to lower.
    let rest = m.get("items").map(|r| match r {
        Value::Bool(_) => r.clone(),
        _ => f(r, &child(path, "items")),
    });
    Some(tuple_as_array(list, lowered, rest))
}

/// Reports a root that is not a `type: object` schema.
pub(crate) fn check_object_root(schema: &Value, sink: &mut Sink<'_>, field: &str) {
    match schema {
        Value::Object(m) => match m.get("type") {
            Some(t) if t == "object" => {}
            Some(t) => sink.push(
                "/type",
                "type",
                Severity::Unsupported,
                format!("`{field}` must have `\"type\": \"object\"`, not {t}"),
            ),
            None => sink.push(
                "",
                "type",
                Severity::Unsupported,
                format!(
                    "`{field}` must have `\"type\": \"object\"`, and this schema has no `type`"
                ),
            ),
        },
        other => sink.push(
            "",
            "type",
            Severity::Unsupported,
            format!("`{field}` must be an object schema, not {other}"),
        ),
    }
}

/// The schema without its root `$schema`, which some providers reject and
/// none needs: it names the dialect and carries no constraint.
pub(crate) fn strip_root_dialect(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "$schema")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Helpers shared by the dialects' rule-by-rule tests.
#[cfg(test)]
pub(crate) mod test_support {
    use serde_json::Value;

    use crate::lowering::{LoweringReport, Severity};

    /// Runs one dialect's `lower` as `lowering::lower` does: inlining can
    /// repeat an original location, so entries are deduplicated.
    pub(crate) fn run(
        lower: fn(&str, &Value, &mut LoweringReport) -> Value,
        schema: &Value,
    ) -> (Value, LoweringReport) {
        let mut report = LoweringReport::default();
        let out = lower("t", schema, &mut report);
        report.dedup();
        (out, report)
    }

    /// `(path, keyword, severity)` of every entry.
    pub(crate) fn keys(r: &LoweringReport) -> Vec<(&str, &str, Severity)> {
        r.iter()
            .map(|e| (e.path.as_str(), e.keyword.as_str(), e.severity))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_escape() {
        assert_eq!(child("", "properties"), "/properties");
        assert_eq!(child("/a", "x/y~z"), "/a/x~1y~0z");
    }

    #[test]
    fn walk_visits_every_subschema_with_its_pointer() {
        let s = json!({
            "properties": {"a": {"type": "string"}},
            "anyOf": [{"type": "null"}],
            "items": {"type": "integer"},
            "enum": [{"type": "not a schema"}]
        });
        let mut seen = Vec::new();
        let m = s.as_object().unwrap();
        for (k, v) in m {
            lower_keyword(k, v, "/r", &mut |_, p| {
                seen.push(p.to_owned());
                json!(true)
            });
        }
        assert_eq!(seen, ["/r/properties/a", "/r/anyOf/0", "/r/items"]);
    }

    #[test]
    fn null_acceptance() {
        assert!(accepts_null(&json!({"type": ["string", "null"]})));
        assert!(accepts_null(
            &json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        ));
        assert!(accepts_null(&json!({})));
        assert!(!accepts_null(&json!({"type": "string"})));
        assert!(!accepts_null(
            &json!({"type": ["string", "null"], "enum": ["a"]})
        ));
        assert!(!accepts_null(&json!({"$ref": "#/$defs/T"})));
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(&json!({"type": "string"})), "string");
        assert_eq!(
            describe(&json!({"type": "array", "items": {"type": ["integer", "null"]}})),
            "array of integer or null"
        );
        assert_eq!(describe(&json!({"$ref": "#/$defs/Tree"})), "`Tree`");
        assert_eq!(
            describe(&json!({"type": "string", "const": "Dot"})),
            "\"Dot\""
        );
        assert_eq!(
            describe(&json!({"type": "object", "additionalProperties": {"type": "boolean"}})),
            "object mapping keys to boolean"
        );
        assert_eq!(describe(&json!({})), "any value");
    }

    #[test]
    fn notes_extend_descriptions() {
        let mut m = json!({"description": "How many"})
            .as_object()
            .unwrap()
            .clone();
        append_notes(&mut m, &["Default: 5.".into()]);
        assert_eq!(m["description"], "How many. Default: 5.");
        let mut m = Obj::new();
        append_notes(&mut m, &["A.".into(), "B.".into()]);
        assert_eq!(m["description"], "A. B.");
    }

    #[test]
    fn bounds() {
        assert_eq!(
            bounds_sentence(Some(&json!(1)), Some(&json!(1)), "character"),
            "Exactly 1 character."
        );
        assert_eq!(
            bounds_sentence(Some(&json!(2)), None, "item"),
            "At least 2 items."
        );
        assert_eq!(
            bounds_sentence(None, Some(&json!(1)), "item"),
            "At most 1 item."
        );
    }

    #[test]
    fn tuples_become_unions() {
        let original = [json!({"type": "string"}), json!({"type": "integer"})];
        let (items, sentence) = tuple_as_array(&original, original.to_vec(), Some(json!(false)));
        assert_eq!(
            items,
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
        assert_eq!(sentence, "Exactly 2 items, in this order: string, integer.");
        let same = [json!({"type": "number"}), json!({"type": "number"})];
        let (items, _) = tuple_as_array(&same, same.to_vec(), Some(json!(false)));
        assert_eq!(items, json!({"type": "number"}));
    }
}
