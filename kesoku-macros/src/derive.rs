//! `#[derive(ToolArg)]`: a compile-time schema for a user struct or enum
//! that follows its serde representation, read with serde's own attribute
//! parser (`serde_derive_internals`), so `rename`, `rename_all`, `default`,
//! `skip`, `flatten`, `tag` and `content` mean exactly what serde makes them.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use serde_derive_internals::ast::{Container, Data, Field, Style, Variant};
use serde_derive_internals::attr::TagType;
use serde_derive_internals::{Ctxt as SerdeCtxt, Derive};
use syn::DeriveInput;
use syn::spanned::Spanned as _;

use crate::ast::DocLines;
use crate::ctxt::Ctxt;
use crate::docs;
use crate::expand::opt_str;

pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let krate = crate_path(&cx, input);
    let seen = Seen::default();
    let body = body(&cx, input, &krate, &seen);
    match cx.check() {
        Ok(()) => {
            let ident = &input.ident;
            let name = ident.to_string();
            let description = opt_str(doc_text(&input.attrs).as_deref());
            let constructs = constructs(ident, &seen, &krate);
            // The body is behind a function in `SCHEMA` (a recursive type's
            // constants would be cyclic otherwise), and read as a constant
            // for what it is built of.
            quote! {
                const _: () = {
                    const __KESOKU_BODY: #krate::Schema = #body;
                    fn __kesoku_body() -> &'static #krate::Schema {
                        &__KESOKU_BODY
                    }
                    #[automatically_derived]
                    impl #krate::ToolArg for #ident {
                        const SCHEMA: #krate::Schema = #krate::Schema::Named(&#krate::NamedSchema {
                            name: #name,
                            id: ::core::concat!(::core::module_path!(), "::", #name),
                            description: #description,
                            body: __kesoku_body,
                        });
                        const __CONSTRUCTS: #krate::Constructs = #constructs;
                    }
                };
            }
        }
        // A placeholder impl keeps every tool taking this type from being a
        // second error (also in an editor, which goes on past the first).
        Err(e) => {
            let ident = &input.ident;
            let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
            let errors = e.to_compile_error();
            quote! {
                #[automatically_derived]
                impl #impl_generics #krate::ToolArg for #ident #ty_generics #where_clause {
                    const SCHEMA: #krate::Schema = #krate::Schema::Any;
                    // Not a second error from a tool's targets.
                    const __CONSTRUCTS: #krate::Constructs = #krate::Constructs::NONE;
                }
                #errors
            }
        }
    }
}

/// `#[kesoku(crate = path)]`, defaulting to `::kesoku`.
fn crate_path(cx: &Ctxt, input: &DeriveInput) -> syn::Path {
    let mut path = syn::parse_quote!(::kesoku);
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("kesoku")) {
        let res = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                path = meta.value()?.parse()?;
                Ok(())
            } else {
                Err(meta.error("unknown `#[kesoku]` option; the only option is `crate = path`"))
            }
        });
        if let Err(e) = res {
            cx.syn_error(e);
        }
    }
    path
}

fn body(cx: &Ctxt, input: &DeriveInput, krate: &syn::Path, seen: &Seen) -> TokenStream {
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "#[derive(ToolArg)] does not support generic types yet: the schema is a constant of one concrete type",
        );
        return quote!(#krate::Schema::Any);
    }
    let serde_cx = SerdeCtxt::new();
    let container = Container::from_ast(&serde_cx, input, Derive::Deserialize);
    if let Err(e) = serde_cx.check() {
        cx.syn_error(e);
        return quote!(#krate::Schema::Any);
    }
    let Some(container) = container else {
        cx.error_spanned_by(&input.ident, "cannot read this type's serde attributes");
        return quote!(#krate::Schema::Any);
    };
    let container_default = !container.attrs.default().is_none();
    // `#[serde(from = "T")]` / `try_from`: the wire format is T's.
    if let Some(from) = container
        .attrs
        .type_from()
        .or(container.attrs.type_try_from())
    {
        seen.push(from, false);
        return type_schema(from, krate);
    }
    match &container.data {
        Data::Struct(_, fields) if container.attrs.transparent() => fields
            .iter()
            .find(|f| !f.attrs.skip_deserializing())
            .map_or_else(
                || quote!(#krate::Schema::Any),
                |f| field_schema(cx, f, krate, seen, false),
            ),
        Data::Struct(Style::Struct, fields) => {
            object(cx, fields, None, container_default, krate, seen)
        }
        Data::Struct(Style::Newtype, fields) => field_schema(cx, &fields[0], krate, seen, false),
        Data::Struct(Style::Tuple, fields) => tuple(cx, fields, krate, seen),
        Data::Struct(Style::Unit, _) => {
            cx.error_spanned_by(
                &input.ident,
                "a unit struct carries no data and cannot be a tool argument",
            );
            quote!(#krate::Schema::Any)
        }
        Data::Enum(variants) => enumeration(cx, container.attrs.tag(), variants, krate, seen),
    }
}

fn enumeration(
    cx: &Ctxt,
    tag: &TagType,
    variants: &[Variant<'_>],
    krate: &syn::Path,
    seen: &Seen,
) -> TokenStream {
    let variants: Vec<&Variant<'_>> = variants
        .iter()
        .filter(|v| !v.attrs.skip_deserializing())
        .collect();
    if let Some(v) = variants
        .iter()
        .find(|v| v.attrs.other() || v.attrs.untagged())
    {
        cx.error_spanned_by(
            &v.ident,
            "#[derive(ToolArg)] does not support `#[serde(other)]` or per-variant `#[serde(untagged)]` yet: their accepted values cannot be listed in a schema",
        );
        return quote!(#krate::Schema::Any);
    }
    let all_unit = variants.iter().all(|v| matches!(v.style, Style::Unit));
    if all_unit && matches!(tag, TagType::External) {
        let names = variants.iter().map(|v| v.attrs.name().deserialize_name());
        return quote!(#krate::Schema::Enum(&[#(#names),*]));
    }
    let alts = variants.iter().map(|v| variant(cx, tag, v, krate, seen));
    quote!(#krate::Schema::OneOf(&[#(#alts),*]))
}

/// One alternative of a data-carrying enum, in the enum's serde representation.
fn variant(
    cx: &Ctxt,
    tag: &TagType,
    v: &Variant<'_>,
    krate: &syn::Path,
    seen: &Seen,
) -> TokenStream {
    let name = v.attrs.name().deserialize_name();
    let doc = doc_text(&v.original.attrs);
    let desc = opt_str(doc.as_deref());
    // An internally tagged variant's payload is flattened beside the tag.
    let flattened = matches!(tag, TagType::Internal { .. });
    let payload = || match v.style {
        Style::Struct => object(cx, &v.fields, doc.as_deref(), false, krate, seen),
        Style::Newtype => field_schema(cx, &v.fields[0], krate, seen, flattened),
        Style::Tuple => tuple(cx, &v.fields, krate, seen),
        Style::Unit => quote!(#krate::Schema::Any),
    };
    let tag_field = |tag: &str| {
        let c = quote!(#krate::Schema::Const { value: #name, description: ::core::option::Option::None });
        field_tokens(tag, None, &c, &quote!(true), krate)
    };
    let obj = |fields: Vec<TokenStream>, flatten: Vec<TokenStream>| {
        quote!(#krate::Schema::Object(&#krate::ObjectSchema {
            fields: &[#(#fields),*],
            flatten: &[#(#flatten),*],
            description: #desc,
        }))
    };
    match (tag, v.style) {
        (TagType::External, Style::Unit) => {
            quote!(#krate::Schema::Const { value: #name, description: #desc })
        }
        (TagType::External, _) => {
            let inner = payload();
            obj(
                vec![field_tokens(name, None, &inner, &quote!(true), krate)],
                vec![],
            )
        }
        (TagType::Internal { tag } | TagType::Adjacent { tag, .. }, Style::Unit) => {
            obj(vec![tag_field(tag)], vec![])
        }
        (TagType::Internal { tag }, Style::Struct | Style::Newtype) => {
            obj(vec![tag_field(tag)], vec![payload()])
        }
        (TagType::Internal { .. }, Style::Tuple) => {
            cx.error_spanned_by(
                &v.ident,
                "serde cannot represent a tuple variant in an internally tagged enum",
            );
            quote!(#krate::Schema::Any)
        }
        (TagType::Adjacent { tag, content }, _) => {
            let inner = payload();
            obj(
                vec![
                    tag_field(tag),
                    field_tokens(content, None, &inner, &quote!(true), krate),
                ],
                vec![],
            )
        }
        (TagType::None, Style::Unit) => {
            cx.error_spanned_by(&v.ident, "#[derive(ToolArg)] does not support unit variants of untagged enums (they are `null`)");
            quote!(#krate::Schema::Any)
        }
        (TagType::None, _) => payload(),
    }
}

fn object(
    cx: &Ctxt,
    fields: &[Field<'_>],
    description: Option<&str>,
    all_default: bool,
    krate: &syn::Path,
    seen: &Seen,
) -> TokenStream {
    let mut own = Vec::new();
    let mut flatten = Vec::new();
    for f in fields.iter().filter(|f| !f.attrs.skip_deserializing()) {
        let schema = field_schema(cx, f, krate, seen, f.attrs.flatten());
        if f.attrs.flatten() {
            flatten.push(schema);
            continue;
        }
        let has_default = all_default || !f.attrs.default().is_none();
        let required = if has_default {
            quote!(false)
        } else {
            quote!(!#krate::__private::is_nullable(&#schema))
        };
        let doc = doc_text(&f.original.attrs);
        own.push(field_tokens(
            f.attrs.name().deserialize_name(),
            doc.as_deref(),
            &schema,
            &required,
            krate,
        ));
    }
    let description = opt_str(description);
    quote!(#krate::Schema::Object(&#krate::ObjectSchema {
        fields: &[#(#own),*],
        flatten: &[#(#flatten),*],
        description: #description,
    }))
}

fn tuple(cx: &Ctxt, fields: &[Field<'_>], krate: &syn::Path, seen: &Seen) -> TokenStream {
    let items = fields
        .iter()
        .filter(|f| !f.attrs.skip_deserializing())
        .map(|f| field_schema(cx, f, krate, seen, false));
    quote!(#krate::Schema::Tuple(&[#(#items),*]))
}

fn field_tokens(
    name: &str,
    description: Option<&str>,
    schema: &TokenStream,
    required: &TokenStream,
    krate: &syn::Path,
) -> TokenStream {
    let description = opt_str(description);
    quote!(#krate::Field {
        name: #name,
        description: #description,
        schema: &#schema,
        required: #required,
        default: ::core::option::Option::None,
    })
}

/// A field's schema: the one `#[kesoku(schema = ...)]` gives; else its
/// type's, unless a `deserialize_with` function reads it, whose format the
/// type does not tell: then any value, and serde has the last word.
fn field_schema(
    cx: &Ctxt,
    f: &Field<'_>,
    krate: &syn::Path,
    seen: &Seen,
    flattened: bool,
) -> TokenStream {
    if let Some(expr) = schema_override(cx, f) {
        quote_spanned!(expr.span()=> {
            const __KESOKU_SCHEMA: #krate::Schema = #expr;
            __KESOKU_SCHEMA
        })
    } else if f.attrs.deserialize_with().is_some() {
        quote!(#krate::Schema::Any)
    } else {
        seen.push(f.ty, flattened);
        type_schema(f.ty, krate)
    }
}

/// A field's `#[kesoku(schema = <Schema constant>)]`, for a type with no
/// `ToolArg` of its own (serde's `with` for the schema).
fn schema_override(cx: &Ctxt, f: &Field<'_>) -> Option<syn::Expr> {
    let mut found = None;
    for attr in f
        .original
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("kesoku"))
    {
        let res = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("schema") {
                let expr: syn::Expr = meta.value()?.parse()?;
                if found.replace(expr).is_some() {
                    return Err(meta.error("duplicate `schema`"));
                }
                Ok(())
            } else {
                Err(meta.error(
                    "unknown `#[kesoku]` field option; the only option is `schema = <Schema constant>`",
                ))
            }
        });
        if let Err(e) = res {
            cx.syn_error(e);
        }
    }
    found
}

fn type_schema(ty: &syn::Type, krate: &syn::Path) -> TokenStream {
    quote!(<#ty as #krate::ToolArg>::SCHEMA)
}

/// The field types a body reads its schema from (their `ToolArg`s), each
/// with whether it is flattened into an object.
#[derive(Default)]
struct Seen(std::cell::RefCell<Vec<(syn::Type, bool)>>);

impl Seen {
    fn push(&self, ty: &syn::Type, flattened: bool) {
        self.0.borrow_mut().push((ty.clone(), flattened));
    }
}

/// What the type is built of that some provider refuses: its body's own
/// tree, and each field type's constructs (flattened ones open the object
/// when they are not objects). A field whose type names the type itself
/// makes it recursive, and is not read again (its constant would be
/// cyclic).
fn constructs(ident: &syn::Ident, seen: &Seen, krate: &syn::Path) -> TokenStream {
    let fields = seen.0.borrow();
    let mut uses = Vec::new();
    let mut recursive = false;
    for (ty, flattened) in fields.iter() {
        if names(ty, ident) {
            // Not read again (the constant would be cyclic), but the other
            // types inside it are (its containers are in the body's tree).
            recursive = true;
            for inner in others(ty, ident) {
                uses.push(quote!(.with(#krate::__private::constructs::<#inner>())));
            }
        } else if *flattened {
            uses.push(quote!(.with(#krate::__private::constructs::<#ty>().flattened())));
        } else {
            uses.push(quote!(.with(#krate::__private::constructs::<#ty>())));
        }
    }
    if recursive {
        uses.push(quote!(.with(#krate::Constructs::RECURSIVE)));
    }
    quote!(#krate::Constructs::of(&__KESOKU_BODY) #(#uses)*)
}

/// Whether `ty` names the type `ident` (unqualified, or `Self`) anywhere:
/// `other::Config` inside `Config` is another type.
fn names(ty: &syn::Type, ident: &syn::Ident) -> bool {
    use syn::visit::Visit;
    struct Finder<'a>(&'a syn::Ident, bool);
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_type_path(&mut self, path: &'ast syn::TypePath) {
            let p = &path.path;
            if path.qself.is_none()
                && p.leading_colon.is_none()
                && p.segments.len() == 1
                && (p.segments[0].ident == *self.0 || p.segments[0].ident == "Self")
            {
                self.1 = true;
            }
            syn::visit::visit_type_path(self, path);
        }
    }
    let mut finder = Finder(ident, false);
    finder.visit_type(ty);
    finder.1
}

/// The largest types inside `ty` (which names `ident`) that do not name
/// it, through the containers kesoku knows: a tuple's items, a `Vec`'s or
/// `Option`'s item, a map's values.
fn others<'a>(ty: &'a syn::Type, ident: &syn::Ident) -> Vec<&'a syn::Type> {
    let mut out = Vec::new();
    let mut push = |inner: &'a syn::Type| {
        if names(inner, ident) {
            out.extend(others(inner, ident));
        } else {
            out.push(inner);
        }
    };
    match ty {
        syn::Type::Tuple(t) => t.elems.iter().for_each(push),
        syn::Type::Array(a) => push(&a.elem),
        syn::Type::Slice(s) => push(&s.elem),
        syn::Type::Paren(p) => push(&p.elem),
        syn::Type::Group(g) => push(&g.elem),
        syn::Type::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else {
                return out;
            };
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return out;
            };
            let types: Vec<&syn::Type> = args
                .args
                .iter()
                .filter_map(|a| match a {
                    syn::GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect();
            let name = last.ident.to_string();
            match name.as_str() {
                "Vec" | "VecDeque" | "Option" | "Box" | "HashSet" | "BTreeSet" => {
                    if let Some(t) = types.first() {
                        push(t);
                    }
                }
                "HashMap" | "BTreeMap" => {
                    if let Some(t) = types.get(1) {
                        push(t);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
    out
}

/// The description part of an item's doc comment, if it has one.
fn doc_text(attrs: &[syn::Attribute]) -> Option<String> {
    let lines = DocLines::from_attrs(attrs);
    let texts: Vec<&str> = lines.lines.iter().map(|l| l.text.as_str()).collect();
    let d = docs::parse(&texts).description;
    (!d.trim().is_empty()).then_some(d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_keeps_a_placeholder_impl() {
        let input: syn::DeriveInput = syn::parse_quote! {
            #[kesoku(crate = my::kesoku)]
            struct Wrapper<T: Clone> where T: Copy;
        };
        let out = super::derive(&input).to_string();
        assert!(out.contains("compile_error"), "{out}");
        assert!(
            out.contains(
                "impl < T : Clone > my :: kesoku :: ToolArg for Wrapper < T > where T : Copy { const SCHEMA : my :: kesoku :: Schema = my :: kesoku :: Schema :: Any ; const __CONSTRUCTS : my :: kesoku :: Constructs = my :: kesoku :: Constructs :: NONE ; }"
            ),
            "{out}"
        );
    }
}
