//! Tool names a provider accepts, mapped both ways.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::Dialect;

/// What a provider accepts as a tool name.
struct Rule {
    max: usize,
    /// Whether the first character has to be a letter or `_`.
    letter_first: bool,
    /// Accepted characters besides ASCII letters, digits, `_` and `-`.
    extra: &'static [char],
}

fn rule(dialect: Dialect) -> Rule {
    match dialect {
        // Anthropic documents 64 (the live API takes 128); OpenAI allows 64.
        Dialect::Anthropic
        | Dialect::AnthropicStructured
        | Dialect::OpenAi
        | Dialect::OpenAiStrict => Rule {
            max: 64,
            letter_first: false,
            extra: &[],
        },
        // Gemini allows 128 now, but older docs said 64: stay within both.
        Dialect::GeminiJsonSchema | Dialect::GeminiOpenApi => Rule {
            max: 64,
            letter_first: true,
            extra: &['.', ':'],
        },
        Dialect::Mcp => Rule {
            max: 128,
            letter_first: false,
            extra: &['.'],
        },
    }
}

impl Rule {
    fn allows(&self, c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == '-' || self.extra.contains(&c)
    }

    fn accepts(&self, name: &str) -> bool {
        let first_ok = name
            .chars()
            .next()
            .is_some_and(|c| !self.letter_first || c.is_ascii_alphabetic() || c == '_');
        first_ok && name.len() <= self.max && name.chars().all(|c| self.allows(c))
    }

    /// Rejected characters become `_`; a name that must start with a
    /// letter gets a leading `_`; a name too long keeps its start and ends
    /// in a hash of the whole, so names sharing a long prefix stay apart.
    fn sanitize(&self, name: &str) -> String {
        let mut out: String = name
            .chars()
            .map(|c| if self.allows(c) { c } else { '_' })
            .collect();
        let starts_ok = out
            .chars()
            .next()
            .is_some_and(|c| !self.letter_first || c.is_ascii_alphabetic() || c == '_');
        if !starts_ok {
            out.insert(0, '_');
        }
        if out.len() > self.max {
            // Every character is ASCII by now, so any byte is a boundary.
            out.truncate(self.max - 9);
            out.push('_');
            let _ = write!(out, "{:08x}", fnv1a(name) >> 32);
        }
        out
    }
}

/// FNV-1a: stable across platforms and Rust releases, unlike `std`'s
/// hasher, so a tool keeps its wire name from one build to the next.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Maps tool names a provider would reject to accepted, unique ones, and
/// back.
///
/// Names the provider accepts map to themselves. A rejected name has each
/// bad character replaced by `_`, is shortened with a stable hash suffix if
/// too long, and gets a numeric suffix if that clashes with another name.
/// The mapping is one-to-one, so a call's wire name always finds its tool.
///
/// ```
/// use kesoku_core::lowering::{Dialect, ToolNames};
///
/// let names = ToolNames::new(Dialect::OpenAi, ["fs.read", "fs_read", "search"]);
/// assert_eq!(names.to_wire("search"), "search");
/// assert_eq!(names.to_wire("fs_read"), "fs_read");
/// assert_eq!(names.to_wire("fs.read"), "fs_read_2");
/// assert_eq!(names.from_wire("fs_read_2"), "fs.read");
/// ```
#[derive(Debug, Clone)]
pub struct ToolNames {
    dialect: Dialect,
    to_wire: BTreeMap<String, String>,
    from_wire: BTreeMap<String, String>,
}

impl ToolNames {
    /// The mapping for `names` (duplicates are ignored).
    pub fn new<'a>(dialect: Dialect, names: impl IntoIterator<Item = &'a str>) -> Self {
        let rule = rule(dialect);
        let names: BTreeSet<&str> = names.into_iter().collect();
        // Accepted names keep their spelling, so they are claimed first.
        let mut taken: BTreeSet<String> = names
            .iter()
            .filter(|n| rule.accepts(n))
            .map(|n| (*n).to_owned())
            .collect();
        let mut to_wire = BTreeMap::new();
        let mut from_wire = BTreeMap::new();
        // Sorted, so the suffixes do not depend on registration order.
        for name in names.into_iter().filter(|n| !rule.accepts(n)) {
            let base = rule.sanitize(name);
            let mut wire = base.clone();
            let mut n = 2;
            while taken.contains(&wire) {
                let suffix = format!("_{n}");
                let keep = base.len().min(rule.max - suffix.len());
                wire = format!("{}{suffix}", &base[..keep]);
                n += 1;
            }
            taken.insert(wire.clone());
            to_wire.insert(name.to_owned(), wire.clone());
            from_wire.insert(wire, name.to_owned());
        }
        ToolNames {
            dialect,
            to_wire,
            from_wire,
        }
    }

    /// Whether `dialect` accepts `name` as it is.
    pub fn is_valid(dialect: Dialect, name: &str) -> bool {
        rule(dialect).accepts(name)
    }

    /// The dialect this mapping is for.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The name to send for tool `name`; unknown names are returned as
    /// they are.
    pub fn to_wire<'a>(&'a self, name: &'a str) -> &'a str {
        self.to_wire.get(name).map_or(name, String::as_str)
    }

    /// The tool a wire name stands for; unknown names are returned as they
    /// are.
    pub fn from_wire<'a>(&'a self, wire: &'a str) -> &'a str {
        self.from_wire.get(wire).map_or(wire, String::as_str)
    }

    /// The names that changed, as `(name, wire name)`, sorted by name.
    pub fn renamed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_wire.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_map_to_themselves() {
        let names = ToolNames::new(Dialect::Anthropic, ["search", "get-weather", "a_1"]);
        assert_eq!(names.renamed().count(), 0);
        assert_eq!(names.to_wire("get-weather"), "get-weather");
        assert_eq!(names.from_wire("a_1"), "a_1");
    }

    #[test]
    fn each_dialect_has_its_own_alphabet() {
        assert!(!ToolNames::is_valid(Dialect::OpenAi, "fs.read"));
        assert!(ToolNames::is_valid(Dialect::Mcp, "fs.read"));
        assert!(ToolNames::is_valid(Dialect::GeminiOpenApi, "ns:fs.read"));
        assert!(!ToolNames::is_valid(Dialect::GeminiJsonSchema, "1st"));
        assert!(ToolNames::is_valid(Dialect::OpenAiStrict, "1st"));
        assert!(!ToolNames::is_valid(Dialect::Mcp, ""));
        assert!(!ToolNames::is_valid(Dialect::Anthropic, &"a".repeat(65)));
        assert!(ToolNames::is_valid(Dialect::Mcp, &"a".repeat(128)));

        let names = ToolNames::new(Dialect::GeminiOpenApi, ["1st", "ns:fs.read", "héllo"]);
        assert_eq!(names.to_wire("1st"), "_1st");
        assert_eq!(names.to_wire("ns:fs.read"), "ns:fs.read");
        assert_eq!(names.to_wire("héllo"), "h_llo");
        let names = ToolNames::new(Dialect::Anthropic, ["ns:fs.read", "a b"]);
        assert_eq!(names.to_wire("ns:fs.read"), "ns_fs_read");
        assert_eq!(names.to_wire("a b"), "a_b");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let a = format!("{}_alpha", "x".repeat(70));
        let b = format!("{}_beta", "x".repeat(70));
        let names = ToolNames::new(Dialect::OpenAi, [a.as_str(), b.as_str()]);
        let (wa, wb) = (names.to_wire(&a), names.to_wire(&b));
        assert_eq!(wa.len(), 64);
        assert_eq!(wb.len(), 64);
        assert_ne!(wa, wb);
        assert!(wa.starts_with(&"x".repeat(55)));
        assert!(ToolNames::is_valid(Dialect::OpenAi, wa));
        // Same input, same output: the hash does not depend on the process.
        assert_eq!(
            ToolNames::new(Dialect::OpenAi, [a.as_str()]).to_wire(&a),
            wa
        );
        assert_eq!(&wa[55..], format!("_{:08x}", fnv1a(&a) >> 32));
        assert_eq!(names.from_wire(wa), a);
    }

    #[test]
    fn clashes_get_numeric_suffixes_and_the_map_is_a_bijection() {
        let input = ["a.b", "a_b", "a:b", "a b", "a_b_2"];
        let names = ToolNames::new(Dialect::OpenAi, input);
        // `a_b` and `a_b_2` are valid and keep their names.
        assert_eq!(names.to_wire("a_b"), "a_b");
        assert_eq!(names.to_wire("a_b_2"), "a_b_2");
        let wires: BTreeSet<&str> = input.iter().map(|n| names.to_wire(n)).collect();
        assert_eq!(wires.len(), input.len());
        for n in input {
            assert!(ToolNames::is_valid(Dialect::OpenAi, names.to_wire(n)));
            assert_eq!(names.from_wire(names.to_wire(n)), n);
        }
        // Sorted order: "a b" < "a.b" < "a:b".
        assert_eq!(names.to_wire("a b"), "a_b_3");
        assert_eq!(names.to_wire("a.b"), "a_b_4");
        assert_eq!(names.to_wire("a:b"), "a_b_5");
    }

    #[test]
    fn suffixes_keep_long_names_within_the_limit() {
        let a = format!("{}.", "y".repeat(63));
        let b = format!("{}:", "y".repeat(63));
        let names = ToolNames::new(Dialect::OpenAi, [a.as_str(), b.as_str()]);
        assert_eq!(names.to_wire(&a), format!("{}_", "y".repeat(63)));
        assert_eq!(names.to_wire(&b), format!("{}_2", "y".repeat(62)));
    }

    #[test]
    fn unknown_names_pass_through() {
        let names = ToolNames::new(Dialect::OpenAi, ["a.b"]);
        assert_eq!(names.from_wire("other"), "other");
        assert_eq!(names.to_wire("other.x"), "other.x");
        assert_eq!(names.dialect(), Dialect::OpenAi);
    }

    #[test]
    fn empty_names_get_a_placeholder() {
        let names = ToolNames::new(Dialect::Mcp, [""]);
        assert_eq!(names.to_wire(""), "_");
        assert_eq!(names.from_wire("_"), "");
    }
}
