//! How a `#[tool]`'s calls are prepared: [`Prepare`], the one thing a
//! [`ToolDef`](crate::ToolDef) calls.
//!
//! A sync tool needs no code of its own for it. Its `TOOL` constant holds a
//! [`SyncCall`]: the user's function as a function pointer, one descriptor
//! per parameter (decoded from the arguments, defaulted, or injected) and
//! the return value's conversion, each a function pointer taken where the
//! type is written. The code that decodes, gates and boxes the call is
//! generic over the *signature* ([`Params`] for tuples of descriptors), so
//! it is compiled once for every tool of the same parameter types, not once
//! per tool: that is most of what `#[tool]` costs at compile time.
//!
//! An async tool (whose future cannot be named) and a few rare shapes (a
//! `&ToolContext` parameter, more than 12 parameters) keep a generated
//! function, a [`PrepareFn`], which is a [`Prepare`] too.

use std::marker::PhantomData;

use crate::schema::tool_schema::ToolSchema;
use crate::tool::context::{InjectError, ToolContext};
use crate::tool::decode::{Parsed, PrepareError, PrepareFn, RawArgs, gate};
use crate::tool::error::ToolError;
use crate::tool::invocation::Invocation;
use crate::tool::output::ToolResult;

/// Prepares a tool's call: splits the arguments by parameter, asks whether
/// the call was interrupted (once the arguments are known to be an object
/// of known keys, before any user code), decodes the parameters, produces
/// the injected ones and returns the call ready to run.
pub trait Prepare: Sync {
    /// Prepares one call of the tool whose schema is `schema`.
    ///
    /// # Errors
    /// The [`PrepareError`] that says why there is no call.
    fn prepare(
        &self,
        schema: &'static ToolSchema,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<Invocation, PrepareError>;
}

impl Prepare for PrepareFn {
    fn prepare(
        &self,
        _: &'static ToolSchema,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<Invocation, PrepareError> {
        self(args, ctx, interrupted)
    }
}

/// One parameter of a [`SyncCall`]: how its value is obtained, in two
/// phases so that every argument is decoded before anything is injected.
pub trait Param: Sync {
    /// What the first phase yields.
    type Decoded;
    /// The parameter's type.
    type Out: Send + 'static;
    /// Phase one: decodes the parameter's argument, if it has one.
    ///
    /// # Errors
    /// The argument is missing or does not decode.
    fn decode(&self, args: &Parsed<'_>) -> Result<Self::Decoded, PrepareError>;
    /// Phase two: the value, injected if it is not an argument.
    ///
    /// # Errors
    /// An injected value could not be produced.
    fn produce(
        &self,
        decoded: Self::Decoded,
        ctx: &ToolContext,
        tool: &'static str,
    ) -> Result<Self::Out, PrepareError>;
}

/// Decodes argument `i` into a `T`.
pub type DecodeFn<T> = fn(&Parsed<'_>, usize) -> Result<T, PrepareError>;

/// A parameter the model gives: argument `i` of the schema's fields.
pub struct Model<T> {
    i: usize,
    decode: DecodeFn<T>,
}

impl<T> Model<T> {
    /// Argument `i`, decoded by `decode` (`field::<T>`, which `#[tool]`
    /// names where the parameter's type is written, so that an unmet
    /// `Deserialize` is reported there).
    #[must_use]
    pub const fn new(i: usize, decode: DecodeFn<T>) -> Self {
        Model { i, decode }
    }
}

impl<T: Send + 'static> Param for Model<T> {
    type Decoded = T;
    type Out = T;
    fn decode(&self, args: &Parsed<'_>) -> Result<T, PrepareError> {
        (self.decode)(args, self.i)
    }
    fn produce(&self, decoded: T, _: &ToolContext, _: &'static str) -> Result<T, PrepareError> {
        Ok(decoded)
    }
}

/// A parameter with a default: argument `i`, or the default when it is
/// absent or `null`.
pub struct Defaulted<T> {
    i: usize,
    decode: DecodeFn<Option<T>>,
    default: fn() -> T,
}

impl<T> Defaulted<T> {
    /// Argument `i` decoded by `decode` (`field_or_default::<T>`), or
    /// `default()`; see [`Model::new`].
    #[must_use]
    pub const fn new(i: usize, decode: DecodeFn<Option<T>>, default: fn() -> T) -> Self {
        Defaulted { i, decode, default }
    }
}

impl<T: Send + 'static> Param for Defaulted<T> {
    type Decoded = T;
    type Out = T;
    fn decode(&self, args: &Parsed<'_>) -> Result<T, PrepareError> {
        Ok((self.decode)(args, self.i)?.unwrap_or_else(self.default))
    }
    fn produce(&self, decoded: T, _: &ToolContext, _: &'static str) -> Result<T, PrepareError> {
        Ok(decoded)
    }
}

/// A `ToolContext` parameter: the call's context, cloned.
pub struct Context;

impl Param for Context {
    type Decoded = ();
    type Out = ToolContext;
    fn decode(&self, _: &Parsed<'_>) -> Result<(), PrepareError> {
        Ok(())
    }
    fn produce(
        &self,
        (): (),
        ctx: &ToolContext,
        _: &'static str,
    ) -> Result<ToolContext, PrepareError> {
        Ok(ctx.clone())
    }
}

/// An `#[inject]` parameter, produced from the context.
pub struct Injected<T> {
    make: fn(&ToolContext) -> Result<T, InjectError>,
}

impl<T> Injected<T> {
    /// Produced by `make` (`T`'s
    /// [`FromToolContext::from_tool_context`](crate::FromToolContext), named
    /// where the parameter's type is written); see [`Model::new`].
    #[must_use]
    pub const fn new(make: fn(&ToolContext) -> Result<T, InjectError>) -> Self {
        Injected { make }
    }
}

impl<T: Send + 'static> Param for Injected<T> {
    type Decoded = ();
    type Out = T;
    fn decode(&self, _: &Parsed<'_>) -> Result<(), PrepareError> {
        Ok(())
    }
    fn produce(&self, (): (), ctx: &ToolContext, tool: &'static str) -> Result<T, PrepareError> {
        (self.make)(ctx).map_err(|e| inject_error(tool, e).into())
    }
}

/// The error of an injected parameter that could not be produced,
/// naming the tool (the generated prepare functions use it too).
pub fn inject_error(tool: &str, e: InjectError) -> ToolError {
    ToolError::Inject {
        tool: tool.into(),
        type_name: e.type_name,
        reason: e.reason,
    }
}

/// Converts a tool's return value, naming the tool.
pub type ConvertFn<R> = fn(R, &str) -> ToolResult;

/// A tuple of [`Param`]s: a sync tool's signature, whose calls are
/// prepared by code compiled once per signature.
pub trait Params<R>: Sync {
    /// The tool's function, as a pointer.
    type Fn: Copy + Send + Sync + 'static;
    /// See [`Prepare::prepare`].
    ///
    /// # Errors
    /// See [`Prepare::prepare`].
    fn prepare(
        &self,
        f: Self::Fn,
        convert: ConvertFn<R>,
        schema: &'static ToolSchema,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<Invocation, PrepareError>;
}

macro_rules! params {
    ($($p:ident $d:ident $o:ident),*) => {
        impl<R: 'static, $($p: Param),*> Params<R> for ($($p,)*) {
            type Fn = fn($($p::Out),*) -> R;
            #[allow(non_snake_case, unused_variables)]
            fn prepare(
                &self,
                f: Self::Fn,
                convert: ConvertFn<R>,
                schema: &'static ToolSchema,
                args: RawArgs<'_>,
                ctx: &ToolContext,
                interrupted: Option<&dyn Fn() -> bool>,
            ) -> Result<Invocation, PrepareError> {
                let ($($p,)*) = self;
                let args = Parsed::new(args, schema.arguments.fields)?;
                gate(interrupted)?;
                $(let $d = $p.decode(&args)?;)*
                $(let $o = $p.produce($d, ctx, schema.name)?;)*
                let name = schema.name;
                Ok(Invocation::Blocking(Box::new(move || convert(f($($o),*), name))))
            }
        }
    };
}

params!();
params!(P0 d0 o0);
params!(P0 d0 o0, P1 d1 o1);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6, P7 d7 o7);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6, P7 d7 o7, P8 d8 o8);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6, P7 d7 o7, P8 d8 o8, P9 d9 o9);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6, P7 d7 o7, P8 d8 o8, P9 d9 o9, P10 d10 o10);
params!(P0 d0 o0, P1 d1 o1, P2 d2 o2, P3 d3 o3, P4 d4 o4, P5 d5 o5, P6 d6 o6, P7 d7 o7, P8 d8 o8, P9 d9 o9, P10 d10 o10, P11 d11 o11);

/// A sync tool's calls: its function, its parameters and its return
/// value's conversion. See the module's documentation.
pub struct SyncCall<P: Params<R>, R> {
    params: P,
    f: P::Fn,
    convert: ConvertFn<R>,
    _r: PhantomData<fn() -> R>,
}

impl<P: Params<R>, R> SyncCall<P, R> {
    /// The calls of `f`, whose parameters `params` describe.
    #[must_use]
    pub const fn new(params: P, f: P::Fn, convert: ConvertFn<R>) -> Self {
        SyncCall {
            params,
            f,
            convert,
            _r: PhantomData,
        }
    }
}

impl<P: Params<R>, R> Prepare for SyncCall<P, R> {
    fn prepare(
        &self,
        schema: &'static ToolSchema,
        args: RawArgs<'_>,
        ctx: &ToolContext,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<Invocation, PrepareError> {
        self.params
            .prepare(self.f, self.convert, schema, args, ctx, interrupted)
    }
}

/// The conversion of a tool that returns `()`.
pub fn unit_result((): (), _: &str) -> ToolResult {
    Ok(crate::tool::output::ToolOutput::new(
        serde_json::Value::Null,
    ))
}
