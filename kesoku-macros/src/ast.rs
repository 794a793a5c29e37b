//! A typed, borrowed view of the function under `#[tool]`: its doc lines
//! with their spans, and its parameters sorted into model arguments and
//! injected ones.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Type};

use crate::attr::ArgOptions;
use crate::ctxt::Ctxt;

/// One line of the doc comment and the attribute it came from.
pub(crate) struct DocLine {
    pub(crate) text: String,
    pub(crate) span: Span,
}

/// The function's doc comment, line by line.
pub(crate) struct DocLines {
    pub(crate) lines: Vec<DocLine>,
    /// A `#[doc = ...]` whose value is not a string literal (`include_str!`).
    pub(crate) unreadable: Option<syn::Attribute>,
}

impl DocLines {
    pub(crate) fn from_attrs(attrs: &[syn::Attribute]) -> Self {
        let mut lines = Vec::new();
        let mut unreadable = None;
        for attr in attrs {
            if !attr.path().is_ident("doc") {
                continue;
            }
            let syn::Meta::NameValue(nv) = &attr.meta else {
                continue; // #[doc(hidden)] and friends carry no text
            };
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => {
                    // A `/** */` block arrives as one literal with newlines.
                    let value = s.value();
                    let block: Vec<&str> = value.split('\n').collect();
                    let starred = block.len() > 1
                        && block
                            .iter()
                            .filter(|l| !l.trim().is_empty())
                            .all(|l| l.trim_start().starts_with('*'));
                    for text in block {
                        let text = if starred { unstar(text) } else { text };
                        lines.push(DocLine {
                            text: text.to_owned(),
                            span: attr.span(),
                        });
                    }
                }
                _ => unreadable = unreadable.or_else(|| Some(attr.clone())),
            }
        }
        DocLines { lines, unreadable }
    }
}

/// ` * text` → ` text`: the decoration of a `/** */` block whose every
/// line starts with a star, which rustdoc strips too.
fn unstar(line: &str) -> &str {
    let t = line.trim_start();
    t.strip_prefix('*').unwrap_or(t)
}

/// How a parameter gets its value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// From the model's JSON arguments.
    Model,
    /// `ToolContext` (owned) or `&ToolContext`.
    Context { by_ref: bool },
    /// Any other `FromToolContext` type: `State<T>`, or marked `#[inject]`.
    Inject,
}

/// One parameter of the tool function.
pub(crate) struct Param<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) source: Source,
    pub(crate) default: Option<syn::Expr>,
    /// The schema shown instead of the type's (`#[arg(schema = ...)]`).
    pub(crate) schema: Option<syn::Expr>,
}

/// What the function returns.
pub(crate) enum Output<'a> {
    /// No return type.
    Unit,
    /// `Result<T, E>` (by last path segment, so aliases like `io::Result<T>` count).
    Result(&'a Type),
    /// Any other type.
    Value(&'a Type),
}

/// The function under `#[tool]`.
pub(crate) struct ToolFn<'a> {
    pub(crate) item: &'a ItemFn,
    pub(crate) ident: &'a Ident,
    pub(crate) is_async: bool,
    pub(crate) params: Vec<Param<'a>>,
    pub(crate) output: Output<'a>,
    pub(crate) docs: DocLines,
    /// Whether a parameter was rejected (and so is missing from `params`).
    pub(crate) rejected_params: bool,
}

impl<'a> ToolFn<'a> {
    /// Reads the function, recording in `cx` every parameter it cannot take.
    pub(crate) fn from_item(cx: &Ctxt, item: &'a ItemFn) -> Self {
        let sig = &item.sig;
        if !sig.generics.params.is_empty() {
            cx.error_spanned_by(
                &sig.generics,
                "a #[tool] function cannot be generic: the model's arguments need one concrete type per parameter",
            );
        }
        if let Some(c) = &sig.constness {
            cx.error_spanned_by(c, "a #[tool] function cannot be `const`");
        }
        if let Some(u) = &sig.unsafety {
            cx.error_spanned_by(
                u,
                "a #[tool] function cannot be `unsafe`: the model cannot uphold its contract",
            );
        }
        if let Some(v) = &sig.variadic {
            cx.error_spanned_by(v, "a #[tool] function cannot be variadic");
        }
        let params: Vec<Param<'a>> = sig.inputs.iter().filter_map(|arg| param(cx, arg)).collect();
        let rejected_params = params.len() != sig.inputs.len();
        let output = match &sig.output {
            ReturnType::Default => Output::Unit,
            ReturnType::Type(_, ty) if is_unit(ty) => Output::Unit,
            ReturnType::Type(_, ty) if last_segment_is(ty, "Result") => Output::Result(ty),
            ReturnType::Type(_, ty) => Output::Value(ty),
        };
        ToolFn {
            item,
            ident: &sig.ident,
            is_async: sig.asyncness.is_some(),
            params,
            output,
            docs: DocLines::from_attrs(&item.attrs),
            rejected_params,
        }
    }

    /// The parameters the model supplies.
    pub(crate) fn model_params(&self) -> impl Iterator<Item = &Param<'a>> {
        self.params.iter().filter(|p| p.source == Source::Model)
    }
}

fn param<'a>(cx: &Ctxt, arg: &'a FnArg) -> Option<Param<'a>> {
    let pt = match arg {
        FnArg::Receiver(r) => {
            cx.error_spanned_by(
                r,
                "a #[tool] must be a free function: `self` has no value the model could send",
            );
            return None;
        }
        FnArg::Typed(pt) => pt,
    };
    let opts = ArgOptions::from_attrs(cx, &pt.attrs);
    let ident = match &*pt.pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => &pi.ident,
        other => {
            cx.error_spanned_by(
                other,
                "a #[tool] parameter must be a plain name: the name is the argument's key in the schema; destructure inside the function instead",
            );
            return None;
        }
    };
    let ty = &*pt.ty;
    let source = classify(cx, ty, opts.inject.is_some());
    if let Some(default) = &opts.default
        && source != Source::Model
    {
        cx.error_spanned_by(
            default,
            format!("`{ident}` comes from the tool context, not from the model, so it cannot have a default"),
        );
    }
    if let Some(schema) = &opts.schema
        && source != Source::Model
    {
        cx.error_spanned_by(
            schema,
            format!(
                "`{ident}` comes from the tool context, not from the model, so it has no schema"
            ),
        );
    }
    Some(Param {
        ident,
        ty,
        source,
        default: opts.default,
        schema: opts.schema,
    })
}

/// Sorts a parameter by its type, and rejects the types that cannot be
/// arguments whatever traits they implement.
fn classify(cx: &Ctxt, ty: &Type, inject: bool) -> Source {
    match ty {
        Type::Reference(r) if last_segment_is(&r.elem, "ToolContext") => {
            if let Some(m) = &r.mutability {
                cx.error_spanned_by(m, "take the context as `&ToolContext`, not `&mut`");
            }
            Source::Context { by_ref: true }
        }
        Type::Reference(r) => {
            cx.error_spanned_by(
                r,
                "a #[tool] parameter cannot be a reference (only `&ToolContext` can): take an owned type such as `String` or `Vec<T>`",
            );
            Source::Model
        }
        Type::ImplTrait(it) => {
            cx.error_spanned_by(
                it,
                "a #[tool] parameter cannot be `impl Trait`: the schema needs one concrete type",
            );
            Source::Model
        }
        _ if inject => Source::Inject,
        _ if last_segment_is(ty, "ToolContext") => Source::Context { by_ref: false },
        // `State<T>`, not any type that happens to be called `State`.
        _ if last_segment_is(ty, "State") && generic_args(ty) == 1 => Source::Inject,
        _ => Source::Model,
    }
}

fn last_segment_is(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            p.path.segments.last().is_some_and(|s| s.ident == name)
        }
        Type::Group(g) => last_segment_is(&g.elem, name),
        Type::Paren(p) => last_segment_is(&p.elem, name),
        _ => false,
    }
}

/// How many generic arguments the type's last path segment has.
fn generic_args(ty: &Type) -> usize {
    match ty {
        Type::Path(p) => p.path.segments.last().map_or(0, |s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => a.args.len(),
            _ => 0,
        }),
        _ => 0,
    }
}

fn is_unit(ty: &Type) -> bool {
    matches!(ty, Type::Tuple(t) if t.elems.is_empty())
}
