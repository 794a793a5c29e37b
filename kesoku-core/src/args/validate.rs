//! Schema-directed validation of tool arguments, with lenient coercion.
//!
//! The walk follows the compile-time [`Schema`] over the JSON the model sent,
//! fixes up scalars the model quoted (`"5"` for `5`) when coercion is on, and
//! collects every problem with its JSON path, so one reply to the model can
//! name all of them.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::args::arg_error::{ArgError, ArgErrorKind};
use crate::schema::tree::{ArraySchema, Field, ObjectSchema, Schema, quote_list};

/// One step of a path into the arguments.
#[derive(Debug, Clone)]
pub(crate) enum Seg {
    /// Borrowed for schema field names, so the happy path allocates nothing.
    Key(Cow<'static, str>),
    Index(usize),
}

/// Renders `[Key("points"), Index(2), Key("x")]` as `points[2].x`.
pub(crate) fn format_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// Walks values against schemas, collecting errors.
pub(crate) struct Validator {
    pub(crate) coerce: bool,
    pub(crate) path: Vec<Seg>,
    pub(crate) errors: Vec<ArgError>,
    /// Values left to visit: bounds the work a hostile input can cause.
    pub(crate) budget: u32,
}

impl Validator {
    /// Far above any real tool call, far below a pathological one.
    const BUDGET: u32 = 1_000_000;

    pub(crate) fn new(coerce: bool) -> Self {
        Validator {
            coerce,
            path: Vec::new(),
            errors: Vec::new(),
            budget: Self::BUDGET,
        }
    }

    fn error(&mut self, kind: ArgErrorKind) {
        self.errors.push(ArgError {
            path: format_path(&self.path),
            kind,
        });
    }

    fn type_error(&mut self, schema: &Schema, got: &Value) {
        self.error(ArgErrorKind::Type {
            expected: schema.expected(),
            got: describe(got),
        });
    }

    /// Validates the fields of an object (a tool's arguments or a struct).
    pub(crate) fn object(&mut self, o: &ObjectSchema, map: &mut Map<String, Value>) {
        // Flattened fields need collecting; the usual object does not.
        if o.flatten.is_empty() {
            let fields: &'static [Field] = o.fields;
            self.fields(fields.iter(), None, map);
        } else {
            self.fields(o.all_fields().into_iter(), o.extra(), map);
        }
    }

    fn fields<I>(&mut self, fields: I, extra: Option<&Schema>, map: &mut Map<String, Value>)
    where
        I: Iterator<Item = &'static Field> + Clone,
    {
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !fields.clone().any(|f| f.name == k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            self.path.push(Seg::Key(key.clone().into()));
            if let Some(extra) = extra {
                // A flattened map (or enum) takes the keys no field names.
                if let Some(v) = map.get_mut(&key) {
                    self.value(extra, v);
                }
            } else {
                let valid: Vec<Cow<'static, str>> = fields.clone().map(|f| f.name.into()).collect();
                self.error(ArgErrorKind::Unknown { valid });
            }
            self.path.pop();
        }
        for f in fields.clone() {
            // An optional field sent as `null` means "absent": drop it, so
            // serde applies the field's default rather than rejecting null.
            if !f.required && !f.schema.is_nullable() && map.get(f.name).is_some_and(Value::is_null)
            {
                map.remove(f.name);
            }
        }
        for f in fields {
            match map.get_mut(f.name) {
                None if f.required => {
                    self.path.push(Seg::Key(f.name.into()));
                    self.error(ArgErrorKind::Missing {
                        description: f.description.map(Cow::Borrowed),
                    });
                    self.path.pop();
                }
                None => {}
                // An absent optional argument and an explicit null mean the same.
                Some(Value::Null) if !f.required || f.default.is_some() => {}
                Some(v) => {
                    self.path.push(Seg::Key(f.name.into()));
                    self.value(f.schema, v);
                    self.path.pop();
                }
            }
        }
    }

    pub(crate) fn value(&mut self, schema: &Schema, v: &mut Value) {
        self.budget = self.budget.saturating_sub(1);
        match schema {
            Schema::Any => {}
            Schema::Boolean => match v {
                Value::Bool(_) => {}
                Value::String(s) if self.coerce && matches!(s.trim(), "true" | "false") => {
                    *v = Value::Bool(s.trim() == "true");
                }
                _ => self.type_error(schema, v),
            },
            Schema::Integer { minimum, maximum } => self.integer(schema, *minimum, *maximum, v),
            Schema::Number => match v {
                Value::Number(_) => {}
                Value::String(s) if self.coerce => {
                    match s.trim().parse::<f64>().ok().and_then(Number::from_f64) {
                        Some(n) => *v = Value::Number(n),
                        None => self.type_error(schema, v),
                    }
                }
                _ => self.type_error(schema, v),
            },
            Schema::String(s) => match v {
                Value::String(text) => {
                    let n = text.chars().count() as u64;
                    if s.min_length.is_some_and(|m| n < m) || s.max_length.is_some_and(|m| n > m) {
                        self.error(ArgErrorKind::Invalid {
                            message: format!("expected {}, got {}", schema.expected(), describe(v)),
                        });
                    }
                }
                _ => self.type_error(schema, v),
            },
            Schema::Enum(values) => match v {
                Value::String(s) if values.contains(&s.as_str()) => {}
                Value::String(s) => {
                    let hint = crate::suggest::suggest(s, values.iter().copied())
                        .map(|m| format!("; did you mean `{m}`?"))
                        .unwrap_or_default();
                    self.error(ArgErrorKind::Invalid {
                        message: format!(
                            "expected one of {}, got \"{s}\"{hint}",
                            quote_list(values)
                        ),
                    });
                }
                _ => self.type_error(schema, v),
            },
            Schema::Const { value, .. } => {
                if v.as_str() != Some(value) {
                    self.type_error(schema, v);
                }
            }
            Schema::Array(a) => self.array(schema, a, v),
            Schema::Tuple(schemas) => {
                let Value::Array(items) = v else {
                    return self.type_error(schema, v);
                };
                if items.len() != schemas.len() {
                    self.error(ArgErrorKind::Invalid {
                        message: format!(
                            "expected an array of exactly {} items, got {}",
                            schemas.len(),
                            items.len()
                        ),
                    });
                    return;
                }
                for (i, (s, item)) in schemas.iter().zip(items.iter_mut()).enumerate() {
                    self.path.push(Seg::Index(i));
                    self.value(s, item);
                    self.path.pop();
                }
            }
            Schema::Map(values) => {
                let Value::Object(map) = v else {
                    return self.type_error(schema, v);
                };
                for (k, item) in map.iter_mut() {
                    self.path.push(Seg::Key(k.clone().into()));
                    self.value(values, item);
                    self.path.pop();
                }
            }
            Schema::Object(o) => match v {
                Value::Object(map) => self.object(o, map),
                _ => self.type_error(schema, v),
            },
            Schema::Nullable(inner) => {
                if !v.is_null() {
                    self.value(inner, v);
                }
            }
            Schema::OneOf(alts) => self.one_of(schema, alts, v),
            Schema::Named(n) => self.value((n.body)(), v),
        }
    }

    fn array(&mut self, schema: &Schema, a: &ArraySchema, v: &mut Value) {
        let Value::Array(items) = v else {
            return self.type_error(schema, v);
        };
        let n = items.len() as u64;
        if a.min_items.is_some_and(|m| n < m) || a.max_items.is_some_and(|m| n > m) {
            let want = match (a.min_items, a.max_items) {
                (Some(lo), Some(hi)) if lo == hi => format!("exactly {lo}"),
                (Some(lo), Some(hi)) => format!("{lo} to {hi}"),
                (Some(lo), None) => format!("at least {lo}"),
                (None, _) => format!("at most {}", a.max_items.unwrap_or_default()),
            };
            self.error(ArgErrorKind::Invalid {
                message: format!("expected an array of {want} items, got {n}"),
            });
        }
        for (i, item) in items.iter_mut().enumerate() {
            self.path.push(Seg::Index(i));
            self.value(a.items, item);
            self.path.pop();
        }
        if a.unique_items
            && let Some((i, j)) = first_duplicate(items)
        {
            self.error(ArgErrorKind::Invalid {
                message: format!("items must be unique, but items {i} and {j} are equal"),
            });
        }
    }

    fn integer(&mut self, schema: &Schema, minimum: i128, maximum: u128, v: &mut Value) {
        let parsed: Option<i128> = match v {
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .or_else(|| whole_float(n.as_f64()?)),
            Value::String(s) if self.coerce => s.trim().parse::<i128>().ok(),
            _ => None,
        };
        let Some(n) = parsed else {
            return self.type_error(schema, v);
        };
        let in_range = n >= minimum && u128::try_from(n).map_or(true, |u| u <= maximum);
        if !in_range {
            self.error(ArgErrorKind::Invalid {
                message: format!("expected an integer from {minimum} to {maximum}, got {n}"),
            });
            return;
        }
        // Rewrite quoted and `5.0`-style integers so serde sees a plain integer.
        if let Ok(i) = i64::try_from(n) {
            *v = Value::from(i);
        } else if let Ok(u) = u64::try_from(n) {
            *v = Value::from(u);
        }
    }

    /// `oneOf`: the value must match one alternative.
    ///
    /// Tagged alternatives (a `const` tag field, or externally tagged
    /// single-key objects) are chosen by their tag before anything is
    /// recursed into, so nested tagged enums validate in linear time.
    /// Untagged ones are tried in order, first without coercion (a quoted
    /// `"007"` is the model saying "string"), then with it. When none
    /// matches, the errors of the closest alternative are reported.
    fn one_of(&mut self, schema: &Schema, alts: &[Schema], v: &mut Value) {
        let candidates: Vec<&Schema> = match select_by_tag(alts, v) {
            Some(chosen) => chosen,
            None => alts.iter().collect(),
        };
        let passes: &[bool] = if self.coerce {
            &[false, true]
        } else {
            &[false]
        };
        let mut best: Option<(bool, Vec<ArgError>)> = None;
        for &coerce in passes {
            for alt in &candidates {
                if self.budget == 0 {
                    return self.error(ArgErrorKind::Invalid {
                        message: "the arguments are too deeply nested to check".into(),
                    });
                }
                let mut trial = v.clone();
                let mut sub = Validator {
                    coerce,
                    path: self.path.clone(),
                    errors: Vec::new(),
                    budget: self.budget,
                };
                sub.value(alt, &mut trial);
                self.budget = sub.budget;
                if sub.errors.is_empty() {
                    *v = trial;
                    return;
                }
                // An alternative whose outer shape matched beats one that
                // did not, whatever the counts.
                let here = format_path(&self.path);
                let shape_miss = sub.errors.iter().any(|e| e.path == here && e.is_type());
                let better = best.as_ref().is_none_or(|(miss, errs)| {
                    (shape_miss, sub.errors.len()) < (*miss, errs.len())
                });
                if better {
                    best = Some((shape_miss, sub.errors));
                }
            }
        }
        match best {
            Some((false, errors)) => self.errors.extend(errors),
            _ => self.type_error(schema, v),
        }
    }
}

/// The alternatives a tagged value can be: those whose `const` tag field
/// equals the value's, or the externally tagged one named by the value's
/// only key. `None` when the alternatives are not tagged that way.
fn select_by_tag<'a>(alts: &'a [Schema], v: &Value) -> Option<Vec<&'a Schema>> {
    let Value::Object(map) = v else {
        // A string can only be a unit variant: compare, do not recurse.
        let Value::String(s) = v else { return None };
        let consts: Vec<&Schema> = alts
            .iter()
            .filter(|a| matches!(a, Schema::Const { value, .. } if value == s))
            .collect();
        return (!consts.is_empty()).then_some(consts);
    };
    let objects: Vec<&ObjectSchema> = alts.iter().filter_map(Schema::as_object).collect();
    // Internally or adjacently tagged: a field every alternative has, as a const.
    let tag_of = |o: &ObjectSchema| {
        o.fields.iter().find_map(|f| match f.schema {
            Schema::Const { value, .. } => Some((f.name, *value)),
            _ => None,
        })
    };
    if objects.len() == alts.len()
        && let Some((tag, _)) = objects.first().and_then(|o| tag_of(o))
        && objects
            .iter()
            .all(|o| tag_of(o).is_some_and(|(t, _)| t == tag))
    {
        let sent = map.get(tag).and_then(Value::as_str)?;
        let chosen: Vec<&Schema> = alts
            .iter()
            .filter(|a| {
                a.as_object()
                    .and_then(tag_of)
                    .is_some_and(|(_, val)| val == sent)
            })
            .collect();
        return (!chosen.is_empty()).then_some(chosen);
    }
    // Externally tagged: `{"Variant": payload}` against single-field objects.
    if map.len() == 1 {
        let key = map.keys().next()?;
        let chosen: Vec<&Schema> = alts
            .iter()
            .filter(|a| {
                a.as_object().is_some_and(|o| {
                    o.fields.len() == 1 && o.flatten.is_empty() && o.fields[0].name == key
                })
            })
            .collect();
        if !chosen.is_empty() {
            return Some(chosen);
        }
    }
    None
}

/// `5.0` is an integer to a model; `5.5` is not.
#[allow(clippy::cast_possible_truncation, clippy::float_cmp)]
fn whole_float(f: f64) -> Option<i128> {
    (f.fract() == 0.0 && f.is_finite() && f.abs() < 1e38).then_some(f as i128)
}

fn first_duplicate(items: &[Value]) -> Option<(usize, usize)> {
    for (i, a) in items.iter().enumerate() {
        if let Some(j) = items[i + 1..].iter().position(|b| a == b) {
            return Some((i, i + 1 + j));
        }
    }
    None
}

/// Describes a JSON value for an error message: its type and, when short, its text.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) if s.chars().count() <= 40 => format!("string \"{s}\""),
        Value::String(s) => {
            let head: String = s.chars().take(37).collect();
            format!("string \"{head}...\"")
        }
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}
