//! [`OutputSchema`]: the shape a typed answer must have, lowered once per
//! provider dialect and checked with kesoku's validator; and
//! [`OutputError`], an answer that does not have it, every problem named
//! by its JSON path.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::args::arg_error::{ArgError, ArgErrorKind};
use crate::args::dynamic_schema::DynamicSchema;
use crate::args::tool_arg::ToolArg;
use crate::args::validate::format_path;
use crate::lowering::{Dialect, Lowered, Severity, Subject, lower};
use crate::schema::tree::{Schema, quote_list};
use crate::tool::valid_args::seg;

/// The shape a model's final answer must have: a name and a JSON Schema,
/// usually a type's compile-time one ([`of`](Self::of)).
///
/// Cheap to clone (shared). Each provider dialect's lowering is computed
/// once, on first use, and kept; so is the validator.
///
/// With `#[derive(ToolArg)]` on a struct `Invoice`, `OutputSchema::of::<Invoice>()`
/// is its schema, named `Invoice`. One known only at run time:
///
/// ```
/// use kesoku_core::OutputSchema;
/// use kesoku_core::lowering::Dialect;
/// use serde_json::json;
///
/// let output = OutputSchema::new(
///     "Invoice",
///     json!({"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}),
/// )
/// .unwrap();
/// assert!(output.check(&json!({"total": 1200})).is_empty());
/// assert_eq!(output.check(&json!({"total": "12"}))[0].path, "total");
/// let strict = output.lowered(Dialect::OpenAiStrict);
/// assert_eq!(strict.schema["additionalProperties"], false);
/// ```
#[derive(Clone)]
pub struct OutputSchema(Arc<Inner>);

/// Decodes a checked answer as a type, only to see that it can be.
type Decode = fn(&Value) -> Result<(), ArgError>;

struct Inner {
    name: String,
    schema: Value,
    /// By the dialect's place in [`Dialect::ALL`].
    lowered: [OnceLock<Lowered>; Dialect::ALL.len()],
    validator: OnceLock<Result<DynamicSchema, String>>,
    /// Decodes a checked answer as the type the shape was made from
    /// ([`OutputSchema::of`]), so a `Deserialize` stricter than the schema
    /// is part of the check; `None` for a shape known only at run time.
    decode: Option<Decode>,
}

/// Why a schema cannot be an [`OutputSchema`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot use `{name}` as an answer's schema: {reason}")]
#[non_exhaustive]
pub struct OutputSchemaError {
    /// The name it was given.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

impl OutputSchema {
    /// The schema of `T`, from its compile-time constant: named after the
    /// type (`Invoice`) when it is a derived one, else `output`. Rendered
    /// once per type and shared.
    pub fn of<T: ToolArg + DeserializeOwned + 'static>() -> Self {
        static BY_TYPE: OnceLock<Mutex<HashMap<TypeId, OutputSchema>>> = OnceLock::new();
        let mut known = BY_TYPE
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        known
            .entry(TypeId::of::<T>())
            .or_insert_with(|| {
                let name = match T::SCHEMA {
                    Schema::Named(n) => wire_name(n.name),
                    _ => "output".to_owned(),
                };
                let out = OutputSchema::build(
                    name,
                    root_inline(T::SCHEMA.to_json()),
                    Some(decode_as::<T>),
                );
                remember(format!("{}\0{}", out.0.name, out.0.schema), &out);
                out
            })
            .clone()
    }

    /// A schema known only at run time. `name` is what providers are told
    /// (1 to 64 ASCII letters, digits, `_` and `-`), and `schema` must be
    /// a JSON Schema kesoku's validator can compile.
    pub fn new(name: impl Into<String>, schema: Value) -> Result<Self, OutputSchemaError> {
        let name = name.into();
        let fail = |reason: String| OutputSchemaError {
            name: name.clone(),
            reason,
        };
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(fail(
                "the name must be 1 to 64 ASCII letters, digits, `_` or `-`".into(),
            ));
        }
        let validator = DynamicSchema::compile_with_formats(&schema)
            .map_err(|e| fail(format!("the schema does not compile: {e}")))?;
        let out = OutputSchema::unchecked(name, schema);
        let _ = out.0.validator.set(Ok(validator));
        Ok(out)
    }

    /// The shape stored as `name` and `schema`: the one already in use
    /// when there is one (so its validator and lowerings are reused, as
    /// each typed turn reads its shape back from its prompt), else a new
    /// one, kept for the next time.
    fn interned(name: String, schema: Value) -> Result<Self, OutputSchemaError> {
        let key = format!("{name}\0{schema}");
        if let Some(known) = known().get(&key) {
            return Ok(known.clone());
        }
        let out = OutputSchema::new(name, schema)?;
        remember(key, &out);
        Ok(out)
    }

    fn unchecked(name: String, schema: Value) -> Self {
        OutputSchema::build(name, schema, None)
    }

    fn build(name: String, schema: Value, decode: Option<Decode>) -> Self {
        OutputSchema(Arc::new(Inner {
            name,
            schema,
            lowered: Default::default(),
            validator: OnceLock::new(),
            decode,
        }))
    }

    /// The name providers are told.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The schema, as kesoku renders it (draft 2020-12).
    pub fn schema(&self) -> &Value {
        &self.0.schema
    }

    /// The schema lowered for `dialect`, with what that changed: computed
    /// the first time, then kept. Its `Lossy` findings are logged then,
    /// once.
    pub fn lowered(&self, dialect: Dialect) -> &Lowered {
        let at = Dialect::ALL
            .iter()
            .position(|d| *d == dialect)
            .unwrap_or_default();
        self.0.lowered[at].get_or_init(|| {
            let mut lowered = lower(dialect, &self.0.name, &self.0.schema);
            for e in &mut lowered.report.entries {
                e.subject = Subject::Answer;
            }
            for e in lowered
                .report
                .iter()
                .filter(|e| e.severity >= Severity::Lossy)
            {
                tracing::warn!(
                    output = %self.0.name,
                    path = %e.path,
                    severity = %e.severity,
                    "answer schema lowered to {dialect}: {e}"
                );
            }
            lowered
        })
    }

    /// Every problem of `value` as an answer of this shape, each with its
    /// JSON path; empty when it fits.
    pub fn check(&self, value: &Value) -> Vec<ArgError> {
        let validator = self
            .0
            .validator
            .get_or_init(|| DynamicSchema::compile_with_formats(&self.0.schema));
        match validator {
            Ok(v) => v.check(value),
            Err(e) => vec![ArgError {
                path: String::new(),
                kind: ArgErrorKind::Invalid {
                    message: format!("the answer's schema does not compile: {e}"),
                },
            }],
        }
    }

    /// Reads a model's answer: its JSON (inside a Markdown code fence if
    /// the model put one around it), checked against the schema.
    ///
    /// ```
    /// use kesoku_core::OutputSchema;
    ///
    /// let output = OutputSchema::of::<Vec<u8>>();
    /// assert_eq!(output.read("```json\n[1, 2]\n```").unwrap(), serde_json::json!([1, 2]));
    /// let error = output.read("[1, 300]").unwrap_err();
    /// assert_eq!(error.errors[0].path, "[1]");
    /// assert!(output.read("one, two").unwrap_err().to_string().contains("not JSON"));
    /// ```
    pub fn read(&self, text: &str) -> Result<Value, OutputError> {
        let fail = |errors| OutputError {
            output: self.0.name.clone(),
            raw: text.to_owned(),
            errors,
        };
        let mut value: Value = serde_json::from_str(unfenced(text)).map_err(|e| {
            fail(vec![ArgError {
                path: String::new(),
                kind: ArgErrorKind::Invalid {
                    message: format!("not JSON: {e}"),
                },
            }])
        })?;
        // An optional field sent as `null` means "absent" (strict modes
        // make every field required and nullable): drop it, as for a
        // tool's arguments, so the type's default applies.
        drop_absent_nulls(&self.0.schema, &self.0.schema, &mut value);
        let errors = self.check(&value);
        if !errors.is_empty() {
            return Err(fail(errors));
        }
        if let Some(decode) = self.0.decode {
            decode(&value).map_err(|e| fail(vec![e]))?;
        }
        Ok(value)
    }
}

impl OutputSchema {
    /// Reads a model's answer as a `T`: [`read`](Self::read), then
    /// decoded, a decoding error keeping its path (a `Deserialize`
    /// stricter than the schema has the last word).
    ///
    /// ```
    /// use kesoku_core::OutputSchema;
    ///
    /// let output = OutputSchema::of::<Vec<u8>>();
    /// let bytes: Vec<u8> = output.read_as("[1, 2]").unwrap();
    /// assert_eq!(bytes, [1, 2]);
    /// ```
    pub fn read_as<T: DeserializeOwned>(&self, text: &str) -> Result<T, OutputError> {
        let value = self.read(text)?;
        serde_path_to_error::deserialize(value).map_err(|e| OutputError {
            output: self.0.name.clone(),
            raw: text.to_owned(),
            errors: vec![decode_error(e)],
        })
    }
}

/// Decodes `value` as a `T` only to see that it can be.
fn decode_as<T: DeserializeOwned>(value: &Value) -> Result<(), ArgError> {
    serde_path_to_error::deserialize::<_, T>(value)
        .map(drop)
        .map_err(decode_error)
}

fn decode_error(e: serde_path_to_error::Error<serde_json::Error>) -> ArgError {
    let path: Vec<_> = e.path().iter().filter_map(seg).collect();
    ArgError {
        path: format_path(&path),
        kind: ArgErrorKind::Invalid {
            message: e.into_inner().to_string(),
        },
    }
}

/// A recursive type's schema is a `$ref` to its own definition; providers
/// want an object at the root, so the definition is put there (its inner
/// references still point into `$defs`).
fn root_inline(mut schema: Value) -> Value {
    let Some(target) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_owned)
    else {
        return schema;
    };
    let Some(body) = schema.pointer(&format!("/$defs/{target}")).cloned() else {
        return schema;
    };
    let Value::Object(mut body) = body else {
        return schema;
    };
    if let Some(defs) = schema.as_object_mut().and_then(|m| m.remove("$defs")) {
        body.insert("$defs".into(), defs);
    }
    Value::Object(body)
}

/// How deep [`drop_absent_nulls`] and [`takes_null`] follow a schema: a
/// stored shape may come from anywhere, and a `$ref` may loop without
/// going deeper into the value.
const SCHEMA_DEPTH: usize = 64;

/// Removes, in `value`, each optional property given as `null` whose
/// schema does not take null, following `$ref`s into `root`.
fn drop_absent_nulls(root: &Value, schema: &Value, value: &mut Value) {
    drop_nulls_within(root, schema, value, SCHEMA_DEPTH);
}

fn drop_nulls_within(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    let Some(depth) = depth.checked_sub(1) else {
        return;
    };
    let schema = resolve(root, schema);
    for alternative in ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
    {
        drop_nulls_within(root, alternative, value, depth);
    }
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required = |k: &str| {
                schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|n| n == k))
            };
            for (key, property) in properties {
                match map.get_mut(key) {
                    Some(Value::Null) if !required(key) && !takes_null(root, property, depth) => {
                        map.remove(key);
                    }
                    Some(v) => drop_nulls_within(root, property, v, depth),
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                for v in items {
                    drop_nulls_within(root, item, v, depth);
                }
            }
        }
        _ => {}
    }
}

/// `schema`, through a local `$ref` (`#/$defs/...`, `#/definitions/...`).
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) if r.starts_with("#/") => root.pointer(&r[1..]).unwrap_or(schema),
        Some("#") => root,
        _ => schema,
    }
}

/// Whether `schema` accepts `null` (as a type, in a union, or anything);
/// past `depth`, it is taken to (so nothing is dropped).
fn takes_null(root: &Value, schema: &Value, depth: usize) -> bool {
    let Some(depth) = depth.checked_sub(1) else {
        return true;
    };
    let schema = resolve(root, schema);
    match schema {
        Value::Bool(b) => *b,
        Value::Object(m) => {
            let typed = match m.get("type") {
                Some(Value::String(t)) => Some(t == "null"),
                Some(Value::Array(ts)) => Some(ts.iter().any(|t| t == "null")),
                _ => None,
            };
            let union = ["anyOf", "oneOf"]
                .iter()
                .filter_map(|k| m.get(*k).and_then(Value::as_array))
                .flatten()
                .any(|a| takes_null(root, a, depth));
            let open = typed.is_none()
                && !["anyOf", "oneOf", "allOf", "enum", "const"]
                    .iter()
                    .any(|k| m.contains_key(*k));
            typed == Some(true)
                || union
                || open
                || m.get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.contains(&Value::Null))
                || m.get("const") == Some(&Value::Null)
        }
        _ => false,
    }
}

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.0.name)
            .field("schema", &self.0.schema)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.name == other.0.name && self.0.schema == other.0.schema)
    }
}

/// Stored as `{"name": ..., "schema": ...}` (with the prompt of a typed
/// turn, so whichever worker runs the turn asks for the same shape).
impl serde::Serialize for OutputSchema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = s.serialize_struct("OutputSchema", 2)?;
        out.serialize_field("name", &self.0.name)?;
        out.serialize_field("schema", &self.0.schema)?;
        out.end()
    }
}

impl<'de> serde::Deserialize<'de> for OutputSchema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Stored {
            name: String,
            schema: Value,
        }
        let stored = Stored::deserialize(d)?;
        OutputSchema::interned(stored.name, stored.schema).map_err(serde::de::Error::custom)
    }
}

/// How many shapes read back from storage are kept for reuse; past it the
/// cache starts again (a process asks for few shapes, but stored ones come
/// from anywhere).
const KNOWN_SHAPES: usize = 256;

/// The shapes in use, by name and schema text.
fn known() -> std::sync::MutexGuard<'static, HashMap<String, OutputSchema>> {
    static KNOWN: OnceLock<Mutex<HashMap<String, OutputSchema>>> = OnceLock::new();
    KNOWN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn remember(key: String, shape: &OutputSchema) {
    let mut known = known();
    if known.len() >= KNOWN_SHAPES {
        known.clear();
    }
    known.insert(key, shape.clone());
}

/// `name` with what providers reject in a schema name replaced.
fn wire_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if out.is_empty() {
        out.push_str("output");
    }
    out
}

/// The text inside a Markdown code fence, if the whole answer is one.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // The fence's language tag runs to the end of its line.
    body.split_once('\n').map_or(body, |(_, b)| b).trim()
}

/// A model's answer that is not a valid value of the asked shape: the
/// text as it came, and every problem, each with its JSON path.
///
/// Its `Display` is what the model is shown when it may try again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct OutputError {
    /// The shape's name ([`OutputSchema::name`]).
    pub output: String,
    /// The answer, as the model wrote it.
    pub raw: String,
    /// What is wrong, each located by its JSON path (empty for the answer
    /// as a whole).
    pub errors: Vec<ArgError>,
}

/// How many problems an [`OutputError`]'s message lists: it is shown to
/// the model, and an answer far off its shape (a long list of the wrong
/// items) would otherwise fill its context with the same mistake.
const LISTED: usize = 20;

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.output;
        match self.errors.as_slice() {
            [one] => write!(f, "the answer is not a valid `{name}`: {}", Problem(one)),
            many => {
                write!(
                    f,
                    "the answer is not a valid `{name}` ({} problems):",
                    many.len()
                )?;
                for e in many.iter().take(LISTED) {
                    write!(f, "\n- {}", Problem(e))?;
                }
                if many.len() > LISTED {
                    write!(f, "\n- and {} more", many.len() - LISTED)?;
                }
                Ok(())
            }
        }
    }
}

/// One problem of an answer, in the words of an answer (not arguments).
struct Problem<'a>(&'a ArgError);

impl fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.0.path;
        let at = |f: &mut fmt::Formatter<'_>| {
            if path.is_empty() {
                f.write_str("the answer")
            } else {
                write!(f, "`{path}`")
            }
        };
        match &self.0.kind {
            ArgErrorKind::Missing { description } => {
                at(f)?;
                f.write_str(" is required")?;
                if let Some(d) = description {
                    write!(f, " ({d})")?;
                }
                Ok(())
            }
            ArgErrorKind::Unknown { valid } => {
                at(f)?;
                f.write_str(" is not a field here")?;
                if !valid.is_empty() {
                    write!(f, "; the fields are {}", quote_list(valid))?;
                }
                Ok(())
            }
            ArgErrorKind::Type { expected, got } => {
                at(f)?;
                write!(f, ": expected {expected}, got {got}")
            }
            ArgErrorKind::Invalid { message } => {
                at(f)?;
                write!(f, ": {message}")
            }
            ArgErrorKind::NotAnObject { got } => {
                write!(f, "the answer must be a JSON object, got {got}")
            }
        }
    }
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
