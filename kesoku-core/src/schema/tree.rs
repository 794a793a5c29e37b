//! Compile-time schemas: a `'static` data tree that `#[tool]` and
//! `#[derive(ToolArg)]` build as constants, rendered to JSON Schema
//! (draft 2020-12) on demand.
//!
//! Nothing here allocates until [`ToolSchema::parameters_json`] or
//! [`Schema::to_json`] is called, and the registry calls those once per
//! tool and caches the result.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

/// The JSON Schema dialect every rendered schema declares.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// One node of a compile-time schema.
///
/// Built by the [`ToolArg`](crate::ToolArg) implementations as associated
/// constants, so a whole tool schema is a `'static` value with no run-time
/// construction.
///
/// ```
/// use kesoku_core::{Schema, ToolArg};
///
/// assert!(matches!(<u8 as ToolArg>::SCHEMA, Schema::Integer { minimum: 0, maximum: 255 }));
/// assert_eq!(<Vec<bool> as ToolArg>::SCHEMA.to_json()["type"], "array");
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Schema {
    /// Any JSON value (`serde_json::Value`).
    Any,
    /// `true` or `false`.
    Boolean,
    /// A whole number in `minimum..=maximum`: the range the validator
    /// enforces, normally the Rust type's.
    ///
    /// Only the bounds a double holds exactly (within ±(2^53 − 1)) are
    /// written into the rendered schema: those of `i8` to `i32` and `u8` to
    /// `u32`, and the `0` of unsigned types. The limits of 64- and 128-bit
    /// integers would cost tokens on every call, tell the model nothing and
    /// be misread by double-based JSON parsers; they are still enforced.
    Integer {
        /// Smallest accepted value.
        minimum: i128,
        /// Largest accepted value.
        maximum: u128,
    },
    /// Any JSON number.
    Number,
    /// A string, with optional length bounds counted in characters.
    String(StringSchema),
    /// One string out of a fixed set (unit-only enums).
    Enum(&'static [&'static str]),
    /// Exactly this string (a unit variant inside a `oneOf`, or a tag).
    Const {
        /// The only accepted value.
        value: &'static str,
        /// What it means, from the variant's doc comment.
        description: Option<&'static str>,
    },
    /// A homogeneous array.
    Array(ArraySchema),
    /// A fixed-length array whose items each have their own schema.
    Tuple(&'static [Schema]),
    /// An object with arbitrary keys whose values share one schema.
    Map(&'static Schema),
    /// An object with named properties.
    Object(&'static ObjectSchema),
    /// The inner schema, or `null`.
    Nullable(&'static Schema),
    /// Exactly one of the alternatives (enums with data).
    OneOf(&'static [Schema]),
    /// A named user type. Rendered inline unless it is recursive, in which
    /// case it goes to `$defs` and is referenced with `$ref`.
    Named(&'static NamedSchema),
}

/// Bounds of a [`Schema::String`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSchema {
    /// Fewest characters.
    pub min_length: Option<u64>,
    /// Most characters.
    pub max_length: Option<u64>,
    /// A JSON Schema `format`, such as `"uuid"`.
    pub format: Option<&'static str>,
}

/// Items and bounds of a [`Schema::Array`].
#[derive(Debug, Clone, Copy)]
pub struct ArraySchema {
    /// Schema of every item.
    pub items: &'static Schema,
    /// Fewest items.
    pub min_items: Option<u64>,
    /// Most items.
    pub max_items: Option<u64>,
    /// Whether items must be distinct (sets).
    pub unique_items: bool,
}

/// The properties of an object: a struct, a struct variant, or a tool's arguments.
#[derive(Debug, Clone, Copy)]
pub struct ObjectSchema {
    /// The object's own properties, in declaration order.
    pub fields: &'static [Field],
    /// Schemas whose properties are merged in (`#[serde(flatten)]`).
    pub flatten: &'static [Schema],
    /// A description of the object as a whole.
    pub description: Option<&'static str>,
}

/// One property of an [`ObjectSchema`].
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The property name as it appears in JSON.
    pub name: &'static str,
    /// What the property means, from the doc comment.
    pub description: Option<&'static str>,
    /// The property's schema.
    pub schema: &'static Schema,
    /// Whether the property must be present.
    pub required: bool,
    /// Renders the default value shown in the schema. The outer `Option`
    /// says whether there is a default; the inner is `None` when the
    /// default's type is not `Serialize`, so it cannot be shown.
    pub default: Option<fn() -> Option<Value>>,
}

/// A named user type, from `#[derive(ToolArg)]`.
///
/// The body is behind a function pointer so that recursive types do not
/// make their constants cyclic.
#[derive(Debug, Clone, Copy)]
pub struct NamedSchema {
    /// The Rust type's name, used as the `$defs` key when it recurses.
    pub name: &'static str,
    /// The type's full path (`module::Name`): tells apart two types of the
    /// same name.
    pub id: &'static str,
    /// The type's doc comment.
    pub description: Option<&'static str>,
    /// Returns the type's schema.
    pub body: fn() -> &'static Schema,
}

impl ObjectSchema {
    /// Every property, own and flattened, in order.
    pub fn all_fields(&self) -> Vec<&'static Field> {
        let mut out = Vec::with_capacity(self.fields.len());
        self.collect_fields(&mut out);
        out
    }

    fn collect_fields(&self, out: &mut Vec<&'static Field>) {
        // `self` may be a stack copy; the fields slice is 'static either way.
        let fields: &'static [Field] = self.fields;
        out.extend(fields.iter());
        for flat in self.flatten {
            if let Some(obj) = flat.as_object() {
                obj.collect_fields(out);
            }
        }
    }

    /// The schema of keys no property names, when a flattened member takes
    /// them: a map's value schema, or any value for flattened members whose
    /// keys cannot be listed (an `Option` of a struct, an enum). `None`
    /// means unknown keys are errors.
    pub fn extra(&self) -> Option<&'static Schema> {
        static ANY: Schema = Schema::Any;
        self.flatten.iter().find_map(|flat| match flat.resolve() {
            Schema::Object(o) => o.extra(),
            Schema::Map(values) => Some(*values),
            _ => Some(&ANY),
        })
    }

    /// Looks a property up by JSON name, own or flattened.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        let fields: &'static [Field] = self.fields;
        fields.iter().find(|f| f.name == name).or_else(|| {
            self.flatten
                .iter()
                .filter_map(Schema::as_object)
                .find_map(|o| o.field(name))
        })
    }
}

impl Schema {
    /// A string of the JSON Schema `format` given (`"date-time"`, `"uri"`):
    /// the schema to give a foreign type with `#[kesoku(schema = ...)]` on
    /// a field, or `#[arg(schema = ...)]` on a tool parameter.
    ///
    /// ```
    /// use kesoku_core::Schema;
    ///
    /// const WHEN: Schema = Schema::formatted("date-time");
    /// assert_eq!(WHEN.to_json(), serde_json::json!({"type": "string", "format": "date-time"}));
    /// ```
    pub const fn formatted(format: &'static str) -> Schema {
        Schema::String(StringSchema {
            min_length: None,
            max_length: None,
            format: Some(format),
        })
    }

    /// This schema, looking through named types.
    pub fn resolve(&self) -> &Schema {
        match self {
            Schema::Named(n) => (n.body)().resolve(),
            other => other,
        }
    }

    /// The object this schema describes, looking through named types.
    pub fn as_object(&self) -> Option<&'static ObjectSchema> {
        match self {
            Schema::Object(o) => Some(o),
            Schema::Named(n) => (n.body)().as_object(),
            _ => None,
        }
    }

    /// Whether `null` is an accepted value.
    pub fn is_nullable(&self) -> bool {
        match self {
            Schema::Nullable(_) | Schema::Any => true,
            Schema::Named(n) => (n.body)().is_nullable(),
            _ => false,
        }
    }

    /// Renders this schema as JSON Schema, with a `$defs` section if it
    /// contains recursive types.
    pub fn to_json(&self) -> Value {
        let mut r = Renderer::new(self);
        let mut out = r.render(self);
        r.attach_defs(&mut out);
        out
    }

    /// A short human description of the expected JSON, for error messages.
    pub fn expected(&self) -> String {
        match self {
            Schema::Any => "any value".into(),
            Schema::Boolean => "a boolean".into(),
            Schema::Integer { minimum, maximum } => {
                format!("an integer from {minimum} to {maximum}")
            }
            Schema::Number => "a number".into(),
            Schema::String(s) if s.min_length == Some(1) && s.max_length == Some(1) => {
                "a single character".into()
            }
            Schema::String(_) => "a string".into(),
            Schema::Enum(values) => format!("one of {}", quote_list(values)),
            Schema::Const { value, .. } => format!("\"{value}\""),
            Schema::Array(_) => "an array".into(),
            Schema::Tuple(items) => format!("an array of {} items", items.len()),
            Schema::Map(_) | Schema::Object(_) => "an object".into(),
            Schema::Nullable(inner) => format!("{} or null", inner.expected()),
            Schema::OneOf(_) => "one of the variants".into(),
            Schema::Named(n) => (n.body)().expected(),
        }
    }
}

/// Formats `["a", "b"]` as `` `a`, `b` ``.
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|s| format!("`{}`", s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Renders schemas, sending recursive named types to `$defs`.
pub(crate) struct Renderer {
    /// Ids of the recursive named types.
    recursive: BTreeSet<&'static str>,
    /// `$defs` entries by key.
    defs: BTreeMap<String, Value>,
    /// The `$defs` key of each recursive type's id.
    keys: BTreeMap<&'static str, String>,
}

impl Renderer {
    fn new(root: &Schema) -> Self {
        let mut finder = RecursionFinder::default();
        finder.visit(root);
        Renderer::with(finder.recursive)
    }

    pub(crate) fn for_object(root: &ObjectSchema) -> Self {
        let mut finder = RecursionFinder::default();
        finder.visit_object(root);
        Renderer::with(finder.recursive)
    }

    fn with(recursive: BTreeSet<&'static str>) -> Self {
        Renderer {
            recursive,
            defs: BTreeMap::new(),
            keys: BTreeMap::new(),
        }
    }

    pub(crate) fn attach_defs(self, out: &mut Value) {
        if !self.defs.is_empty()
            && let Value::Object(map) = out
        {
            map.insert(
                "$defs".into(),
                Value::Object(self.defs.into_iter().collect()),
            );
        }
    }

    fn render(&mut self, schema: &Schema) -> Value {
        match schema {
            Schema::Any => json!({}),
            Schema::Boolean => json!({"type": "boolean"}),
            Schema::Integer { minimum, maximum } => {
                let mut m = Map::new();
                m.insert("type".into(), "integer".into());
                if let Some(n) = shown_bound(*minimum) {
                    m.insert("minimum".into(), n.into());
                }
                if let Some(n) = i128::try_from(*maximum).ok().and_then(shown_bound) {
                    m.insert("maximum".into(), n.into());
                }
                Value::Object(m)
            }
            Schema::Number => json!({"type": "number"}),
            Schema::String(s) => {
                let mut m = Map::new();
                m.insert("type".into(), "string".into());
                if let Some(n) = s.min_length {
                    m.insert("minLength".into(), n.into());
                }
                if let Some(n) = s.max_length {
                    m.insert("maxLength".into(), n.into());
                }
                if let Some(f) = s.format {
                    m.insert("format".into(), f.into());
                }
                Value::Object(m)
            }
            Schema::Enum(values) => json!({"type": "string", "enum": values}),
            Schema::Const { value, description } => {
                let mut v = json!({"type": "string", "const": value});
                if let Some(d) = description {
                    v["description"] = (*d).into();
                }
                v
            }
            Schema::Array(a) => {
                let mut m = Map::new();
                m.insert("type".into(), "array".into());
                m.insert("items".into(), self.render(a.items));
                if let Some(n) = a.min_items {
                    m.insert("minItems".into(), n.into());
                }
                if let Some(n) = a.max_items {
                    m.insert("maxItems".into(), n.into());
                }
                if a.unique_items {
                    m.insert("uniqueItems".into(), true.into());
                }
                Value::Object(m)
            }
            Schema::Tuple(items) => {
                let prefix: Vec<Value> = items.iter().map(|s| self.render(s)).collect();
                json!({
                    "type": "array",
                    "prefixItems": prefix,
                    "items": false,
                    "minItems": items.len(),
                    "maxItems": items.len(),
                })
            }
            Schema::Map(values) => json!({
                "type": "object",
                "additionalProperties": self.render(values),
            }),
            Schema::Object(o) => self.render_object(o, None),
            Schema::Nullable(inner) => {
                let inner = self.render(inner);
                nullable(inner)
            }
            Schema::OneOf(alts) => {
                let alts: Vec<Value> = alts.iter().map(|s| self.render(s)).collect();
                json!({ "oneOf": alts })
            }
            Schema::Named(n) => {
                if self.recursive.contains(n.id) {
                    let key = if let Some(key) = self.keys.get(n.id) {
                        key.clone()
                    } else {
                        // The bare name, unless another type took it.
                        let key = if self.defs.contains_key(n.name) {
                            n.id.replace("::", ".")
                        } else {
                            n.name.to_owned()
                        };
                        self.keys.insert(n.id, key.clone());
                        // Placeholder first, so the body's own references stop here.
                        self.defs.insert(key.clone(), Value::Null);
                        let body = self.render_named_body(n);
                        self.defs.insert(key.clone(), body);
                        key
                    };
                    json!({ "$ref": format!("#/$defs/{key}") })
                } else {
                    self.render_named_body(n)
                }
            }
        }
    }

    fn render_named_body(&mut self, n: &NamedSchema) -> Value {
        let body = (n.body)();
        let mut v = match body {
            Schema::Object(o) => self.render_object(o, n.description),
            other => self.render(other),
        };
        if let (Some(d), Value::Object(m)) = (n.description, &mut v) {
            m.entry("description").or_insert_with(|| d.into());
        }
        v
    }

    pub(crate) fn render_object(
        &mut self,
        o: &ObjectSchema,
        fallback_desc: Option<&'static str>,
    ) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for f in o.all_fields() {
            let mut p = self.render(f.schema);
            if let Value::Object(m) = &mut p {
                if let Some(d) = f.description {
                    m.insert("description".into(), d.into());
                }
                if let Some(value) = f.default.and_then(|d| d()) {
                    m.insert("default".into(), value);
                }
            }
            if f.required {
                required.push(Value::from(f.name));
            }
            props.insert(f.name.into(), p);
        }
        let mut m = Map::new();
        m.insert("type".into(), "object".into());
        if let Some(d) = o.description.or(fallback_desc) {
            m.insert("description".into(), d.into());
        }
        m.insert("properties".into(), Value::Object(props));
        m.insert("required".into(), Value::Array(required));
        let extra = o.extra().map_or(Value::Bool(false), |x| match x {
            Schema::Any => Value::Bool(true),
            x => self.render(x),
        });
        m.insert("additionalProperties".into(), extra);
        Value::Object(m)
    }
}

/// `T | null`: a type list where `T` is a plain typed schema, else `anyOf`.
fn nullable(inner: Value) -> Value {
    if let Value::Object(mut m) = inner {
        let simple = matches!(m.get("type"), Some(Value::String(_)))
            && !m.contains_key("enum")
            && !m.contains_key("const");
        if simple {
            let ty = m.remove("type").unwrap_or(Value::Null);
            m.insert("type".into(), json!([ty, "null"]));
            return Value::Object(m);
        }
        if m.is_empty() {
            return Value::Object(m);
        }
        return json!({ "anyOf": [Value::Object(m), {"type": "null"}] });
    }
    json!({ "anyOf": [inner, {"type": "null"}] })
}

/// The largest integer a double holds exactly, and every smaller one.
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// An integer bound as the rendered schema shows it: only when a double
/// holds it exactly (see [`Schema::Integer`]).
fn shown_bound(v: i128) -> Option<i64> {
    i64::try_from(v)
        .ok()
        .filter(|v| (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(v))
}

/// Marks the named types that are reached from themselves: the targets of
/// back edges in a depth-first walk, which is enough to break every cycle.
#[derive(Default)]
struct RecursionFinder {
    stack: Vec<&'static str>,
    done: BTreeSet<&'static str>,
    recursive: BTreeSet<&'static str>,
}

impl RecursionFinder {
    fn visit(&mut self, schema: &Schema) {
        match schema {
            Schema::Any
            | Schema::Boolean
            | Schema::Integer { .. }
            | Schema::Number
            | Schema::String(_)
            | Schema::Enum(_)
            | Schema::Const { .. } => {}
            Schema::Array(a) => self.visit(a.items),
            Schema::Map(s) | Schema::Nullable(s) => self.visit(s),
            Schema::Tuple(items) | Schema::OneOf(items) => items.iter().for_each(|s| self.visit(s)),
            Schema::Object(o) => self.visit_object(o),
            Schema::Named(n) => {
                if self.stack.contains(&n.id) {
                    self.recursive.insert(n.id);
                } else if self.done.insert(n.id) {
                    self.stack.push(n.id);
                    self.visit((n.body)());
                    self.stack.pop();
                }
            }
        }
    }

    fn visit_object(&mut self, o: &ObjectSchema) {
        o.fields.iter().for_each(|f| self.visit(f.schema));
        o.flatten.iter().for_each(|s| self.visit(s));
    }
}
