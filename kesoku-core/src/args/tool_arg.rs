//! The [`ToolArg`] trait: a type's compile-time schema, implemented here for
//! the standard types and by `#[derive(ToolArg)]` for user types.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use crate::schema::targets::{Constructs, Refusals};
use crate::schema::tree::{ArraySchema, Schema, StringSchema};

/// A type that can be a tool argument: it has a JSON Schema known at
/// compile time.
///
/// Implemented for the scalar and container types of `std`, for
/// `serde_json::Value`, and by `#[derive(kesoku::ToolArg)]` for structs and
/// enums. Tool parameters also need `serde::Deserialize`.
///
/// ```
/// use kesoku_core::{Schema, ToolArg};
///
/// let json = <Option<[u8; 3]> as ToolArg>::SCHEMA.to_json();
/// assert_eq!(json["type"], serde_json::json!(["array", "null"]));
/// assert_eq!(json["minItems"], 3);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a tool argument: it has no JSON schema",
    label = "this type does not implement `kesoku::ToolArg`",
    note = "derive it: `#[derive(serde::Deserialize, kesoku::ToolArg)]` on your struct or enum",
    note = "supported out of the box: bool, integers, floats, char, String, PathBuf, Option, Vec, VecDeque, arrays, sets, maps with String keys, tuples, Box and serde_json::Value",
    note = "another crate's type: kesoku's features `uuid`, `chrono`, `url` and `duration` cover those crates; for others, give the schema where the type is used: `#[arg(schema = ...)]` on a tool parameter, `#[kesoku(schema = ...)]` on a field"
)]
pub trait ToolArg {
    /// The schema of this type, built at compile time.
    const SCHEMA: Schema;

    /// Whether `SCHEMA` describes exactly what the type's `Deserialize`
    /// accepts: every JSON value it decodes is valid against the schema.
    ///
    /// When all of a tool's parameters are exact, the runner decodes the
    /// arguments strictly first and skips the validator when that succeeds;
    /// otherwise it always validates first. The default, `false`, is always
    /// correct: set it only when a lenient `Deserialize` (one that accepts
    /// unknown fields, aliases, other types) cannot let through a value the
    /// schema rejects.
    const EXACT: bool = false;

    /// What the schema is built of that some provider refuses, for the
    /// compile-time check of `#[tool(targets(...))]`. The default reads
    /// `SCHEMA`'s own tree; containers add their items' (a named type's
    /// body is not read there), and `#[derive(ToolArg)]` its fields'.
    #[doc(hidden)]
    const __CONSTRUCTS: Constructs = Constructs::of(&Self::SCHEMA);

    /// Why each provider target refuses a parameter of this type (see
    /// `#[tool(targets(...))]`), worked out once per type.
    #[doc(hidden)]
    const __REFUSALS: Refusals = Self::__CONSTRUCTS.refusals();

    /// Whether a parameter of this type without a default is required:
    /// its schema does not take `null`. Worked out once per type, where
    /// each `#[tool]`'s schema constant only reads it (compile time).
    #[doc(hidden)]
    const __REQUIRED: bool = !matches!(Self::SCHEMA, Schema::Nullable(_));
}

macro_rules! signed_args {
    ($($t:ty),*) => {$(
        impl ToolArg for $t {
            #[allow(clippy::cast_sign_loss, clippy::cast_lossless)]
            const SCHEMA: Schema = Schema::Integer { minimum: <$t>::MIN as i128, maximum: <$t>::MAX as u128 };
            const EXACT: bool = true;
        }
    )*};
}
macro_rules! unsigned_args {
    ($($t:ty),*) => {$(
        impl ToolArg for $t {
            #[allow(clippy::cast_lossless)]
            const SCHEMA: Schema = Schema::Integer { minimum: 0, maximum: <$t>::MAX as u128 };
            const EXACT: bool = true;
        }
    )*};
}
signed_args!(i8, i16, i32, i64, isize);
unsigned_args!(u8, u16, u32, u64, usize);

impl ToolArg for u128 {
    const SCHEMA: Schema = Schema::Integer {
        minimum: 0,
        maximum: u128::MAX,
    };
}

impl ToolArg for i128 {
    #[allow(clippy::cast_sign_loss)]
    const SCHEMA: Schema = Schema::Integer {
        minimum: i128::MIN,
        maximum: i128::MAX as u128,
    };
    // Not `EXACT`, like `u128`: beyond 64 bits the validating path reads
    // numbers as floats, so a strict decode would accept what it rejects.
}

impl ToolArg for bool {
    const SCHEMA: Schema = Schema::Boolean;
    const EXACT: bool = true;
}
impl ToolArg for f32 {
    const SCHEMA: Schema = Schema::Number;
    const EXACT: bool = true;
}
impl ToolArg for f64 {
    const SCHEMA: Schema = Schema::Number;
    const EXACT: bool = true;
}

const STRING: Schema = Schema::String(StringSchema {
    min_length: None,
    max_length: None,
    format: None,
});

impl ToolArg for String {
    const SCHEMA: Schema = STRING;
    const EXACT: bool = true;
}
impl ToolArg for PathBuf {
    const SCHEMA: Schema = STRING;
    const EXACT: bool = true;
}
impl ToolArg for Box<str> {
    const SCHEMA: Schema = STRING;
    const EXACT: bool = true;
}
impl ToolArg for char {
    const SCHEMA: Schema = Schema::String(StringSchema {
        min_length: Some(1),
        max_length: Some(1),
        format: None,
    });
    // serde's `char` takes exactly one character, as the schema says.
    const EXACT: bool = true;
}
impl ToolArg for serde_json::Value {
    const SCHEMA: Schema = Schema::Any;
    const EXACT: bool = true;
}

impl<T: ToolArg> ToolArg for Option<T> {
    const SCHEMA: Schema = Schema::Nullable(&T::SCHEMA);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg + ?Sized> ToolArg for Box<T> {
    const SCHEMA: Schema = T::SCHEMA;
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = T::__CONSTRUCTS;
}

const fn array(items: &'static Schema, len: Option<u64>, unique_items: bool) -> Schema {
    Schema::Array(ArraySchema {
        items,
        min_items: len,
        max_items: len,
        unique_items,
    })
}

impl<T: ToolArg> ToolArg for Vec<T> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, false);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg> ToolArg for VecDeque<T> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, false);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg> ToolArg for [T] {
    const SCHEMA: Schema = array(&T::SCHEMA, None, false);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg, const N: usize> ToolArg for [T; N] {
    const SCHEMA: Schema = array(&T::SCHEMA, Some(N as u64), false);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
// Sets are not `EXACT`: serde drops the duplicates that `uniqueItems` rejects.
impl<T: ToolArg, S> ToolArg for HashSet<T, S> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, true);
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg> ToolArg for BTreeSet<T> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, true);
    const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT.with(T::__CONSTRUCTS);
}
impl<T: ToolArg, S> ToolArg for HashMap<String, T, S> {
    const SCHEMA: Schema = Schema::Map(&T::SCHEMA);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = MAP.with(T::__CONSTRUCTS);
}
impl<T: ToolArg> ToolArg for BTreeMap<String, T> {
    const SCHEMA: Schema = Schema::Map(&T::SCHEMA);
    const EXACT: bool = T::EXACT;
    const __CONSTRUCTS: Constructs = MAP.with(T::__CONSTRUCTS);
}

const MAP: Constructs = Constructs::NOT_OBJECT.union(Constructs::ROOT_MAP);

/// Whether every one of these types is [`EXACT`](ToolArg::EXACT): a
/// tuple's, or a tool's parameters' (when the fast path may be used).
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

macro_rules! tuple_args {
    ($($t:ident),+) => {
        impl<$($t: ToolArg),+> ToolArg for ($($t,)+) {
            const SCHEMA: Schema = Schema::Tuple(&[$($t::SCHEMA),+]);
            const EXACT: bool = all_exact(&[$($t::EXACT),+]);
            const __CONSTRUCTS: Constructs = Constructs::NOT_OBJECT$(.with($t::__CONSTRUCTS))+;
        }
    };
}
tuple_args!(A);
tuple_args!(A, B);
tuple_args!(A, B, C);
tuple_args!(A, B, C, D);
tuple_args!(A, B, C, D, E);
tuple_args!(A, B, C, D, E, F);
tuple_args!(A, B, C, D, E, F, G);
tuple_args!(A, B, C, D, E, F, G, H);
