//! Validation of a [`DynamicTool`](crate::DynamicTool)'s arguments against a
//! JSON Schema known only at run time (an MCP server's, a plugin's), with
//! the same path-named [`ArgError`]s as the compile-time validator gives.

use std::borrow::Cow;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{JsonType, ValidationError, Validator};
use serde_json::Value;

use crate::args::arg_error::{ArgError, ArgErrorKind};
use crate::args::validate::describe;

/// A compiled arguments schema.
pub(crate) struct DynamicSchema {
    validator: Validator,
    /// The top-level properties, for "valid arguments are ..." hints.
    names: Vec<Cow<'static, str>>,
    /// Their descriptions, repeated when one is missing.
    descriptions: Vec<Option<String>>,
}

impl DynamicSchema {
    /// Compiles `schema`, or says why it cannot be used.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
        Ok(Self::with(validator, schema))
    }

    /// Compiles `schema` checking `format`s too (`date-time`, `uuid`,
    /// `uri`...), which draft 2020-12 leaves as annotations: for a typed
    /// answer, whose shape is kesoku's own and whose formats its types
    /// parse strictly.
    pub(crate) fn compile_with_formats(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| e.to_string())?;
        Ok(Self::with(validator, schema))
    }

    fn with(validator: Validator, schema: &Value) -> Self {
        let properties = schema.get("properties").and_then(Value::as_object);
        let (names, descriptions) = properties
            .into_iter()
            .flatten()
            .map(|(name, p)| {
                let description = p.get("description").and_then(Value::as_str);
                (Cow::Owned(name.clone()), description.map(str::to_owned))
            })
            .unzip();
        DynamicSchema {
            validator,
            names,
            descriptions,
        }
    }

    /// Every problem of `args`, in argument order (as the schema lists
    /// the properties; unknown arguments last), as for a `#[tool]`.
    pub(crate) fn check(&self, args: &Value) -> Vec<ArgError> {
        let mut errors: Vec<ArgError> = self
            .validator
            .iter_errors(args)
            .flat_map(|e| self.convert(&e))
            .collect();
        errors.sort_by_key(|e| {
            let top = e.path.split(['.', '[']).next().unwrap_or_default();
            self.names
                .iter()
                .position(|n| n == top)
                .unwrap_or(usize::MAX)
        });
        errors
    }

    fn convert(&self, e: &ValidationError<'_>) -> Vec<ArgError> {
        let path = format_path(e);
        let at_top = path.is_empty();
        let child = |name: &str| {
            if at_top {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            }
        };
        match e.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                let description = at_top
                    .then(|| self.description(&name))
                    .flatten()
                    .map(|d| Cow::Owned(d.to_owned()));
                vec![ArgError {
                    path: child(&name),
                    kind: ArgErrorKind::Missing { description },
                }]
            }
            ValidationErrorKind::AdditionalProperties { unexpected } if at_top => unexpected
                .iter()
                .map(|name| ArgError {
                    path: child(name),
                    kind: ArgErrorKind::Unknown {
                        valid: self.names.clone(),
                    },
                })
                .collect(),
            ValidationErrorKind::Type { kind } => vec![ArgError {
                path,
                kind: ArgErrorKind::Type {
                    expected: expected(kind),
                    got: describe(e.instance()),
                },
            }],
            // Masked: the message names the rule, not the value, which may
            // be long.
            _ => vec![ArgError {
                path,
                kind: ArgErrorKind::Invalid {
                    message: e.masked().to_string(),
                },
            }],
        }
    }

    fn description(&self, name: &str) -> Option<&str> {
        let i = self.names.iter().position(|n| n == name)?;
        self.descriptions[i].as_deref()
    }
}

/// `/points/2/x` as `points[2].x`, the path style of every argument error.
fn format_path(e: &ValidationError<'_>) -> String {
    let mut out = String::new();
    for seg in e.instance_path() {
        match seg {
            LocationSegment::Property(p) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&p);
            }
            LocationSegment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

fn expected(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => type_name(*t).to_owned(),
        TypeKind::Multiple(set) => {
            let names: Vec<&str> = set.iter().map(type_name).collect();
            names.join(" or ")
        }
    }
}

fn type_name(t: JsonType) -> &'static str {
    match t {
        JsonType::Array => "an array",
        JsonType::Boolean => "a boolean",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> DynamicSchema {
        DynamicSchema::compile(&json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first integer."},
                "b": {"type": "integer", "description": "The second integer."},
                "points": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"x": {"type": "number", "minimum": 0}},
                    "required": ["x"]
                }}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    fn messages(args: &Value) -> Vec<String> {
        schema()
            .check(args)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn names_each_problem_by_its_path() {
        assert!(messages(&json!({"a": 1, "b": 2})).is_empty());
        assert_eq!(
            messages(&json!({"a": 1})),
            ["argument `b` is required (The second integer.)"]
        );
        assert_eq!(
            messages(&json!({"a": "x", "b": 2, "points": [{"x": 1}, {"x": -1}, {}]})),
            [
                "argument `a`: expected an integer, got string \"x\"",
                "argument `points[1].x`: value is less than the minimum of 0",
                "argument `points[2].x` is required",
            ]
        );
        assert_eq!(
            messages(&json!({"a": 1, "b": 2, "bb": 3})),
            ["unknown argument `bb`; did you mean `b`?; valid arguments are `a`, `b`, `points`"]
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_is_named() {
        let err =
            DynamicSchema::compile(&json!({"type": "object", "properties": {"a": {"type": 5}}}))
                .err()
                .unwrap();
        assert!(err.contains('5'), "{err}");
    }
}
