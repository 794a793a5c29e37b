//! The providers a tool must work with: `#[tool(targets(...))]`, or the
//! crate's default in its `Cargo.toml`:
//!
//! ```toml
//! [package.metadata.kesoku]
//! targets = ["gemini", "openai_strict"]
//! ```
//!
//! Each name is a variant of `kesoku::Target`; the check itself is a
//! constant beside each tool's schema ([`checks`]), which the build evaluates.

use std::sync::OnceLock;

use darling::util::PathList;
use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens as _, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Param, Source};
use crate::ctxt::Ctxt;

/// Each target's name in `targets(...)` and its `Target` variant.
const NAMES: [(&str, &str); 7] = [
    ("anthropic", "Anthropic"),
    ("anthropic_structured", "AnthropicStructured"),
    ("openai", "OpenAi"),
    ("openai_strict", "OpenAiStrict"),
    ("gemini", "Gemini"),
    ("gemini_json_schema", "GeminiJsonSchema"),
    ("mcp", "Mcp"),
];

fn listed() -> String {
    NAMES
        .iter()
        .map(|(name, _)| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The declared targets as `Target` variant names: the tool's own, else
/// the crate's default. Unknown names are errors at the name.
pub(crate) fn resolve(cx: &Ctxt, declared: Option<&PathList>) -> Vec<syn::Ident> {
    let mut out: Vec<syn::Ident> = Vec::new();
    let mut add = |name: &str, span: Span, whose: &str| {
        if let Some((_, variant)) = NAMES.iter().find(|(n, _)| *n == name) {
            let ident = syn::Ident::new(variant, span);
            if !out.contains(&ident) {
                out.push(ident);
            }
            return;
        }
        let closest = NAMES
            .iter()
            .map(|(n, _)| (strsim::normalized_damerau_levenshtein(name, n), *n))
            .filter(|(score, _)| *score >= 0.5)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map_or_else(String::new, |(_, n)| format!(" (did you mean `{n}`?)"));
        cx.error_at(
            span,
            format!(
                "unknown target `{name}`{whose}{closest}; the targets are {}",
                listed()
            ),
        );
    };
    match declared {
        Some(paths) => {
            for path in paths.iter() {
                match path.get_ident() {
                    Some(ident) => add(&ident.to_string(), ident.span(), ""),
                    None => cx
                        .error_spanned_by(path, format!("a target is a name, one of {}", listed())),
                }
            }
        }
        None => match crate_default() {
            Ok(names) => {
                for name in names {
                    add(
                        name,
                        Span::call_site(),
                        " in the crate's `[package.metadata.kesoku] targets`",
                    );
                }
            }
            Err(e) => cx.error_at(Span::call_site(), e.clone()),
        },
    }
    out
}

/// Tokens that make rustc rebuild the crate when its `Cargo.toml`
/// changes (Cargo does not for `[package.metadata]`), emitted by the first
/// expansion of a compilation only, whether or not the manifest declares
/// a default yet (adding one must rebuild too); none outside Cargo.
pub(crate) fn track_manifest() -> proc_macro2::TokenStream {
    static TRACKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .is_some_and(|dir| std::path::Path::new(&dir).join("Cargo.toml").is_file());
    if !manifest || TRACKED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return proc_macro2::TokenStream::new();
    }
    quote::quote! {
        const _: &[u8] = ::core::include_bytes!(::core::concat!(::core::env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    }
}

/// `[package.metadata.kesoku] targets` of the crate being compiled, read
/// once per compilation.
fn crate_default() -> &'static Result<Vec<String>, String> {
    static DEFAULT: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
            return Ok(Vec::new());
        };
        let path = std::path::Path::new(&dir).join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(Vec::new());
        };
        default_in(&text).map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// The `[package.metadata.kesoku] targets` list of a manifest's text.
fn default_in(manifest: &str) -> Result<Vec<String>, String> {
    // Cheap before parsing: most crates declare nothing.
    if !manifest.contains("kesoku") {
        return Ok(Vec::new());
    }
    let table: toml::Table = manifest.parse().map_err(|e| format!("{e}"))?;
    let Some(targets) = table
        .get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("kesoku"))
        .and_then(|k| k.get("targets"))
    else {
        return Ok(Vec::new());
    };
    let wrong = || {
        format!(
            "`[package.metadata.kesoku] targets` must be a list of target names, such as `[\"gemini\", \"openai_strict\"]`; the targets are {}",
            listed()
        )
    };
    targets
        .as_array()
        .ok_or_else(wrong)?
        .iter()
        .map(|t| t.as_str().map(str::to_owned).ok_or_else(wrong))
        .collect()
}

/// When targets are declared, an anonymous constant beside the schema's:
/// for each model parameter, a statement that panics, spanned on the
/// parameter's type, with why the first target that refuses it does. Its
/// evaluation fails the build there (and names no item of ours).
pub(crate) fn checks(
    params: &[Param<'_>],
    targets: &[syn::Ident],
    krate: &syn::Path,
) -> TokenStream {
    if targets.is_empty() {
        return TokenStream::new();
    }
    // The set, as `__private::refuse` reads it: bit `i` is the `i`th of
    // `NAMES` (`Target::ALL`'s order).
    let mask: u8 = targets
        .iter()
        .filter_map(|t| NAMES.iter().position(|(_, variant)| t == variant))
        .fold(0, |mask, i| mask | (1 << i));
    let checks = params
        .iter()
        .filter(|p| p.source == Source::Model)
        .map(|param| {
            let ty = param.ty;
            // `refuse` is `#[track_caller]`: a refusal is reported at this
            // call, which (all of its tokens) is spanned at the parameter,
            // and names none of our items.
            let span = param
                .schema
                .as_ref()
                .map_or_else(|| ty.span(), Spanned::span);
            let krate = respan(krate.to_token_stream(), span);
            let p = quote_spanned!(span=> #krate::__private);
            if let Some(expr) = &param.schema {
                quote_spanned! {span=>
                    #p::refuse(#mask, &#krate::Constructs::of(&{
                        const __KESOKU_SCHEMA: #krate::Schema = #expr;
                        __KESOKU_SCHEMA
                    }).refusals());
                }
            } else {
                // Worked out once per type, not per tool.
                quote_spanned! {span=>
                    #p::refuse(#mask, &<#ty as #krate::ToolArg>::__REFUSALS);
                }
            }
        });
    // An anonymous constant: the error names it `_`, not our items.
    quote! {
        const _: () = {
            #(#checks)*
        };
    }
}

/// `tokens`, every one of them (inside groups too) spanned at `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(g) = &tree {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tree = TokenTree::Group(group);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::default_in;

    #[test]
    fn the_crate_default_is_read_from_package_metadata() {
        let manifest = r#"
[package]
name = "x"
[package.metadata.kesoku]
targets = ["gemini", "openai_strict"]
[dependencies]
kesoku = "0.1"
"#;
        assert_eq!(default_in(manifest).unwrap(), ["gemini", "openai_strict"]);
        assert!(
            default_in("[package]\nname = \"x\"\n[dependencies]\nkesoku = \"1\"\n")
                .unwrap()
                .is_empty()
        );
        let wrong = default_in("[package.metadata.kesoku]\ntargets = \"gemini\"\n").unwrap_err();
        assert!(wrong.contains("must be a list of target names"), "{wrong}");
    }
}
