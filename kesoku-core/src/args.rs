//! Decoding a JSON arguments object into a tool's typed parameters.
//!
//! [`Args`] is what `#[tool]`'s generated invoker calls: it validates the
//! whole object against the tool's schema first (so every problem is
//! reported at once, each with its JSON path), then hands out each
//! parameter through serde.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::decode::{Failed, Failure};
use serde_json::{Map, Value};

use crate::schema::{ToolSchema, quote_list};
use crate::validate::{Seg, Validator, describe, format_path};

/// What is wrong with one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgErrorKind {
    /// A required argument is absent.
    Missing {
        /// The argument's documented meaning, repeated to help the model.
        description: Option<&'static str>,
    },
    /// An argument the tool does not take.
    Unknown {
        /// The arguments the tool does take (or the object's fields).
        valid: Vec<&'static str>,
    },
    /// The value has the wrong JSON type.
    Type {
        /// What the schema wants, such as "an integer from 0 to 255".
        expected: String,
        /// What came, such as `string "abc"`.
        got: String,
    },
    /// The value has the right type but breaks a constraint.
    Invalid {
        /// What is wrong, in full.
        message: String,
    },
    /// The arguments are not a JSON object.
    NotAnObject {
        /// What came instead.
        got: String,
    },
}

/// One argument problem, located by its path (`points[2].x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// Where the problem is: the argument name, then fields and indexes.
    /// Empty for problems with the arguments object as a whole.
    pub path: String,
    /// What the problem is.
    pub kind: ArgErrorKind,
}

impl ArgError {
    pub(crate) fn is_type(&self) -> bool {
        matches!(self.kind, ArgErrorKind::Type { .. })
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        match &self.kind {
            ArgErrorKind::Missing { description } => {
                write!(f, "argument `{path}` is required")?;
                if let Some(d) = description {
                    write!(f, " ({d})")?;
                }
                Ok(())
            }
            ArgErrorKind::Unknown { valid } => {
                let name = path.rsplit(['.', '[']).next().unwrap_or(path);
                write!(f, "unknown argument `{path}`")?;
                if let Some(m) = crate::suggest(name, valid.iter().copied()) {
                    write!(f, "; did you mean `{m}`?")?;
                }
                if valid.is_empty() {
                    write!(f, "; no arguments are accepted here")
                } else {
                    write!(f, "; valid arguments are {}", quote_list(valid))
                }
            }
            ArgErrorKind::Type { expected, got } => {
                write!(f, "argument `{path}`: expected {expected}, got {got}")
            }
            ArgErrorKind::Invalid { message } => write!(f, "argument `{path}`: {message}"),
            ArgErrorKind::NotAnObject { got } => {
                write!(f, "the arguments must be a JSON object, got {got}")
            }
        }
    }
}

/// Every argument problem of one call.
///
/// Its `Display` lists them all, one per line, after the tool name, and is
/// what the model reads back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ArgsError {
    /// The tool that was called.
    pub tool: String,
    /// The problems, in argument order.
    pub errors: Vec<ArgError>,
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errors.as_slice() {
            [one] => write!(f, "invalid arguments for tool `{}`: {one}", self.tool),
            many => {
                write!(
                    f,
                    "invalid arguments for tool `{}` ({} problems):",
                    self.tool,
                    many.len()
                )?;
                for e in many {
                    write!(f, "\n- {e}")?;
                }
                Ok(())
            }
        }
    }
}

/// The decoder the generated invoker drives; see the module docs.
///
/// ```
/// # use kesoku_core::*;
/// # const S: ToolSchema = ToolSchema::new("t", "d",
/// #   ObjectSchema { fields: &[Field { name: "n", description: Some("A count."),
/// #   schema: &<u8 as ToolArg>::SCHEMA, required: true, default: None }], flatten: &[], description: None },
/// #   Location { file: "", line: 0, module_path: "" }).with_exact(true);
/// let mut args = Args::new(&S, serde_json::json!({"n": "7"})).unwrap();
/// assert_eq!(args.take::<u8>("n").unwrap(), 7);
///
/// let err = Args::new(&S, serde_json::json!({})).unwrap_err();
/// assert_eq!(err.to_string(), "invalid arguments for tool `t`: argument `n` is required (A count.)");
/// ```
#[derive(Debug)]
pub struct Args {
    tool: &'static str,
    /// The validated arguments: always an object.
    value: Value,
}

impl Args {
    /// Validates `args` (coercing quoted scalars when the tool allows it).
    /// `null` is taken as an empty object, since some models send it for
    /// tools without arguments.
    pub fn new(schema: &'static ToolSchema, args: Value) -> Result<Self, ArgsError> {
        let mut map = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ArgsError {
                    tool: schema.name.into(),
                    errors: vec![ArgError {
                        path: String::new(),
                        kind: ArgErrorKind::NotAnObject {
                            got: describe(&other),
                        },
                    }],
                });
            }
        };
        let mut v = Validator::new(schema.coerce);
        v.object(&schema.arguments, &mut map);
        if v.errors.is_empty() {
            Ok(Args {
                tool: schema.name,
                value: Value::Object(map),
            })
        } else {
            Err(ArgsError {
                tool: schema.name.into(),
                errors: v.errors,
            })
        }
    }

    fn field(&mut self, name: &str) -> Option<Value> {
        self.value.as_object_mut()?.remove(name)
    }

    /// Takes argument `name`; absent is `null` (so `Option` parameters are `None`).
    pub fn take<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<T, ArgsError> {
        let v = self.field(name).unwrap_or(Value::Null);
        self.decode(name, v)
    }

    /// Takes argument `name`, or `default()` when it is absent or `null`.
    pub fn take_or_else<T: DeserializeOwned>(
        &mut self,
        name: &'static str,
        default: impl FnOnce() -> T,
    ) -> Result<T, ArgsError> {
        match self.field(name) {
            None | Some(Value::Null) => Ok(default()),
            Some(v) => self.decode(name, v),
        }
    }

    /// The validated arguments object.
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// Why a tool's generated decoder rejected the validated object (only
    /// a hand-written `Deserialize` stricter than its schema can).
    pub(crate) fn rejected(&self, failed: &Failed) -> ArgsError {
        let (path, kind) = match failed.take() {
            Some(Failure::Decode(name, locate)) => {
                let mut path = vec![Seg::Key(name.into())];
                let message = match locate(&self.value[name]) {
                    Some(e) => {
                        path.extend(e.path().iter().filter_map(seg));
                        e.into_inner().to_string()
                    }
                    None => "the value could not be decoded".to_owned(),
                };
                (path, ArgErrorKind::Invalid { message })
            }
            Some(Failure::Missing(name)) => (
                vec![Seg::Key(name.into())],
                ArgErrorKind::Missing { description: None },
            ),
            None => (
                Vec::new(),
                ArgErrorKind::Invalid {
                    message: "the arguments could not be decoded".to_owned(),
                },
            ),
        };
        self.error(&path, kind)
    }

    /// Serde is the last word: the schema may not capture everything a
    /// hand-written `Deserialize` checks. Its errors keep their path.
    fn decode<T: DeserializeOwned>(&self, name: &'static str, v: Value) -> Result<T, ArgsError> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let mut path = vec![Seg::Key(name.into())];
            path.extend(e.path().iter().filter_map(seg));
            let message = e.into_inner().to_string();
            self.error(&path, ArgErrorKind::Invalid { message })
        })
    }

    fn error(&self, path: &[Seg], kind: ArgErrorKind) -> ArgsError {
        ArgsError {
            tool: self.tool.into(),
            errors: vec![ArgError {
                path: format_path(path),
                kind,
            }],
        }
    }
}

/// A serde path segment as one of ours.
fn seg(s: &serde_path_to_error::Segment) -> Option<Seg> {
    match s {
        serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
        serde_path_to_error::Segment::Map { key }
        | serde_path_to_error::Segment::Enum { variant: key } => Some(Seg::Key(key.clone().into())),
        serde_path_to_error::Segment::Unknown => None,
    }
}
