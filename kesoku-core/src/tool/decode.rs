//! Decoding a call's arguments straight into a tool's parameters.
//!
//! A tool's calls are prepared (see `call.rs`) by splitting the arguments
//! object by parameter ([`Parsed`]), asking whether the call was
//! interrupted ([`gate`]), decoding each value into its parameter's type
//! ([`field`]) and producing the injected parameters. Nothing here is
//! generic over a serde deserializer, so a tool costs little compile time:
//! the generic code is per parameter *type*, shared by every tool that uses
//! it. The runner prepares a call in two ways:
//!
//! - **Fast path:** strictly, on the text or JSON as it came. When every
//!   parameter type is [`ToolArg::EXACT`](crate::ToolArg::EXACT), a strict
//!   decode that succeeds is exactly what the validator would have accepted,
//!   so the validator and the intermediate JSON tree are skipped.
//! - **Slow path:** anything the fast path refuses (a missing argument, a
//!   quoted number to coerce, an unknown key, invalid JSON) goes through
//!   `ValidArgs` (`valid_args.rs`), which validates the whole object and
//!   reports every problem with its JSON path; the same preparation then
//!   decodes the validated object.
//!
//! Either way, a call that does not come out of it ready to run comes out
//! as one [`PrepareError`], which says why.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::schema::tree::Field;
use crate::tool::context::ToolContext;
use crate::tool::error::ToolError;
use crate::tool::invocation::Invocation;

/// A call's arguments as they came: text still to parse, or parsed JSON.
#[derive(Debug, Clone, Copy)]
pub enum RawArgs<'a> {
    /// A string holding JSON, as `OpenAI` sends it.
    Text(&'a str),
    /// A JSON value, as Anthropic and Gemini send it.
    Json(&'a Value),
}

impl<'a> RawArgs<'a> {
    /// The arguments of a request: its string, or its JSON value.
    pub fn of(arguments: &'a Value) -> Self {
        match arguments {
            Value::String(text) => RawArgs::Text(text),
            other => RawArgs::Json(other),
        }
    }
}

/// One argument's value, not decoded yet.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// Its JSON text, inside the arguments' text.
    Text(&'a RawValue),
    /// Its parsed JSON.
    Json(&'a Value),
}

impl Arg<'_> {
    /// Decodes the value strictly into `T`.
    fn decode<T: DeserializeOwned>(self) -> Option<T> {
        match self {
            // A value parsed on its own gets serde_json's whole nesting
            // budget, one level more than inside the arguments object: the
            // slow path's limit, so refuse what it would refuse.
            Arg::Text(raw) if nests_deeper_than(raw.get(), 126) => None,
            Arg::Text(raw) => serde_json::from_str(raw.get()).ok(),
            Arg::Json(value) => T::deserialize(value).ok(),
        }
    }
}

/// Whether `json` (valid JSON) nests arrays and objects more than `limit`
/// deep. Only long values can, so short ones are not scanned.
fn nests_deeper_than(json: &str, limit: usize) -> bool {
    if json.len() <= 2 * limit {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0_usize, false, false);
    for b in json.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Why a tool's generated `prepare` did not produce a call: the one
/// outcome type of both paths. The first three say the arguments are not
/// strictly valid (the fast path then hands the call to the validator,
/// which names every problem); the last two are final.
#[derive(Debug)]
pub enum PrepareError {
    /// Not one JSON object of known keys, each once, with nothing after it.
    Malformed,
    /// The required argument of this name is absent.
    Missing(&'static str),
    /// The argument of this name did not decode into its type; the
    /// [`Locate`] finds where inside it.
    Invalid(&'static str, Locate),
    /// The arguments decoded, but a newer user message arrived: the call
    /// must not start.
    Interrupted,
    /// The arguments decoded, but an injected parameter could not be
    /// produced. Boxed: every parameter's decode returns this type, so it
    /// stays three words.
    Inject(Box<ToolError>),
}

impl PrepareError {
    /// Whether the arguments were refused, rather than the call stopped.
    pub(crate) fn is_argument_error(&self) -> bool {
        matches!(
            self,
            PrepareError::Malformed | PrepareError::Missing(_) | PrepareError::Invalid(..)
        )
    }
}

impl From<ToolError> for PrepareError {
    fn from(e: ToolError) -> Self {
        PrepareError::Inject(Box::new(e))
    }
}

/// The arguments object, split into one raw value per parameter, checked
/// to have only known keys, each once. Not generic: every tool shares it.
pub struct Parsed<'a> {
    fields: &'static [Field],
    values: Values<'a>,
}

/// Most tools have a few parameters: no allocation for up to 16. It lives
/// on the stack for one call, so the inline variant's size is the point.
#[allow(clippy::large_enum_variant)]
enum Values<'a> {
    Inline([Option<Arg<'a>>; 16]),
    Heap(Vec<Option<Arg<'a>>>),
}

impl<'a> Parsed<'a> {
    /// Splits `args` by `fields` (a tool's schema fields, in order).
    /// `Err` if they are not one JSON object with nothing after it, or
    /// have an unknown or repeated key.
    pub fn new(args: RawArgs<'a>, fields: &'static [Field]) -> Result<Self, PrepareError> {
        let values = if fields.len() <= 16 {
            Values::Inline([None; 16])
        } else {
            Values::Heap(vec![None; fields.len()])
        };
        let mut parsed = Parsed { fields, values };
        match args {
            RawArgs::Text(text) => {
                let mut de = serde_json::Deserializer::from_str(text);
                de::Deserializer::deserialize_map(&mut de, Entries(&mut parsed))
                    .map_err(|_| PrepareError::Malformed)?;
                de.end().map_err(|_| PrepareError::Malformed)?;
            }
            RawArgs::Json(Value::Object(map)) => {
                for (key, value) in map {
                    parsed.set(key, Arg::Json(value))?;
                }
            }
            RawArgs::Json(_) => return Err(PrepareError::Malformed),
        }
        Ok(parsed)
    }

    fn slots(&mut self) -> &mut [Option<Arg<'a>>] {
        match &mut self.values {
            Values::Inline(a) => a,
            Values::Heap(v) => v,
        }
    }

    fn set(&mut self, key: &str, arg: Arg<'a>) -> Result<(), PrepareError> {
        let i = self
            .fields
            .iter()
            .position(|f| f.name == key)
            .ok_or(PrepareError::Malformed)?;
        let slot = &mut self.slots()[i];
        if slot.is_some() {
            return Err(PrepareError::Malformed);
        }
        *slot = Some(arg);
        Ok(())
    }

    fn get(&self, i: usize) -> Option<Arg<'a>> {
        match &self.values {
            Values::Inline(a) => a.get(i).copied().flatten(),
            Values::Heap(v) => v.get(i).copied().flatten(),
        }
    }
}

/// Walks an object's text, handing each value over as raw JSON.
struct Entries<'p, 'a>(&'p mut Parsed<'a>);

impl<'a> Visitor<'a> for Entries<'_, 'a> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an arguments object")
    }
    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let raw: &'a RawValue = map.next_value()?;
            self.0
                .set(&key, Arg::Text(raw))
                .map_err(|_| de::Error::custom("unknown or repeated key"))?;
        }
        Ok(())
    }
}

/// A key, borrowed from the text unless it has escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an argument name")
    }
    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }
}

/// Finds where inside one argument's JSON its type's `Deserialize` failed:
/// a second, tracked decode of that one argument, run only on failure, so
/// the common path pays nothing for it.
pub type Locate = fn(&Value) -> Option<serde_path_to_error::Error<serde_json::Error>>;

fn locate<T: DeserializeOwned>(
    value: &Value,
) -> Option<serde_path_to_error::Error<serde_json::Error>> {
    serde_path_to_error::deserialize::<_, T>(value).err()
}

/// Parameter `i`: its value decoded into `T`, or, when absent, `None` for
/// an optional parameter (an `Option`) and an error for a required one.
///
/// Whether it is required comes from the schema's field, not from asking
/// `T: ToolArg` again, so an unmet bound is reported once, on the schema.
pub fn field<T: DeserializeOwned>(args: &Parsed<'_>, i: usize) -> Result<T, PrepareError> {
    let f = &args.fields[i];
    match args.get(i) {
        Some(arg) => decode(arg, f.name),
        None if f.required => Err(PrepareError::Missing(f.name)),
        // As the slow path always did: an absent argument reads as `null`.
        None => decode(Arg::Json(&Value::Null), f.name),
    }
}

/// Parameter `i` of a parameter with a default: `None` when absent or
/// `null`, for the caller to fill in the default.
pub fn field_or_default<T: DeserializeOwned>(
    args: &Parsed<'_>,
    i: usize,
) -> Result<Option<T>, PrepareError> {
    match args.get(i) {
        Some(arg) => decode::<Option<T>>(arg, args.fields[i].name),
        None => Ok(None),
    }
}

fn decode<T: DeserializeOwned>(arg: Arg<'_>, name: &'static str) -> Result<T, PrepareError> {
    arg.decode().ok_or(PrepareError::Invalid(name, locate::<T>))
}

/// The interruption check between decoding and injecting.
pub fn gate(interrupted: Option<&dyn Fn() -> bool>) -> Result<(), PrepareError> {
    match interrupted {
        Some(f) if f() => Err(PrepareError::Interrupted),
        _ => Ok(()),
    }
}

/// The function `#[tool]` generates for the calls of a tool that the code
/// shared per signature cannot take (an `async fn`, a `&ToolContext`
/// parameter; see `call.rs`): splits the arguments by parameter, asks the
/// interruption check if there is one (after the JSON is known to be an
/// object of known keys, before any user code: the slow path's order),
/// decodes the parameters, produces the injected ones, and returns the call
/// ready to run. kesoku-core calls it on the strict fast path, and on the
/// validated object on the slow path.
pub type PrepareFn =
    fn(RawArgs<'_>, &ToolContext, Option<&dyn Fn() -> bool>) -> Result<Invocation, PrepareError>;

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: [Field; 2] = [
        Field {
            name: "a",
            description: None,
            schema: &<i64 as crate::ToolArg>::SCHEMA,
            required: true,
            default: None,
        },
        Field {
            name: "b",
            description: None,
            schema: &<Option<String> as crate::ToolArg>::SCHEMA,
            required: false,
            default: None,
        },
    ];

    /// A hand-written twin of what `#[tool]` generates for `(a: i64, b: Option<String>)`.
    fn ab(args: RawArgs<'_>) -> Result<(i64, Option<String>), PrepareError> {
        let args = Parsed::new(args, &FIELDS)?;
        Ok((field(&args, 0)?, field(&args, 1)?))
    }

    fn text(s: &str) -> Option<(i64, Option<String>)> {
        ab(RawArgs::Text(s)).ok()
    }

    #[test]
    fn the_error_of_every_parameter_decode_stays_small() {
        assert!(std::mem::size_of::<PrepareError>() <= 4 * std::mem::size_of::<usize>());
    }

    #[test]
    fn strict_text_and_json() {
        assert_eq!(text(r#" {"b": "x", "a": 1} "#), Some((1, Some("x".into()))));
        assert_eq!(text(r#"{"a": 1}"#), Some((1, None)));
        assert_eq!(text(r#"{"\u0061": 1}"#), Some((1, None)));
        let v = serde_json::json!({"a": 2, "b": null});
        assert_eq!(ab(RawArgs::Json(&v)).ok(), Some((2, None)));
    }

    #[test]
    fn anything_not_strictly_valid_falls_back() {
        for s in [
            r#"{"b": "x"}"#,        // missing required
            r#"{"a": "1"}"#,        // needs coercion
            r#"{"a": 1, "c": 2}"#,  // unknown key
            r#"{"a": 1, "a": 2}"#,  // duplicate key
            r#"{"a": 1} trailing"#, // trailing text
            r#"{"a": 1"#,           // truncated
            r"[1]",                 // not an object
            r"null",                // the slow path reads null as {}
        ] {
            assert_eq!(text(s), None, "{s}");
        }
        assert!(matches!(
            ab(RawArgs::Json(&Value::Null)),
            Err(PrepareError::Malformed)
        ));
    }

    #[test]
    fn failures_say_which_argument() {
        let Err(PrepareError::Invalid("a", locate)) = ab(RawArgs::Text(r#"{"a": [1]}"#)) else {
            panic!("a decode failure of `a`");
        };
        assert!(locate(&serde_json::json!([1])).is_some());
        assert!(locate(&serde_json::json!(1)).is_none());

        assert!(matches!(
            ab(RawArgs::Text("{}")),
            Err(PrepareError::Missing("a"))
        ));
    }
}
