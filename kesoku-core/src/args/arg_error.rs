//! The argument-error model: [`ArgsError`], every problem of one call's
//! arguments, each an [`ArgError`] located by its JSON path. Its `Display`
//! is what the model reads back.

use std::borrow::Cow;
use std::fmt;

use crate::schema::tree::quote_list;

/// What is wrong with one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgErrorKind {
    /// A required argument is absent.
    Missing {
        /// The argument's documented meaning, repeated to help the model.
        description: Option<Cow<'static, str>>,
    },
    /// An argument the tool does not take.
    Unknown {
        /// The arguments the tool does take (or the object's fields).
        valid: Vec<Cow<'static, str>>,
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
                if let Some(m) = crate::suggest::suggest(name, valid.iter().map(AsRef::as_ref)) {
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
            ArgErrorKind::Invalid { message } if path.is_empty() => {
                write!(f, "the arguments: {message}")
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
