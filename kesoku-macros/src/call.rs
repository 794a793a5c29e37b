//! How a tool's calls are prepared, as tokens: a sync tool's `SyncCall`
//! (code shared per signature, see kesoku-core's `tool/call.rs`) and the
//! conversion of a return value, which the generated `prepare` function of
//! the other tools uses too.
//!
//! Every bound on a user's type is checked where that type is written
//! (`quote_spanned!`): `field::<T>` for `Deserialize`,
//! `<T as FromToolContext>::from_tool_context`, the conversion for the
//! return type. The shared code itself asks nothing more of them.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Output, Source, ToolFn};
use crate::valid::Checked;

/// The most parameters the shared code takes (kesoku-core implements
/// `Params` for tuples up to this length).
const MAX_PARAMS: usize = 12;

/// `&SyncCall::new(...)` for a sync tool, or `None` for a tool that needs a
/// function of its own: an `async fn` (its future has no name), one taking
/// `&ToolContext` (a borrow the shared code cannot express), one with more
/// than [`MAX_PARAMS`] parameters or an `extern` ABI, and one whose return
/// type is an `impl Trait`.
pub(crate) fn shared(f: &ToolFn<'_>, checked: &Checked, krate: &syn::Path) -> Option<TokenStream> {
    let by_ref = f
        .params
        .iter()
        .any(|p| matches!(p.source, Source::Context { by_ref: true }));
    let ret = match &f.output {
        Output::Unit => quote!(()),
        Output::Result(ty) | Output::Value(ty) => ty.to_token_stream(),
    };
    if f.is_async
        || by_ref
        || f.params.len() > MAX_PARAMS
        || f.item.sig.abi.is_some()
        || has_impl(ret.clone())
    {
        return None;
    }
    let p = quote!(#krate::__private);
    let mut field = 0_usize;
    let params = f.params.iter().map(|param| {
        let ty = param.ty;
        match param.source {
            Source::Model => {
                let i = field;
                field += 1;
                if let Some(expr) = &param.default {
                    quote_spanned! {ty.span()=>
                        #p::Defaulted::new(#i, #p::field_or_default::<#ty>, || -> #ty { #expr })
                    }
                } else {
                    quote_spanned!(ty.span()=> #p::Model::new(#i, #p::field::<#ty>))
                }
            }
            Source::Context { .. } => quote!(#p::Context),
            // An unmet bound names `FromToolContext` and the type.
            Source::Inject => quote_spanned! {ty.span()=>
                #p::Injected::new(<#ty as #krate::FromToolContext>::from_tool_context)
            },
        }
    });
    let params: Vec<TokenStream> = params.collect();
    let out = quote!(__kesoku_out);
    let convert = match &f.output {
        Output::Unit => quote!(#p::unit_result),
        // Spanned at the return type, where an unmet bound is reported.
        Output::Result(ty) => {
            quote_spanned!(ty.span()=> <#ty as #krate::IntoToolResult>::into_tool_result)
        }
        Output::Value(ty) => {
            let body = convert(f, checked, krate, &out);
            quote!(|#out: #ty, _: &str| -> #krate::ToolResult { #body })
        }
    };
    let fn_ident = f.ident;
    Some(quote! {
        &#p::SyncCall::<_, #ret>::new((#(#params,)*), #fn_ident, #convert)
    })
}

/// Whether the tokens hold an `impl Trait`.
fn has_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "impl",
        proc_macro2::TokenTree::Group(g) => has_impl(g.stream()),
        _ => false,
    })
}

/// The return value `out` converted to a `ToolResult`.
pub(crate) fn convert(
    f: &ToolFn<'_>,
    checked: &Checked,
    krate: &syn::Path,
    out: &TokenStream,
) -> TokenStream {
    let name = &checked.name;
    match &f.output {
        Output::Unit => quote! {
            let () = #out;
            ::core::result::Result::Ok(#krate::ToolOutput::new(#krate::__private::Value::Null))
        },
        // Spanned at the return type, where an unmet bound is reported.
        Output::Result(ty) => quote_spanned! {ty.span()=>
            <#ty as #krate::IntoToolResult>::into_tool_result(#out, #name)
        },
        // Not spelled `Result`, but it may be an alias of one: let the type
        // decide (a `Result` is an error on `Err`, anything else is encoded).
        // A type that is none of those comes back as it is, and the public
        // `IntoToolOutput` it lacks is the error, at the return type.
        Output::Value(ty) => quote_spanned! {ty.span()=>
            {
                #[allow(unused_imports)]
                use #krate::__private::{ReturnsOther as _, ReturnsOutput as _, ReturnsResult as _, ReturnsValue as _};
                use #krate::IntoToolOutput as __KesokuIntoToolOutput;
                (&&&#krate::__private::Returned::<#ty>::new(#out))
                    .kesoku_output(#name)
                    .and_then(|__kesoku_v| __KesokuIntoToolOutput::into_tool_output(__kesoku_v, #name))
            }
        },
    }
}
