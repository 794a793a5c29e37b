//! The [`ToolArg`] trait: a type's compile-time schema, implemented here for
//! the standard types and by `#[derive(ToolArg)]` for user types.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;

use crate::schema::{ArraySchema, Schema, StringSchema};

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
    note = "supported out of the box: bool, integers, floats, char, String, PathBuf, Option, Vec, VecDeque, arrays, sets, maps with String keys, tuples, Box and serde_json::Value"
)]
pub trait ToolArg {
    /// The schema of this type, built at compile time.
    const SCHEMA: Schema;
}

macro_rules! signed_args {
    ($($t:ty),*) => {$(
        impl ToolArg for $t {
            #[allow(clippy::cast_sign_loss, clippy::cast_lossless)]
            const SCHEMA: Schema = Schema::Integer { minimum: <$t>::MIN as i128, maximum: <$t>::MAX as u128 };
        }
    )*};
}
macro_rules! unsigned_args {
    ($($t:ty),*) => {$(
        impl ToolArg for $t {
            #[allow(clippy::cast_lossless)]
            const SCHEMA: Schema = Schema::Integer { minimum: 0, maximum: <$t>::MAX as u128 };
        }
    )*};
}
signed_args!(i8, i16, i32, i64, isize);
unsigned_args!(u8, u16, u32, u64, u128, usize);

impl ToolArg for i128 {
    #[allow(clippy::cast_sign_loss)]
    const SCHEMA: Schema = Schema::Integer {
        minimum: i128::MIN,
        maximum: i128::MAX as u128,
    };
}

impl ToolArg for bool {
    const SCHEMA: Schema = Schema::Boolean;
}
impl ToolArg for f32 {
    const SCHEMA: Schema = Schema::Number;
}
impl ToolArg for f64 {
    const SCHEMA: Schema = Schema::Number;
}

const STRING: Schema = Schema::String(StringSchema {
    min_length: None,
    max_length: None,
    format: None,
});

impl ToolArg for String {
    const SCHEMA: Schema = STRING;
}
impl ToolArg for PathBuf {
    const SCHEMA: Schema = STRING;
}
impl ToolArg for Box<str> {
    const SCHEMA: Schema = STRING;
}
impl ToolArg for char {
    const SCHEMA: Schema = Schema::String(StringSchema {
        min_length: Some(1),
        max_length: Some(1),
        format: None,
    });
}
impl ToolArg for serde_json::Value {
    const SCHEMA: Schema = Schema::Any;
}

impl<T: ToolArg> ToolArg for Option<T> {
    const SCHEMA: Schema = Schema::Nullable(&T::SCHEMA);
}
impl<T: ToolArg + ?Sized> ToolArg for Box<T> {
    const SCHEMA: Schema = T::SCHEMA;
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
}
impl<T: ToolArg> ToolArg for VecDeque<T> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, false);
}
impl<T: ToolArg> ToolArg for [T] {
    const SCHEMA: Schema = array(&T::SCHEMA, None, false);
}
impl<T: ToolArg, const N: usize> ToolArg for [T; N] {
    const SCHEMA: Schema = array(&T::SCHEMA, Some(N as u64), false);
}
impl<T: ToolArg, S> ToolArg for HashSet<T, S> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, true);
}
impl<T: ToolArg> ToolArg for BTreeSet<T> {
    const SCHEMA: Schema = array(&T::SCHEMA, None, true);
}
impl<T: ToolArg, S> ToolArg for HashMap<String, T, S> {
    const SCHEMA: Schema = Schema::Map(&T::SCHEMA);
}
impl<T: ToolArg> ToolArg for BTreeMap<String, T> {
    const SCHEMA: Schema = Schema::Map(&T::SCHEMA);
}

macro_rules! tuple_args {
    ($($t:ident),+) => {
        impl<$($t: ToolArg),+> ToolArg for ($($t,)+) {
            const SCHEMA: Schema = Schema::Tuple(&[$($t::SCHEMA),+]);
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
