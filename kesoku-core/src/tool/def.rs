//! [`Tool`]: one callable tool, either defined by `#[tool]` at compile time
//! ([`ToolDef`]) or built at run time ([`DynamicTool`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use serde_json::Value;

use crate::args::arg_error::{ArgError, ArgErrorKind, ArgsError};
use crate::args::dynamic_schema::DynamicSchema;
use crate::args::validate::describe;
use crate::future::BoxFuture;
use crate::schema::hints::ToolHints;
use crate::schema::tool_schema::{Location, ToolSchema};
use crate::schema::tree::{JSON_SCHEMA_DIALECT, Schema};
use crate::tool::call::Prepare;
use crate::tool::context::ToolContext;
use crate::tool::decode::{PrepareError, RawArgs};
use crate::tool::error::{RegistryError, ToolError};
use crate::tool::invocation::Invocation;
use crate::tool::output::{ToolOutput, ToolResult};
use crate::tool::valid_args::ValidArgs;

/// A tool defined by `#[tool]`: its constant schema and generated invoker.
///
/// Every `#[tool] fn foo` has one at `foo::TOOL`, which
/// [`ToolRegistry::register`](crate::ToolRegistry::register) takes.
///
/// It is a constant with no interior mutability (the rendered parameters
/// are cached process-wide, by schema), so `foo::TOOL` can be a `const`.
pub struct ToolDef {
    schema: &'static ToolSchema,
    prepare: &'static dyn Prepare,
    is_async: bool,
}

impl ToolDef {
    /// Used by the `#[tool]` expansion.
    #[doc(hidden)]
    pub const fn new(
        schema: &'static ToolSchema,
        prepare: &'static dyn Prepare,
        is_async: bool,
    ) -> Self {
        ToolDef {
            schema,
            prepare,
            is_async,
        }
    }

    /// The tool's compile-time schema.
    pub fn schema(&self) -> &'static ToolSchema {
        self.schema
    }

    /// The arguments' JSON Schema, rendered on first use and cached.
    pub fn parameters(&self) -> &'static Value {
        rendered(self.schema)
    }

    /// The slow path: validates the whole object (every problem, with its
    /// JSON path), then decodes the validated object.
    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        let args = ValidArgs::new(self.schema, args)?;
        match self
            .prepare
            .prepare(self.schema, RawArgs::Json(args.value()), ctx, None)
        {
            Ok(invocation) => Ok(invocation),
            Err(PrepareError::Inject(e)) => Err(*e),
            // Without a check there is no interruption: only a
            // `Deserialize` stricter than its schema gets here.
            Err(why) => Err(args.rejected(&why).into()),
        }
    }

    /// The fast path: a strict decode of the arguments as they came, used
    /// only when every parameter type is exact (see `decode.rs`).
    fn prepare_fast(
        &self,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Invocation, PrepareError> {
        if !self.schema.exact {
            return Err(PrepareError::Malformed);
        }
        self.prepare
            .prepare(self.schema, args, ctx, Some(interrupted))
    }
}

impl fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.schema.name)
            .field("location", &self.schema.location)
            .field("is_async", &self.is_async)
            .finish_non_exhaustive()
    }
}

type DynHandler = dyn Fn(Value, ToolContext) -> BoxFuture<ToolResult> + Send + Sync;

/// A tool built at run time from a name, a description, a JSON Schema and an
/// async closure: for tools imported from elsewhere (MCP servers, plugins).
///
/// ```
/// use kesoku_core::{DynamicTool, ToolContext, ToolOutput, ToolRegistry};
/// use serde_json::json;
///
/// let echo = DynamicTool::new(
///     "echo",
///     "Repeats its input.",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |args, _ctx| async move { Ok(ToolOutput::new(args["text"].clone())) },
/// ).unwrap();
/// let mut registry = ToolRegistry::new();
/// registry.register(echo).unwrap();
/// # tokio_test_block_on(async {
/// let out = registry.get("echo").unwrap().call(json!({"text": "hi"}), &ToolContext::new("s")).await;
/// assert_eq!(out.unwrap().text(), "hi");
/// # });
/// # fn tokio_test_block_on(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub struct DynamicTool {
    name: String,
    description: String,
    returns: Option<String>,
    parameters: Value,
    schema: DynamicSchema,
    timeout: Option<Duration>,
    sequential: bool,
    approval: bool,
    call_id: bool,
    max_uses: Option<u32>,
    max_parallel: Option<u32>,
    title: Option<String>,
    hints: ToolHints,
    output: Option<Value>,
    handler: Box<DynHandler>,
}

impl DynamicTool {
    /// Builds a tool. The schema must be a JSON object schema (`"type":
    /// "object"`) that compiles (draft 2020-12 unless its `$schema` says
    /// otherwise; `$schema` is added if absent). Every call's arguments are
    /// checked against it before the handler runs, each problem named by
    /// its path as for a `#[tool]`.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        mut parameters: Value,
        handler: F,
    ) -> Result<Self, RegistryError>
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let name = name.into();
        check_name(&name)?;
        let Some(map) = parameters.as_object_mut() else {
            return Err(RegistryError::BadSchema {
                name,
                reason: format!(
                    "the schema must be a JSON object, got {}",
                    describe(&parameters)
                ),
            });
        };
        if map.get("type").is_some_and(|t| t != "object") {
            return Err(RegistryError::BadSchema {
                name,
                reason: "the arguments schema must have `\"type\": \"object\"`".into(),
            });
        }
        map.entry("$schema")
            .or_insert_with(|| JSON_SCHEMA_DIALECT.into());
        let schema =
            DynamicSchema::compile(&parameters).map_err(|reason| RegistryError::BadSchema {
                name: name.clone(),
                reason,
            })?;
        Ok(DynamicTool {
            name,
            description: description.into(),
            returns: None,
            parameters,
            schema,
            timeout: None,
            sequential: false,
            approval: false,
            call_id: false,
            max_uses: None,
            max_parallel: None,
            title: None,
            hints: ToolHints::new(),
            output: None,
            handler: Box::new(move |args, ctx| Box::pin(handler(args, ctx))),
        })
    }

    /// The name the model calls.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the description of what the tool returns.
    #[must_use]
    pub fn with_returns(mut self, returns: impl Into<String>) -> Self {
        self.returns = Some(returns.into());
        self
    }

    /// Sets the call's time limit, overriding the runner's default.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Makes the tool run alone, never beside another call.
    #[must_use]
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }

    /// Makes each call wait for a person's approval (as
    /// `#[tool(approval)]`).
    #[must_use]
    pub fn needs_approval(mut self) -> Self {
        self.approval = true;
        self
    }

    /// Asks the runner for the id of each call's `tool_call` message, in
    /// [`ToolContext::tool_call_id`]: a name for the call that stays the
    /// same when a resumed turn runs it again (a sub-agent keys its
    /// session by it). Other tools' calls skip the copy of the context
    /// this takes.
    #[must_use]
    pub fn needs_tool_call_id(mut self) -> Self {
        self.call_id = true;
        self
    }

    /// Allows at most `uses` calls of the tool in one agent turn (as
    /// `#[tool(max_uses = N)]`).
    #[must_use]
    pub fn with_max_uses(mut self, uses: u32) -> Self {
        self.max_uses = Some(uses);
        self
    }

    /// Runs at most `calls` calls of the tool at once, in place of the
    /// runner's (the agent's) cap for a step (as
    /// `#[tool(max_parallel = N)]`); 0 counts as 1.
    #[must_use]
    pub fn with_max_parallel(mut self, calls: u32) -> Self {
        self.max_parallel = Some(calls);
        self
    }

    /// Sets a human-readable title.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets what the tool says about its effects.
    #[must_use]
    pub fn with_hints(mut self, hints: ToolHints) -> Self {
        self.hints = hints;
        self
    }

    /// Sets the JSON Schema of what the tool returns.
    #[must_use]
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output = Some(schema);
        self
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        let args = match args {
            Value::Null => Value::Object(serde_json::Map::new()),
            obj @ Value::Object(_) => obj,
            other => {
                return Err(self.args_error(vec![ArgError {
                    path: String::new(),
                    kind: ArgErrorKind::NotAnObject {
                        got: describe(&other),
                    },
                }]));
            }
        };
        let errors = self.schema.check(&args);
        if !errors.is_empty() {
            return Err(self.args_error(errors));
        }
        Ok(Invocation::Async((self.handler)(args, ctx.clone())))
    }

    fn args_error(&self, errors: Vec<ArgError>) -> ToolError {
        ToolError::Args(ArgsError {
            tool: self.name.clone(),
            errors,
        })
    }
}

impl fmt::Debug for DynamicTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The arguments' JSON Schema of `schema`, rendered once per process.
///
/// Keyed by the schema's address: a `#[tool]` constant has one (or, used
/// from several crates, one per copy, each rendered once), and rendering
/// it once each is what a per-tool `static` did, without generating one
/// for every tool. The renderings live as long as the schemas they are of.
fn rendered(schema: &'static ToolSchema) -> &'static Value {
    type Rendered = RwLock<HashMap<usize, &'static Value>>;
    static RENDERED: OnceLock<Rendered> = OnceLock::new();
    let map = RENDERED.get_or_init(Rendered::default);
    let key = std::ptr::from_ref(schema) as usize;
    if let Some(found) = map.read().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return found;
    }
    // Rendered outside the lock; a thread that lost the race drops its copy.
    let value = schema.parameters_json();
    map.write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(value)))
}

/// A tool in a [`ToolRegistry`](crate::ToolRegistry).
#[derive(Clone)]
pub struct Tool {
    kind: Kind,
    /// A static tool's rendered parameters, once looked up.
    parameters: OnceLock<&'static Value>,
}

#[derive(Clone)]
enum Kind {
    Static(&'static ToolDef),
    Dynamic(Arc<DynamicTool>),
}

impl From<&'static ToolDef> for Tool {
    fn from(def: &'static ToolDef) -> Self {
        Tool {
            kind: Kind::Static(def),
            parameters: OnceLock::new(),
        }
    }
}

impl From<DynamicTool> for Tool {
    fn from(t: DynamicTool) -> Self {
        Tool {
            kind: Kind::Dynamic(Arc::new(t)),
            parameters: OnceLock::new(),
        }
    }
}

impl Tool {
    /// The name the model calls.
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Static(d) => d.schema.name,
            Kind::Dynamic(t) => &t.name,
        }
    }

    /// What the tool does.
    pub fn description(&self) -> &str {
        match &self.kind {
            Kind::Static(d) => d.schema.description,
            Kind::Dynamic(t) => &t.description,
        }
    }

    /// What the tool returns, from the `# Returns` doc section.
    pub fn returns(&self) -> Option<&str> {
        match &self.kind {
            Kind::Static(d) => d.schema.returns,
            Kind::Dynamic(t) => t.returns.as_deref(),
        }
    }

    /// A human-readable title, if the tool gives one.
    pub fn title(&self) -> Option<&str> {
        match &self.kind {
            Kind::Static(d) => d.schema.title,
            Kind::Dynamic(t) => t.title.as_deref(),
        }
    }

    /// What the tool says about its effects.
    pub fn hints(&self) -> ToolHints {
        match &self.kind {
            Kind::Static(d) => d.schema.hints,
            Kind::Dynamic(t) => t.hints,
        }
    }

    /// The JSON Schema of what the tool returns, when its return type has
    /// one worth giving (for `#[tool]`, a type that implements
    /// [`ToolArg`](crate::ToolArg) other than a scalar, `Value` or
    /// `ToolOutput`).
    /// Rendered on each call: this is for listings, not the call path.
    pub fn output_schema(&self) -> Option<Value> {
        match &self.kind {
            Kind::Static(d) => (d.schema.output)().map(Schema::to_json),
            Kind::Dynamic(t) => t.output.clone(),
        }
    }

    /// The JSON Schema of the arguments (a clone of the cached rendering).
    pub fn parameters(&self) -> Value {
        self.parameters_ref().clone()
    }

    /// The JSON Schema of the arguments, borrowed from the cache.
    pub fn parameters_ref(&self) -> &Value {
        match &self.kind {
            Kind::Static(d) => self.parameters.get_or_init(|| d.parameters()),
            Kind::Dynamic(t) => &t.parameters,
        }
    }

    /// Where the tool is defined; `None` for dynamic tools.
    pub fn location(&self) -> Option<&'static Location> {
        match &self.kind {
            Kind::Static(d) => Some(&d.schema.location),
            Kind::Dynamic(_) => None,
        }
    }

    /// The compile-time schema; `None` for dynamic tools.
    pub fn schema(&self) -> Option<&'static ToolSchema> {
        match &self.kind {
            Kind::Static(d) => Some(d.schema),
            Kind::Dynamic(_) => None,
        }
    }

    /// Whether the tool is an `async fn` (sync tools run on a thread pool).
    pub fn is_async(&self) -> bool {
        match &self.kind {
            Kind::Static(d) => d.is_async,
            Kind::Dynamic(_) => true,
        }
    }

    /// The tool's own time limit, if it sets one.
    pub fn timeout(&self) -> Option<Duration> {
        match &self.kind {
            Kind::Static(d) => d.schema.timeout,
            Kind::Dynamic(t) => t.timeout,
        }
    }

    /// Whether the tool must run alone.
    pub fn is_sequential(&self) -> bool {
        match &self.kind {
            Kind::Static(d) => d.schema.sequential,
            Kind::Dynamic(t) => t.sequential,
        }
    }

    /// Whether each call waits for a person's approval
    /// (`#[tool(approval)]`, [`DynamicTool::needs_approval`]).
    pub fn needs_approval(&self) -> bool {
        match &self.kind {
            Kind::Static(d) => d.schema.approval,
            Kind::Dynamic(t) => t.approval,
        }
    }

    /// Whether its calls are given their `tool_call` message's id
    /// ([`DynamicTool::needs_tool_call_id`]).
    pub fn needs_tool_call_id(&self) -> bool {
        match &self.kind {
            Kind::Static(_) => false,
            Kind::Dynamic(t) => t.call_id,
        }
    }

    /// How many calls of the tool one agent turn may make, if it says
    /// (`#[tool(max_uses = N)]`, [`DynamicTool::with_max_uses`]).
    pub fn max_uses(&self) -> Option<u32> {
        match &self.kind {
            Kind::Static(d) => d.schema.max_uses,
            Kind::Dynamic(t) => t.max_uses,
        }
    }

    /// How many calls of the tool may run at once, if it says
    /// (`#[tool(max_parallel = N)]`, [`DynamicTool::with_max_parallel`]).
    pub fn max_parallel(&self) -> Option<u32> {
        match &self.kind {
            Kind::Static(d) => d.schema.max_parallel,
            Kind::Dynamic(t) => t.max_parallel,
        }
    }

    /// Decodes and validates the arguments and injected parameters, and
    /// returns the call ready to run. Argument errors come back here, before
    /// anything runs.
    pub fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        match &self.kind {
            Kind::Static(d) => d.prepare(args, ctx),
            Kind::Dynamic(t) => t.prepare(args, ctx),
        }
    }

    /// The fast path: splits `args` strictly by parameter, asks
    /// `interrupted` once they are an object of known keys, decodes each
    /// straight into its type, and injects. An argument error
    /// ([`PrepareError::is_argument_error`]) means the arguments need the
    /// validator (or the tool is dynamic): [`prepare`](Self::prepare) then
    /// gives the answer.
    pub(crate) fn prepare_fast(
        &self,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Invocation, PrepareError> {
        match &self.kind {
            Kind::Static(d) => d.prepare_fast(args, ctx, interrupted),
            Kind::Dynamic(_) => Err(PrepareError::Malformed),
        }
    }

    /// Decodes the arguments, runs the tool and encodes its output. Sync
    /// tools run on tokio's blocking pool, so this needs a tokio runtime.
    pub async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.prepare(args, ctx)?.run(self.name()).await
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name())
            .field("location", &self.location())
            .finish_non_exhaustive()
    }
}

/// Checks a tool name against `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`.
pub(crate) fn check_name(name: &str) -> Result<(), RegistryError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(RegistryError::BadName { name: name.into() })
    }
}
