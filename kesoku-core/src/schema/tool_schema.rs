//! [`ToolSchema`]: the whole schema of one tool, which `#[tool]` emits as a
//! constant, and [`Location`], where the tool is defined.

use serde_json::{Map, Value};

use crate::schema::hints::ToolHints;
use crate::schema::tree::{JSON_SCHEMA_DIALECT, ObjectSchema, Renderer, Schema};

/// The whole schema of a tool, emitted by `#[tool]` as a constant.
///
/// Its fields are public to read; it is built with [`ToolSchema::new`] and
/// the `with_*` methods, all `const`, so that fields can be added.
///
/// ```
/// # use kesoku_core::*;
/// const SUM: ToolSchema = ToolSchema::new(
///     "sum",
///     "Adds two integers.",
///     ObjectSchema {
///         fields: &[
///             Field { name: "a", description: Some("The first integer."), schema: &<i64 as ToolArg>::SCHEMA, required: true, default: None },
///             Field { name: "b", description: Some("The second integer."), schema: &<i64 as ToolArg>::SCHEMA, required: true, default: None },
///         ],
///         flatten: &[],
///         description: None,
///     },
///     Location { file: file!(), line: line!(), module_path: module_path!() },
/// )
/// .with_exact(true);
/// let json = SUM.parameters_json();
/// assert_eq!(json["required"], serde_json::json!(["a", "b"]));
/// assert_eq!(json["additionalProperties"], false);
/// assert!(SUM.coerce && SUM.returns.is_none());
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent `#[tool(...)]` flags, each read on its own"
)]
pub struct ToolSchema {
    /// The tool name the model calls.
    pub name: &'static str,
    /// What the tool does, from the doc text before the first heading.
    pub description: &'static str,
    /// What the tool returns, from a `# Returns` section.
    pub returns: Option<&'static str>,
    /// The arguments object (injected parameters excluded).
    pub arguments: ObjectSchema,
    /// Whether lenient scalar coercion (`"5"` → `5`) is on.
    pub coerce: bool,
    /// `#[tool(timeout = "30s")]`: the call's time limit, overriding the runner's.
    pub timeout: Option<std::time::Duration>,
    /// `#[tool(sequential)]`: the tool runs alone, never beside another call.
    pub sequential: bool,
    /// `#[tool(approval)]`: a person must say yes before each call runs
    /// (an agent's approval policy reads it).
    pub approval: bool,
    /// `#[tool(max_uses = N)]`: at most this many calls of the tool in one
    /// agent turn; a call past it gets an error result naming the limit.
    pub max_uses: Option<u32>,
    /// `#[tool(max_parallel = N)]`: at most this many calls of the tool
    /// run at once, in place of the runner's (the agent's) cap for a step.
    pub max_parallel: Option<u32>,
    /// Whether every argument type is [`ToolArg::EXACT`](crate::ToolArg::EXACT):
    /// then arguments that decode strictly skip the validator.
    pub exact: bool,
    /// Where the tool is defined.
    pub location: Location,
    /// `#[tool(title = "...")]`: a human-readable name for listings.
    pub title: Option<&'static str>,
    /// `#[tool(read_only, destructive, idempotent, open_world)]`.
    pub hints: ToolHints,
    /// The return type's schema, when it implements [`ToolArg`](crate::ToolArg)
    /// (for `Result<T, E>`, `T`'s) and is not spelled as a scalar (`String`,
    /// an integer, `bool`...), free JSON (`Value`) or a `ToolOutput`. A
    /// function, since finding it takes trait resolution that a constant
    /// cannot do.
    pub output: fn() -> Option<&'static Schema>,
}

const fn no_output() -> Option<&'static Schema> {
    None
}

impl ToolSchema {
    /// A tool schema with the defaults of a plain `#[tool]`: no `# Returns`
    /// text, coercion on, no time limit, not sequential, not exact.
    pub const fn new(
        name: &'static str,
        description: &'static str,
        arguments: ObjectSchema,
        location: Location,
    ) -> Self {
        ToolSchema {
            name,
            description,
            returns: None,
            arguments,
            coerce: true,
            timeout: None,
            sequential: false,
            approval: false,
            max_uses: None,
            max_parallel: None,
            exact: false,
            location,
            title: None,
            hints: ToolHints::new(),
            output: no_output,
        }
    }

    /// Sets the human-readable title.
    #[must_use]
    pub const fn with_title(mut self, title: &'static str) -> Self {
        self.title = Some(title);
        self
    }

    /// Sets what the tool says about its effects.
    #[must_use]
    pub const fn with_hints(mut self, hints: ToolHints) -> Self {
        self.hints = hints;
        self
    }

    /// Sets the function that gives the return type's schema.
    #[must_use]
    pub const fn with_output(mut self, output: fn() -> Option<&'static Schema>) -> Self {
        self.output = output;
        self
    }

    /// Sets what the tool returns, in words.
    #[must_use]
    pub const fn with_returns(mut self, returns: &'static str) -> Self {
        self.returns = Some(returns);
        self
    }

    /// Turns lenient scalar coercion on or off.
    #[must_use]
    pub const fn with_coerce(mut self, coerce: bool) -> Self {
        self.coerce = coerce;
        self
    }

    /// Sets the call's time limit.
    #[must_use]
    pub const fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Makes the tool run alone, never beside another call.
    #[must_use]
    pub const fn with_sequential(mut self, sequential: bool) -> Self {
        self.sequential = sequential;
        self
    }

    /// Says whether a person must approve each call before it runs.
    #[must_use]
    pub const fn with_approval(mut self, approval: bool) -> Self {
        self.approval = approval;
        self
    }

    /// Sets how many calls of the tool one agent turn may make.
    #[must_use]
    pub const fn with_max_uses(mut self, uses: u32) -> Self {
        self.max_uses = Some(uses);
        self
    }

    /// Sets how many calls of the tool may run at once.
    #[must_use]
    pub const fn with_max_parallel(mut self, calls: u32) -> Self {
        self.max_parallel = Some(calls);
        self
    }

    /// Says whether every argument type is [`ToolArg::EXACT`](crate::ToolArg::EXACT).
    #[must_use]
    pub const fn with_exact(mut self, exact: bool) -> Self {
        self.exact = exact;
        self
    }

    /// Renders the arguments as a draft 2020-12 JSON Schema object.
    ///
    /// The registry caches this; call [`Tool::parameters`](crate::Tool::parameters)
    /// rather than this on a hot path.
    pub fn parameters_json(&self) -> Value {
        let mut r = Renderer::for_object(&self.arguments);
        let mut out = Map::new();
        out.insert("$schema".into(), JSON_SCHEMA_DIALECT.into());
        if let Value::Object(body) = r.render_object(&self.arguments, None) {
            out.extend(body);
        }
        let mut out = Value::Object(out);
        r.attach_defs(&mut out);
        out
    }
}

/// Where a tool is defined in source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    /// `file!()` at the definition.
    pub file: &'static str,
    /// `line!()` at the definition.
    pub line: u32,
    /// `module_path!()` at the definition.
    pub module_path: &'static str,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} ({})", self.file, self.line, self.module_path)
    }
}
