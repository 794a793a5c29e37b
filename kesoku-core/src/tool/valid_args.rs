//! The slow path: [`ValidArgs`], a call's arguments validated against the
//! tool's schema as a whole (every problem reported at once, each with its
//! JSON path, quoted scalars coerced), before the tool's generated
//! `prepare` decodes them. See `decode.rs` for the fast path it backs.

use serde_json::{Map, Value};

use crate::args::arg_error::{ArgError, ArgErrorKind, ArgsError};
use crate::args::validate::{Seg, Validator, describe, format_path};
use crate::schema::tool_schema::ToolSchema;
use crate::tool::decode::PrepareError;

/// A tool's arguments, validated: always a JSON object.
#[derive(Debug)]
pub(crate) struct ValidArgs {
    tool: &'static str,
    value: Value,
}

impl ValidArgs {
    /// Validates `args` (coercing quoted scalars when the tool allows it).
    /// `null` is taken as an empty object, since some models send it for
    /// tools without arguments.
    pub(crate) fn new(schema: &'static ToolSchema, args: Value) -> Result<Self, ArgsError> {
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
            Ok(ValidArgs {
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

    /// The validated arguments object.
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// Why the tool's generated decoder refused the validated object. Only
    /// a hand-written `Deserialize` stricter than its schema can; serde is
    /// then the last word, and its error keeps its path.
    pub(crate) fn rejected(&self, why: &PrepareError) -> ArgsError {
        let (path, kind) = match why {
            PrepareError::Invalid(name, locate) => {
                let mut path = vec![Seg::Key((*name).into())];
                let message = match locate(&self.value[*name]) {
                    Some(e) => {
                        path.extend(e.path().iter().filter_map(seg));
                        e.into_inner().to_string()
                    }
                    None => "the value could not be decoded".to_owned(),
                };
                (path, ArgErrorKind::Invalid { message })
            }
            PrepareError::Missing(name) => (
                vec![Seg::Key((*name).into())],
                ArgErrorKind::Missing { description: None },
            ),
            _ => (
                Vec::new(),
                ArgErrorKind::Invalid {
                    message: "the arguments could not be decoded".to_owned(),
                },
            ),
        };
        ArgsError {
            tool: self.tool.into(),
            errors: vec![ArgError {
                path: format_path(&path),
                kind,
            }],
        }
    }
}

/// A serde path segment as one of ours.
pub(crate) fn seg(s: &serde_path_to_error::Segment) -> Option<Seg> {
    match s {
        serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
        serde_path_to_error::Segment::Map { key }
        | serde_path_to_error::Segment::Enum { variant: key } => Some(Seg::Key(key.clone().into())),
        serde_path_to_error::Segment::Unknown => None,
    }
}
