//! Code generation for `#[tool]`.
//!
//! Next to the user's function (emitted unchanged, minus our parameter
//! attributes) it emits:
//! - `__kesoku_schema_x`, a `const` `ToolSchema` built from the parameters'
//!   `ToolArg::SCHEMA`s;
//! - how a call is prepared (it splits the arguments by parameter, asks the
//!   interruption check, decodes each parameter, produces the injected ones
//!   and returns the call ready to run; kesoku-core drives it on both its
//!   paths, see its `decode.rs`): for a sync tool a `SyncCall` constant,
//!   code shared by every tool of the same signature (see `call.rs`), and
//!   otherwise `__kesoku_prepare_x`, a function of the tool's own;
//! - an empty `enum x {}` named after the function, holding `SCHEMA` and
//!   the `TOOL` handle;
//! - an `inventory` submission into the global registry.
//!
//! Trait bounds are checked where the types are written (`quote_spanned!`
//! at each parameter's and the return type), so an unmet bound is reported
//! there, through a public trait, rather than somewhere in generated code.
//!
//! On error it emits the function, the errors and, in place of the rest,
//! the companion type with placeholder `SCHEMA` and `TOOL`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

use crate::ast::{Output, Source, ToolFn};
use crate::attr::{ArgOptions, ToolOptions};
use crate::ctxt::Ctxt;
use crate::valid::{self, Checked, unraw};

pub(crate) fn tool(args: TokenStream, input: &TokenStream) -> TokenStream {
    let Ok(item) = syn::parse2::<ItemFn>(input.clone()) else {
        let err = syn::Error::new_spanned(
            input,
            "#[tool] goes on a free function (`fn` or `async fn`)",
        );
        return with_errors(input, &err);
    };
    let cx = Ctxt::new();
    let opts = parse_options(&cx, args);
    let f = ToolFn::from_item(&cx, &item);
    let checked = valid::check(&cx, &f, &opts);
    let user_fn = strip_param_attrs(&item);
    match cx.check() {
        Ok(()) => {
            let generated = generate(&f, &opts, &checked);
            quote! { #user_fn #generated }
        }
        // The function still compiles as written, and placeholders stand in
        // for `foo::SCHEMA` and `foo::TOOL`, so their uses add no errors to
        // ours (in an editor either, which goes on past the first error).
        Err(err) => {
            let placeholder = placeholder(&item, &opts);
            with_errors(&quote!(#user_fn #placeholder), &err)
        }
    }
}

/// On error, the companion `enum foo {}` with placeholder `SCHEMA` and
/// `TOOL` of the right types (after thiserror's `fallback.rs`). Left out
/// where the enum itself would be a second error: a method (an enum cannot
/// be declared in an `impl` block) and a primitive's name.
fn placeholder(item: &ItemFn, opts: &ToolOptions) -> TokenStream {
    let fn_ident = &item.sig.ident;
    let is_method = matches!(item.sig.inputs.first(), Some(syn::FnArg::Receiver(_)));
    if is_method || valid::PRIMITIVES.contains(&unraw(fn_ident).as_str()) {
        return TokenStream::new();
    }
    let krate = crate_path(opts);
    let vis = &item.vis;
    let cfgs = item.attrs.iter().filter(|a| a.path().is_ident("cfg"));
    let cfgs2 = cfgs.clone();
    quote! {
        #(#cfgs)*
        #[allow(non_camel_case_types, dead_code)]
        #vis enum #fn_ident {}

        #(#cfgs2)*
        #[automatically_derived]
        #[allow(dead_code)]
        impl #fn_ident {
            #vis const SCHEMA: &'static #krate::ToolSchema = #krate::__private::PLACEHOLDER_SCHEMA;
            #vis const TOOL: &'static #krate::ToolDef = #krate::__private::PLACEHOLDER_TOOL;
        }
    }
}

/// The `kesoku` crate's path in generated code: `crate = path`, or `::kesoku`.
fn crate_path(opts: &ToolOptions) -> syn::Path {
    opts.krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::kesoku))
}

fn with_errors(tokens: &TokenStream, err: &syn::Error) -> TokenStream {
    let errors = err.to_compile_error();
    quote! { #tokens #errors }
}

fn parse_options(cx: &Ctxt, args: TokenStream) -> ToolOptions {
    use darling::FromMeta;
    match darling::ast::NestedMeta::parse_meta_list(args) {
        Ok(list) => ToolOptions::from_list(&list).unwrap_or_else(|errors| {
            for e in errors {
                let msg = e.to_string();
                let msg = msg.get(..1).map_or_else(String::new, str::to_lowercase) + msg.get(1..).unwrap_or("");
                cx.error_at(
                    e.span(),
                    format!(
                        "invalid #[tool] option: {msg}; the options are `name = \"...\"`, `description = \"...\"`, `coerce = true|false`, `timeout = \"30s\"`, `sequential`, `approval`, `max_uses = N`, `max_parallel = N`, `allow_undocumented_args`, `register = false`, `title = \"...\"`, `read_only`, `destructive`, `idempotent`, `open_world`, `targets(...)` and `crate = path`"
                    ),
                );
            }
            ToolOptions::default()
        }),
        Err(e) => {
            cx.syn_error(e);
            ToolOptions::default()
        }
    }
}

/// The user's function without `#[arg]` / `#[inject]` on its parameters,
/// which are ours and would not compile on a plain `fn`. Tool parameters
/// are owned by design (they are decoded from JSON), so clippy's advice to
/// borrow them does not apply.
fn strip_param_attrs(item: &ItemFn) -> ItemFn {
    let mut item = item.clone();
    item.attrs
        .push(syn::parse_quote!(#[allow(clippy::needless_pass_by_value)]));
    for arg in &mut item.sig.inputs {
        if let syn::FnArg::Typed(pt) = arg {
            pt.attrs.retain(|a| !ArgOptions::is_ours(a));
        }
    }
    item
}

fn generate(f: &ToolFn<'_>, opts: &ToolOptions, checked: &Checked) -> TokenStream {
    let krate = crate_path(opts);
    let fn_ident = f.ident;
    let base = unraw(fn_ident);
    let schema_const = format_ident!("__kesoku_schema_{}", base);
    let prepare_fn = format_ident!("__kesoku_prepare_{}", base);
    let vis = &f.item.vis;
    let name = &checked.name;
    let is_async = f.is_async;

    // A tool behind `#[cfg(...)]` takes its generated items along.
    let cfgs: Vec<&syn::Attribute> = f
        .item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    let schema = schema_tokens(f, opts, checked, &krate);
    // A sync tool's calls are prepared by code shared per signature; the
    // rest get a function of their own.
    let (prepare, prepare_ref) = match crate::call::shared(f, checked, &krate) {
        Some(call) => (TokenStream::new(), call),
        None => (
            prepare_tokens(f, checked, &krate, &schema_const),
            quote!(&(#prepare_fn as #krate::__private::PrepareFn)),
        ),
    };
    let submit = if opts.register == Some(false) {
        TokenStream::new()
    } else {
        quote! {
            #(#cfgs)*
            #krate::__private::inventory::submit! {
                #krate::__private::ToolEntry(#fn_ident::TOOL)
            }
        }
    };
    let module_doc = format!(
        "Kesoku tool metadata of `{base}`: its compile-time `SCHEMA` and its registry handle `TOOL`."
    );
    // Written out here rather than as `concat!`s for rustc to expand.
    let schema_doc = format!("The schema of the `{name}` tool, built at compile time.");
    let tool_doc = format!("The `{name}` tool, for `ToolRegistry::register({fn_ident}::TOOL)`.");
    let tracked = crate::targets::track_manifest();
    let checks = crate::targets::checks(&f.params, &checked.targets, &krate);
    quote! {
        #tracked

        #(#cfgs)*
        #checks

        #(#cfgs)*
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        const #schema_const: #krate::ToolSchema = #schema;

        #prepare

        // An empty enum lives in the type namespace only, so it can share the
        // function's name and give `calculate_sum::SCHEMA` paths, also for
        // tools defined inside a function body.
        #(#cfgs)*
        #[doc = #module_doc]
        #[allow(non_camel_case_types)]
        #vis enum #fn_ident {}

        #(#cfgs)*
        #[automatically_derived]
        impl #fn_ident {
            #[doc = #schema_doc]
            #vis const SCHEMA: &'static #krate::ToolSchema = &#schema_const;
            #[doc = #tool_doc]
            #vis const TOOL: &'static #krate::ToolDef =
                &#krate::ToolDef::new(Self::SCHEMA, #prepare_ref, #is_async);
        }

        #submit
    }
}

/// `Some("text")` or `None`, as tokens.
pub(crate) fn opt_str(s: Option<&str>) -> TokenStream {
    s.map_or_else(
        || quote!(::core::option::Option::None),
        |s| quote!(::core::option::Option::Some(#s)),
    )
}

fn schema_tokens(
    f: &ToolFn<'_>,
    opts: &ToolOptions,
    checked: &Checked,
    krate: &syn::Path,
) -> TokenStream {
    let fields = f
        .params
        .iter()
        .zip(&checked.arg_docs)
        .filter(|(p, _)| p.source == Source::Model)
        .map(|(p, doc)| {
            let key = unraw(p.ident);
            let ty = p.ty;
            let description = opt_str(doc.as_deref());
            // A constant of the user's: its type is checked where it is written.
            let (schema, required_unless_default) = if let Some(expr) = &p.schema {
                let schema = quote_spanned!(expr.span()=> {
                    const __KESOKU_SCHEMA: #krate::Schema = #expr;
                    __KESOKU_SCHEMA
                });
                let required = quote!(!#krate::__private::is_nullable(&#schema));
                (schema, required)
            } else {
                // Read from the type, where it is worked out once: a call
                // here cost every tool's constant its own evaluation.
                (
                    quote_spanned!(ty.span()=> <#ty as #krate::ToolArg>::SCHEMA),
                    quote_spanned!(ty.span()=> <#ty as #krate::ToolArg>::__REQUIRED),
                )
            };
            let (required, default) = match &p.default {
                Some(expr) => (
                    quote!(false),
                    quote! {
                        ::core::option::Option::Some({
                            fn __kesoku_default() -> ::core::option::Option<#krate::__private::Value> {
                                #[allow(unused_imports)]
                                use #krate::__private::{DefaultJson as _, NoDefaultJson as _};
                                let value: #ty = #expr;
                                (&#krate::__private::DefaultValue(value)).kesoku_default_json()
                            }
                            __kesoku_default as fn() -> ::core::option::Option<#krate::__private::Value>
                        })
                    },
                ),
                None => (required_unless_default, quote!(::core::option::Option::None)),
            };
            quote! {
                #krate::Field {
                    name: #key,
                    description: #description,
                    schema: &#schema,
                    required: #required,
                    default: #default,
                }
            }
        });
    let name = &checked.name;
    let description = &checked.description;
    let line = quote_spanned!(f.ident.span()=> ::core::line!());
    let with = schema_options(f, opts, checked, krate);
    // In this constant, next to `SCHEMA`, so an unmet `ToolArg` bound is
    // reported once.
    let exact = f
        .params
        .iter()
        .filter(|p| p.source == Source::Model)
        .map(|p| {
            let ty = p.ty;
            if p.schema.is_some() {
                // The schema is the user's word, not the type's: validate.
                quote!(false)
            } else {
                quote_spanned!(ty.span()=> <#ty as #krate::ToolArg>::EXACT)
            }
        });
    quote! {
        #krate::ToolSchema::new(
            #name,
            #description,
            #krate::ObjectSchema {
                fields: &[#(#fields),*],
                flatten: &[],
                description: ::core::option::Option::None,
            },
            #krate::Location {
                file: ::core::file!(),
                line: #line,
                module_path: ::core::module_path!(),
            },
        )
        #(#with)*
        .with_exact(#krate::__private::all_exact(&[#(#exact),*]))
    }
}

/// The `.with_*` calls of a tool's schema constant: only what differs
/// from `ToolSchema::new`'s defaults.
fn schema_options(
    f: &ToolFn<'_>,
    opts: &ToolOptions,
    checked: &Checked,
    krate: &syn::Path,
) -> Vec<TokenStream> {
    let mut with = Vec::new();
    if let Some(returns) = &checked.returns {
        with.push(quote!(.with_returns(#returns)));
    }
    if opts.coerce == Some(false) {
        with.push(quote!(.with_coerce(false)));
    }
    if let Some(ms) = checked.timeout_ms {
        with.push(quote!(.with_timeout(::core::time::Duration::from_millis(#ms))));
    }
    if opts.sequential.is_present() {
        with.push(quote!(.with_sequential(true)));
    }
    if opts.approval.is_present() {
        with.push(quote!(.with_approval(true)));
    }
    if let Some(uses) = &opts.max_uses {
        let uses = **uses;
        with.push(quote!(.with_max_uses(#uses)));
    }
    if let Some(calls) = &opts.max_parallel {
        let calls = **calls;
        with.push(quote!(.with_max_parallel(#calls)));
    }
    if let Some(title) = &opts.title {
        with.push(quote!(.with_title(#title)));
    }
    let hints = [
        (&opts.read_only, quote!(with_read_only)),
        (&opts.destructive, quote!(with_destructive)),
        (&opts.idempotent, quote!(with_idempotent)),
        (&opts.open_world, quote!(with_open_world)),
    ];
    let hints: Vec<TokenStream> = hints
        .into_iter()
        .filter_map(|(v, method)| v.as_ref().map(|v| (**v, method)))
        .map(|(v, method)| quote!(.#method(#v)))
        .collect();
    if !hints.is_empty() {
        with.push(quote!(.with_hints(#krate::ToolHints::new() #(#hints)*)));
    }
    let described = match &f.output {
        Output::Result(ty) => ok_type(ty).is_none_or(|ok| !has_nothing_to_describe(ok)),
        Output::Value(ty) => !has_nothing_to_describe(ty),
        Output::Unit => false,
    };
    if let (Output::Result(ty) | Output::Value(ty), true) = (&f.output, described) {
        // Trait resolution, which a constant cannot do, finds whether the
        // return type has a schema; a function pointer defers it.
        with.push(quote! {
            .with_output(|| {
                #[allow(unused_imports)]
                use #krate::__private::{OutputOfOther as _, OutputOfResult as _, OutputOfValue as _};
                (&&&#krate::__private::OutputProbe::<#ty>::NEW).kesoku_output_schema()
            })
        });
    }
    with
}

/// `T` of a type spelled `...Result<T, ...>`.
fn ok_type(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// Return types whose schema would say nothing an output schema is for
/// (a scalar, free JSON, a `ToolOutput`): no probe is emitted for them,
/// which keeps the expansion's compile time down for the most common
/// tools. Decided by spelling; anything else asks the trait system.
fn has_nothing_to_describe(ty: &syn::Type) -> bool {
    const SCALARS: &[&str] = &[
        "String",
        "str",
        "bool",
        "char",
        "i8",
        "i16",
        "i32",
        "i64",
        "i128",
        "isize",
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "usize",
        "f32",
        "f64",
        "Value",
        "ToolOutput",
    ];
    match ty {
        syn::Type::Reference(r) => has_nothing_to_describe(&r.elem),
        syn::Type::Tuple(t) => t.elems.is_empty(),
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last().is_some_and(|s| {
            s.arguments.is_none() && SCALARS.contains(&s.ident.to_string().as_str())
        }),
        _ => false,
    }
}

/// `__kesoku_prepare_x`: the one function a tool's calls go through. It
/// decodes the arguments into the model parameters (each known key once,
/// absent ones from their default or as `None`), asks whether the call was
/// interrupted, produces the context and injected parameters, and returns
/// the call ready to run. kesoku-core drives it on both the strict fast
/// path and, after validation, the slow path (see its `decode.rs`). It is
/// plain code over `Parsed` and `field`, generic only per parameter type.
fn prepare_tokens(
    f: &ToolFn<'_>,
    checked: &Checked,
    krate: &syn::Path,
    schema_const: &syn::Ident,
) -> TokenStream {
    let prepare_fn = format_ident!("__kesoku_prepare_{}", unraw(f.ident));
    let name = &checked.name;
    let ctx = format_ident!("__kesoku_ctx");
    let private = quote!(#krate::__private);
    let p = &private;

    let args = format_ident!("__kesoku_args");
    let mut decoded = Vec::new();
    let mut produced = Vec::new();
    let mut call_args = Vec::new();
    let mut field = 0_usize;
    for (i, param) in f.params.iter().enumerate() {
        let var = format_ident!("__kesoku_p{}", i);
        let ty = param.ty;
        match param.source {
            // Spanned at the type: a missing `Deserialize` is reported there.
            Source::Model => {
                decoded.push(if let Some(expr) = &param.default {
                    let get =
                        quote_spanned!(ty.span()=> #p::field_or_default::<#ty>(&#args, #field)?);
                    quote!(let #var: #ty = #get.unwrap_or_else(|| -> #ty { #expr });)
                } else {
                    let get = quote_spanned!(ty.span()=> #p::field::<#ty>(&#args, #field)?);
                    quote!(let #var: #ty = #get;)
                });
                field += 1;
                call_args.push(quote!(#var));
            }
            Source::Context { by_ref } => {
                produced.push(
                    quote!(let #var: #krate::ToolContext = ::core::clone::Clone::clone(#ctx);),
                );
                call_args.push(if by_ref { quote!(&#var) } else { quote!(#var) });
            }
            Source::Inject => {
                // A direct call of the public trait: an unmet bound names
                // `FromToolContext` and the type, nothing of ours.
                let inject = quote_spanned! {ty.span()=>
                    <#ty as #krate::FromToolContext>::from_tool_context(#ctx)
                        .map_err(|__kesoku_e| #p::inject_error(#name, __kesoku_e))?
                };
                produced.push(quote!(let #var: #ty = #inject;));
                call_args.push(quote!(#var));
            }
        }
    }
    // The interruption check comes once the arguments are known to be an
    // object of known keys, before any user code (`Deserialize` impls,
    // defaults) runs: the order of the slow path (parse, check, validate).
    let decode = quote! {
        let #args = #p::Parsed::new(__kesoku_raw, #schema_const.arguments.fields)?;
        #p::gate(__kesoku_interrupted)?;
        #(#decoded)*
    };
    let run = run_tokens(f, checked, krate, &call_args);
    let cfgs = f.item.attrs.iter().filter(|a| a.path().is_ident("cfg"));
    quote! {
        #(#cfgs)*
        #[doc(hidden)]
        fn #prepare_fn(
            __kesoku_raw: #p::RawArgs<'_>,
            #ctx: &#krate::ToolContext,
            __kesoku_interrupted: ::core::option::Option<&dyn ::core::ops::Fn() -> bool>,
        ) -> ::core::result::Result<#krate::Invocation, #p::PrepareError> {
            #decode
            #(#produced)*
            ::core::result::Result::Ok(#run)
        }
    }
}

/// The call itself: the user's function, awaited or handed to the
/// blocking pool, and its return value converted.
fn run_tokens(
    f: &ToolFn<'_>,
    checked: &Checked,
    krate: &syn::Path,
    call_args: &[TokenStream],
) -> TokenStream {
    let fn_ident = f.ident;
    let out = quote!(__kesoku_out);
    let convert = crate::call::convert(f, checked, krate, &out);
    if f.is_async {
        quote! {
            #krate::Invocation::Async(::std::boxed::Box::pin(async move {
                let #out = #fn_ident(#(#call_args),*).await;
                #convert
            }))
        }
    } else {
        quote! {
            #krate::Invocation::Blocking(::std::boxed::Box::new(move || {
                let #out = #fn_ident(#(#call_args),*);
                #convert
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

    fn expand(args: TokenStream, item: &TokenStream) -> String {
        super::tool(args, item).to_string()
    }

    #[test]
    fn an_error_keeps_the_companion_with_placeholders() {
        // No description: one error.
        let out = expand(
            quote!(),
            &quote!(
                pub fn foo(x: u8) -> u8 {
                    x
                }
            ),
        );
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("pub enum foo { }"), "{out}");
        assert!(
            out.contains(
                "pub const SCHEMA : & 'static :: kesoku :: ToolSchema = :: kesoku :: __private :: PLACEHOLDER_SCHEMA"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "pub const TOOL : & 'static :: kesoku :: ToolDef = :: kesoku :: __private :: PLACEHOLDER_TOOL"
            ),
            "{out}"
        );
        // Nothing is registered.
        assert!(!out.contains("inventory"), "{out}");
    }

    #[test]
    fn register_false_leaves_the_default_registry_alone() {
        let item = quote! {
            /// Does it.
            fn builtin() {}
        };
        let registered = expand(quote!(), &item);
        assert!(registered.contains("inventory"), "{registered}");
        let unregistered = expand(quote!(register = false), &item);
        assert!(!unregistered.contains("inventory"), "{unregistered}");
        assert!(unregistered.contains("const TOOL"), "{unregistered}");
    }

    #[test]
    fn placeholders_follow_crate_path_and_cfg() {
        let out = expand(
            quote!(crate = my::kesoku, name = "1bad"),
            &quote! {
                /// Does it.
                #[cfg(feature = "x")]
                fn foo() {}
            },
        );
        assert!(out.contains("compile_error"), "{out}");
        assert!(
            out.contains("my :: kesoku :: __private :: PLACEHOLDER_TOOL"),
            "{out}"
        );
        assert_eq!(out.matches("# [cfg (feature = \"x\")]").count(), 3, "{out}");
    }

    #[test]
    fn no_placeholder_where_it_would_be_an_error() {
        let method = expand(
            quote!(),
            &quote!(
                fn add(&self) {}
            ),
        );
        let primitive = expand(
            quote!(),
            &quote!(
                fn f64() {}
            ),
        );
        for out in [method, primitive] {
            assert!(out.contains("compile_error"), "{out}");
            assert!(!out.contains("enum"), "{out}");
        }
    }
}
