//! Options of `#[tool(...)]` and of the parameter attributes `#[arg(...)]`
//! and `#[inject]`.

use darling::FromMeta;
use darling::util::{Flag, SpannedValue};
use syn::spanned::Spanned;

use crate::ctxt::Ctxt;

/// `#[tool(name = "...", description = "...", crate = path, ...)]`.
#[derive(Debug, Default, FromMeta)]
#[darling(default)]
pub(crate) struct ToolOptions {
    /// The name the model calls; the function name by default.
    pub(crate) name: Option<syn::LitStr>,
    /// Replaces the doc text as the description.
    pub(crate) description: Option<syn::LitStr>,
    /// Path of the `kesoku` crate in generated code; `::kesoku` by default.
    #[darling(rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
    /// Allows parameters without an `# Arguments` entry.
    pub(crate) allow_undocumented_args: Flag,
    /// Lenient scalar coercion (`"5"` → `5`); on by default.
    pub(crate) coerce: Option<bool>,
    /// The call's time limit, such as `"30s"` or `"500ms"`.
    pub(crate) timeout: Option<syn::LitStr>,
    /// The tool runs alone, never beside another call.
    pub(crate) sequential: Flag,
    /// A person must approve each call before it runs.
    pub(crate) approval: Flag,
    /// At most this many calls of the tool in one agent turn.
    pub(crate) max_uses: Option<SpannedValue<u32>>,
    /// At most this many calls of the tool at once.
    pub(crate) max_parallel: Option<SpannedValue<u32>>,
    /// `register = false`: not added to the default registry; users add
    /// its `TOOL` to theirs (for a library's built-in tools).
    pub(crate) register: Option<bool>,
    /// A human-readable title (MCP's `title`).
    pub(crate) title: Option<syn::LitStr>,
    /// The tool changes nothing (MCP's `readOnlyHint`).
    pub(crate) read_only: Option<SpannedValue<bool>>,
    /// A change it makes may destroy something (`destructiveHint`).
    pub(crate) destructive: Option<SpannedValue<bool>>,
    /// Repeating a call does nothing more (`idempotentHint`).
    pub(crate) idempotent: Option<SpannedValue<bool>>,
    /// It reaches an open world, such as the web (`openWorldHint`).
    pub(crate) open_world: Option<SpannedValue<bool>>,
    /// `targets(gemini, openai_strict)`: providers whose refusal of a
    /// parameter fails the build; the crate's default if absent.
    pub(crate) targets: Option<darling::util::PathList>,
}

/// What `#[arg(...)]` on a parameter says.
#[derive(Default)]
pub(crate) struct ArgOptions {
    /// `#[arg(default = expr)]`, or `#[arg(default)]` for `Default::default()`.
    pub(crate) default: Option<syn::Expr>,
    /// `#[arg(schema = expr)]`: the schema (a constant `Schema`) to show
    /// instead of the type's, for a type with no `ToolArg` of its own.
    pub(crate) schema: Option<syn::Expr>,
    /// `#[inject]`: the parameter comes from the context.
    pub(crate) inject: Option<proc_macro2::Span>,
}

impl ArgOptions {
    /// Reads (and the caller strips) the kesoku attributes of a parameter.
    /// Unknown keys are errors at the key.
    pub(crate) fn from_attrs(cx: &Ctxt, attrs: &[syn::Attribute]) -> Self {
        let mut out = ArgOptions::default();
        for attr in attrs {
            if attr.path().is_ident("inject") {
                if let syn::Meta::Path(_) = attr.meta {
                    out.inject = Some(attr.span());
                } else {
                    cx.error_spanned_by(attr, "`#[inject]` takes no arguments");
                }
            } else if attr.path().is_ident("arg") {
                let res =
                    attr.parse_nested_meta(|meta| {
                        if meta.path.is_ident("default") {
                            let expr = if meta.input.peek(syn::Token![=]) {
                                meta.value()?.parse::<syn::Expr>()?
                            } else {
                                syn::parse_quote!(::core::default::Default::default())
                            };
                            if out.default.replace(expr).is_some() {
                                return Err(meta.error("duplicate `default`"));
                            }
                            Ok(())
                        } else if meta.path.is_ident("schema") {
                            let expr = meta.value()?.parse::<syn::Expr>()?;
                            if out.schema.replace(expr).is_some() {
                                return Err(meta.error("duplicate `schema`"));
                            }
                            Ok(())
                        } else {
                            Err(meta.error(format!(
                            "unknown `#[arg]` option `{}`; the options are `default = <expr>` and `schema = <Schema constant>`",
                            meta.path.get_ident().map_or_else(|| "?".into(), ToString::to_string)
                        )))
                        }
                    });
                if let Err(e) = res {
                    cx.syn_error(e);
                }
            }
        }
        out
    }

    /// Whether `attr` is one of ours, to be stripped from the emitted function.
    pub(crate) fn is_ours(attr: &syn::Attribute) -> bool {
        attr.path().is_ident("arg") || attr.path().is_ident("inject")
    }
}
