//! What each provider refuses, checked when a tool is compiled: the
//! [`Target`]s a tool declares with `#[tool(targets(...))]`, and the
//! constructs a parameter's schema is built of ([`Constructs`], a constant
//! every `ToolArg` carries). A parameter whose constructs a declared
//! target refuses fails the build, with the message [`Constructs::refused`]
//! gives, spanned on the parameter.
//!
//! The refusals are exactly the constructs whose lowering
//! (`kesoku_core::lowering`) the provider would reject
//! or misread (`Severity::Unsupported`). What a lowering only loses in
//! hints (a `format`, a bound moved into the description) stays a warning
//! in its report.

use super::tree::{ObjectSchema, Schema};

/// A provider's flavour of tool schema that a tool can declare it must
/// work with: `#[tool(targets(gemini, openai_strict))]`.
///
/// ```
/// use kesoku_core::Target;
///
/// assert_eq!(Target::from_name("openai_strict"), Some(Target::OpenAiStrict));
/// assert_eq!(Target::Gemini.name(), "gemini");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// `anthropic`: Claude's `input_schema`, any JSON Schema with an object
    /// root.
    Anthropic,
    /// `anthropic_structured`: Claude's strict tools and structured
    /// outputs: every object closed, no value of any type, no recursion.
    AnthropicStructured,
    /// `openai`: OpenAI's `parameters` without `strict`.
    OpenAi,
    /// `openai_strict`: OpenAI's `parameters` with `"strict": true`: every
    /// object closed and every schema typed.
    OpenAiStrict,
    /// `gemini`: Gemini's `parameters`, the OpenAPI 3.0 subset that every
    /// Gemini model and Vertex AI take: no maps, no recursion.
    Gemini,
    /// `gemini_json_schema`: Gemini's `parametersJsonSchema` (the Gemini
    /// backend's default), ordinary JSON Schema.
    GeminiJsonSchema,
    /// `mcp`: an MCP server's `inputSchema`.
    Mcp,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 7] = [
        Target::Anthropic,
        Target::AnthropicStructured,
        Target::OpenAi,
        Target::OpenAiStrict,
        Target::Gemini,
        Target::GeminiJsonSchema,
        Target::Mcp,
    ];

    /// The name `targets(...)` spells it with.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Anthropic => "anthropic",
            Target::AnthropicStructured => "anthropic_structured",
            Target::OpenAi => "openai",
            Target::OpenAiStrict => "openai_strict",
            Target::Gemini => "gemini",
            Target::GeminiJsonSchema => "gemini_json_schema",
            Target::Mcp => "mcp",
        }
    }

    /// The target named `name`, as `targets(...)` spells it.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The constructs of a schema that some provider refuses, as a set; a
/// constant of every [`ToolArg`](crate::ToolArg). Not a public API: the
/// macros' expansions use it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Constructs(u8);

impl Constructs {
    /// Nothing any provider refuses.
    pub const NONE: Constructs = Constructs(0);
    /// A value of any type (`serde_json::Value`, a field read by
    /// `deserialize_with`): a schema without a `type`.
    pub const ANY: Constructs = Constructs(1);
    /// Free-form keys (`HashMap`, `BTreeMap`): an object without listed
    /// properties, with `additionalProperties`.
    pub const MAP: Constructs = Constructs(1 << 1);
    /// An object with listed properties that takes other keys too (a
    /// flattened map, `Option` or enum).
    pub const OPEN: Constructs = Constructs(1 << 2);
    /// A type that contains itself: a `$ref`.
    pub const RECURSIVE: Constructs = Constructs(1 << 3);
    /// The type's own schema is not an object: flattened, it opens the
    /// object it is flattened into. Only about the root, so not passed on
    /// to an enclosing type by [`with`](Self::with).
    pub const NOT_OBJECT: Constructs = Constructs(1 << 4);
    /// The type's own schema is a map: a [`MAP`](Self::MAP) as a field,
    /// but flattened, only an [`OPEN`](Self::OPEN) object.
    pub const ROOT_MAP: Constructs = Constructs(1 << 5);

    const ROOT: u8 = Self::NOT_OBJECT.0 | Self::ROOT_MAP.0;

    /// These and those of `inner`, a field's type: its root-only
    /// constructs become what they are inside another type.
    #[must_use]
    pub const fn with(self, inner: Constructs) -> Constructs {
        let map = if inner.contains(Self::ROOT_MAP) {
            Self::MAP.0
        } else {
            0
        };
        Constructs(self.0 | (inner.0 & !Self::ROOT) | map)
    }

    /// These and `other`'s, all of them.
    #[must_use]
    pub const fn union(self, other: Constructs) -> Constructs {
        Constructs(self.0 | other.0)
    }

    /// A field of this type, flattened into an object: what it adds to it
    /// (a type that is not an object only opens it).
    #[must_use]
    pub const fn flattened(self) -> Constructs {
        // What is not an object becomes `additionalProperties` (a map's
        // values, or any value), which no target reads further than
        // whether it is there.
        if self.contains(Self::NOT_OBJECT) {
            Self::OPEN
        } else {
            Constructs(self.0 & !Self::ROOT)
        }
    }

    /// Whether every construct of `other` is here.
    pub const fn contains(self, other: Constructs) -> bool {
        self.0 & other.0 == other.0
    }

    /// What `schema`'s own tree is built of. A [`Schema::Named`] type's
    /// body is not read (it is a function, which constant evaluation
    /// cannot call): `#[derive(ToolArg)]` adds its fields' constructs to
    /// the type's own.
    pub const fn of(schema: &Schema) -> Constructs {
        match schema {
            Schema::Map(values) => Constructs(Self::ROOT).union(Self::inside(values)),
            Schema::Object(object) => match Self::object(object) {
                (found, true) => found.union(Self::ROOT_MAP),
                (found, false) => found,
            },
            Schema::Named(_) => Self::NONE,
            _ => Self::NOT_OBJECT.union(Self::inside(schema)),
        }
    }

    const fn inside(schema: &Schema) -> Constructs {
        match schema {
            Schema::Any => Self::ANY,
            Schema::Boolean
            | Schema::Integer { .. }
            | Schema::Number
            | Schema::String(_)
            | Schema::Enum(_)
            | Schema::Const { .. }
            | Schema::Named(_) => Self::NONE,
            Schema::Array(array) => Self::inside(array.items),
            Schema::Map(values) => Self::MAP.union(Self::inside(values)),
            Schema::Nullable(inner) => Self::inside(inner),
            Schema::Tuple(items) | Schema::OneOf(items) => Self::all(items),
            Schema::Object(object) => {
                let (found, map) = Self::object(object);
                if map { found.union(Self::MAP) } else { found }
            }
        }
    }

    /// An object's constructs, and whether it is a map: it takes other
    /// keys and lists none (a map only at its own root: flattened into
    /// an object with properties, it only opens that).
    const fn object(object: &ObjectSchema) -> (Constructs, bool) {
        let mut found = Self::NONE;
        // Whether the object lists any property (a flattened named type is
        // taken to: a derived struct has fields).
        let mut listed = !object.fields.is_empty();
        let mut i = 0;
        while i < object.fields.len() {
            found = found.union(Self::inside(object.fields[i].schema));
            i += 1;
        }
        let mut i = 0;
        while i < object.flatten.len() {
            let flat = &object.flatten[i];
            listed |= match flat {
                Schema::Object(o) => !o.fields.is_empty(),
                Schema::Named(_) => true,
                _ => false,
            };
            found = found.union(Self::of(flat).flattened());
            i += 1;
        }
        (found, !listed && found.contains(Self::OPEN))
    }

    const fn all(schemas: &[Schema]) -> Constructs {
        let mut found = Self::NONE;
        let mut i = 0;
        while i < schemas.len() {
            found = found.union(Self::inside(&schemas[i]));
            i += 1;
        }
        found
    }

    const fn is_map(self) -> bool {
        self.contains(Self::MAP) || self.contains(Self::ROOT_MAP)
    }

    /// Why `target` refuses a parameter built of these constructs, naming
    /// the construct and what to change; `None` if it takes it.
    pub const fn refused(self, target: Target) -> Option<&'static str> {
        match target {
            Target::Anthropic | Target::OpenAi | Target::GeminiJsonSchema | Target::Mcp => None,
            Target::Gemini => {
                if self.is_map() {
                    Some(
                        "target `gemini` cannot take a map (free-form keys, as `HashMap` and `BTreeMap` have): Gemini's `parameters` has no `additionalProperties`, and rejects an OBJECT without properties; use a struct with named fields or a `Vec` of key-value structs, or declare `gemini_json_schema` (parametersJsonSchema) instead",
                    )
                } else if self.contains(Self::RECURSIVE) {
                    Some(
                        "target `gemini` cannot take a type that contains itself: Gemini's `parameters` has no `$ref`, so the nesting cannot be expressed; bound the nesting with a type that does not contain itself, or declare `gemini_json_schema` (parametersJsonSchema) instead",
                    )
                } else {
                    None
                }
            }
            Target::OpenAiStrict => {
                if self.is_map() {
                    Some(
                        "target `openai_strict` cannot take a map (free-form keys, as `HashMap` and `BTreeMap` have): OpenAI's strict mode needs every key listed (`additionalProperties: false`); use a struct with named fields or a `Vec` of key-value structs, or declare `openai` (not strict) instead",
                    )
                } else if self.contains(Self::OPEN) {
                    Some(
                        "target `openai_strict` cannot take an object that accepts keys it does not list (a `#[serde(flatten)]` map, `Option` or enum): OpenAI's strict mode needs every object closed; flatten a struct instead, or declare `openai` (not strict)",
                    )
                } else if self.contains(Self::ANY) {
                    Some(
                        "target `openai_strict` cannot take a value of any type (`serde_json::Value`, or a field read by `deserialize_with`): OpenAI's strict mode needs a `type` on every schema; use a typed parameter, give it a schema with `#[arg(schema = ...)]` or `#[kesoku(schema = ...)]`, or declare `openai` (not strict)",
                    )
                } else {
                    None
                }
            }
            Target::AnthropicStructured => {
                if self.is_map() {
                    Some(
                        "target `anthropic_structured` cannot take a map (free-form keys, as `HashMap` and `BTreeMap` have): Claude's structured outputs need every object closed; use a struct with named fields or a `Vec` of key-value structs, or declare `anthropic` instead",
                    )
                } else if self.contains(Self::OPEN) {
                    Some(
                        "target `anthropic_structured` cannot take an object that accepts keys it does not list (a `#[serde(flatten)]` map, `Option` or enum): Claude's structured outputs need every object closed; flatten a struct instead, or declare `anthropic`",
                    )
                } else if self.contains(Self::ANY) {
                    Some(
                        "target `anthropic_structured` cannot take a value of any type (`serde_json::Value`, or a field read by `deserialize_with`): Claude's structured outputs need a `type` on every schema; use a typed parameter, give it a schema with `#[arg(schema = ...)]` or `#[kesoku(schema = ...)]`, or declare `anthropic`",
                    )
                } else if self.contains(Self::RECURSIVE) {
                    Some(
                        "target `anthropic_structured` cannot take a type that contains itself: Claude's structured outputs take no recursive schema; bound the nesting with a type that does not contain itself, or declare `anthropic`",
                    )
                } else {
                    None
                }
            }
        }
    }
}

/// Why each target, in [`Target::ALL`]'s order, refuses a parameter: a
/// type's [`ToolArg::__REFUSALS`](crate::ToolArg), worked out once per
/// type. Not a public API.
#[doc(hidden)]
pub type Refusals = [Option<&'static str>; Target::ALL.len()];

impl Constructs {
    /// Why each target refuses a parameter built of these constructs.
    pub const fn refusals(self) -> Refusals {
        let mut out = [None; Target::ALL.len()];
        let mut i = 0;
        while i < Target::ALL.len() {
            out[i] = self.refused(Target::ALL[i]);
            i += 1;
        }
        out
    }
}

/// Why the first target of the set `targets` (bit `i` is
/// [`Target::ALL`]`[i]`) that refuses a parameter does, of its
/// `refusals`; `None` if every one takes it: `#[tool(targets(...))]`'s
/// check.
pub(crate) const fn first_refusal(targets: u8, refusals: &Refusals) -> Option<&'static str> {
    let mut i = 0;
    while i < refusals.len() {
        if targets & (1 << i) != 0 && refusals[i].is_some() {
            return refusals[i];
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{Constructs, Target, first_refusal};

    /// A set of targets refuses what the first of them (in `Target::ALL`'s
    /// order) that refuses it says, for every set of constructs and every
    /// pair of targets.
    #[test]
    fn a_tool_s_targets_refuse_what_each_of_them_does() {
        for bits in 0..64u8 {
            let c = Constructs(bits);
            let refusals = c.refusals();
            for (i, a) in Target::ALL.into_iter().enumerate() {
                assert_eq!(refusals[i], c.refused(a));
                for (j, b) in Target::ALL.into_iter().enumerate() {
                    let (first, second) = if i <= j { (a, b) } else { (b, a) };
                    let expected = c.refused(first).or_else(|| c.refused(second));
                    assert_eq!(
                        first_refusal((1 << i) | (1 << j), &refusals),
                        expected,
                        "{bits:#b} {a:?} {b:?}"
                    );
                }
            }
            assert_eq!(first_refusal(0, &refusals), None);
        }
    }
}
