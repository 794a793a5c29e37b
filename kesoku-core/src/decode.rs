//! Decoding a call's arguments straight into a tool's parameters.
//!
//! `#[tool]` generates one serde [`Visitor`] per tool that reads the
//! arguments object into the parameters' own types. The runner uses it in
//! two ways:
//!
//! - **Fast path:** strictly, on the text or JSON as it came. When every
//!   parameter type is [`ToolArg::EXACT`](crate::ToolArg::EXACT), a strict
//!   decode that succeeds is exactly what the validator would have accepted,
//!   so the validator and the intermediate JSON tree are skipped.
//! - **Slow path:** anything the fast path refuses (a missing argument, a
//!   quoted number to coerce, an unknown key, invalid JSON) goes through
//!   [`Args`](crate::Args), which validates the whole object and reports
//!   every problem with its JSON path, then decodes the validated object
//!   with the same visitor.

use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde_json::Value;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::schema::Field;
use crate::tool::Invocation;

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

    /// Decodes strictly with a tool's generated visitor: a JSON object with
    /// only known keys, each once, and every value of its parameter's type.
    /// `None` means "not strictly valid": the caller takes the slow path,
    /// which explains why, so the reason is not kept here.
    pub fn decode<V: Visitor<'a>>(self, visitor: V) -> Option<V::Value> {
        match self {
            RawArgs::Text(text) => {
                let mut de = serde_json::Deserializer::from_str(text);
                let value = de::Deserializer::deserialize_map(&mut de, visitor).ok()?;
                de.end().ok()?;
                Some(value)
            }
            RawArgs::Json(value @ Value::Object(_)) => {
                de::Deserializer::deserialize_map(value, visitor).ok()
            }
            RawArgs::Json(_) => None,
        }
    }
}

/// What the fast path made of a call.
pub enum Fast {
    /// Decoded and injected: ready to run.
    Ready(Invocation),
    /// Decoded, but a newer user message arrived, so it must not start.
    Interrupted,
    /// Decoded, but an injected parameter could not be produced.
    Failed(ToolError),
    /// Not strictly valid: take the validating slow path.
    Fallback,
}

impl From<Result<Invocation, ToolError>> for Fast {
    fn from(r: Result<Invocation, ToolError>) -> Self {
        match r {
            Ok(invocation) => Fast::Ready(invocation),
            Err(e) => Fast::Failed(e),
        }
    }
}

/// The generated fast path of a `#[tool]`: decodes strictly, asks whether
/// the call was interrupted (only once it decoded), then injects.
pub type FastFn = fn(RawArgs<'_>, &ToolContext, &dyn Fn() -> bool) -> Fast;

/// Whether every one of a tool's parameter types is
/// [`EXACT`](ToolArg::EXACT), so its fast path may be used.
pub const fn all_exact(exact: &[bool]) -> bool {
    let mut i = 0;
    while i < exact.len() {
        if !exact[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Reads one key as the index of a parameter name; unknown keys fail.
#[derive(Clone, Copy)]
pub struct Key(pub &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = usize;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Key {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an argument name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        self.0
            .iter()
            .position(|name| *name == key)
            .ok_or_else(|| E::custom(format_args!("unknown argument `{key}`")))
    }
}

/// The visitor of a tool without model parameters: an empty object.
#[derive(Clone, Copy)]
pub struct NoArgs;

impl<'de> Visitor<'de> for NoArgs {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an empty arguments object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match map.next_key_seed(Key(&[]))? {
            None => Ok(()),
            Some(_) => Err(de::Error::custom("no arguments are accepted")),
        }
    }
}

/// Reads the next value into `slot`; a key seen twice is an error.
pub fn fill<'de, T: DeserializeOwned, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::custom(format_args!(
            "argument `{name}` appears twice"
        )));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// The value of an absent parameter without a default: `None` for an
/// optional one (an `Option`), otherwise a missing-argument error.
///
/// It reads `field` from the tool's schema constant rather than asking
/// `T: ToolArg` again, so an unmet bound is reported once, there.
pub fn absent<T: DeserializeOwned, E: de::Error>(field: &Field) -> Result<T, E> {
    if field.required {
        Err(E::missing_field(field.name))
    } else {
        T::deserialize(de::value::UnitDeserializer::<E>::new())
    }
}

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
    struct Ab;
    impl<'de> Visitor<'de> for Ab {
        type Value = (i64, Option<String>);
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("arguments")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut a, mut b) = (None, None);
            while let Some(i) = map.next_key_seed(Key(&["a", "b"]))? {
                match i {
                    0 => fill(&mut a, &mut map, "a")?,
                    _ => fill(&mut b, &mut map, "b")?,
                }
            }
            let a = match a {
                Some(a) => a,
                None => absent::<i64, A::Error>(&FIELDS[0])?,
            };
            let b = match b {
                Some(b) => b,
                None => absent::<Option<String>, A::Error>(&FIELDS[1])?,
            };
            Ok((a, b))
        }
    }

    #[test]
    fn strict_text_and_json() {
        assert_eq!(
            RawArgs::Text(r#" {"b": "x", "a": 1} "#).decode(Ab),
            Some((1, Some("x".into())))
        );
        assert_eq!(RawArgs::Text(r#"{"a": 1}"#).decode(Ab), Some((1, None)));
        let v = serde_json::json!({"a": 2, "b": null});
        assert_eq!(RawArgs::Json(&v).decode(Ab), Some((2, None)));
    }

    #[test]
    fn anything_not_strictly_valid_falls_back() {
        for text in [
            r#"{"b": "x"}"#,        // missing required
            r#"{"a": "1"}"#,        // needs coercion
            r#"{"a": 1, "c": 2}"#,  // unknown key
            r#"{"a": 1, "a": 2}"#,  // duplicate key
            r#"{"a": 1} trailing"#, // trailing text
            r#"{"a": 1"#,           // truncated
            r"[1]",                 // not an object
            r"null",                // the slow path reads null as {}
        ] {
            assert_eq!(RawArgs::Text(text).decode(Ab), None, "{text}");
        }
        assert_eq!(RawArgs::Json(&Value::Null).decode(Ab), None);
    }
}
