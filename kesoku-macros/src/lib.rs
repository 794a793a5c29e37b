//! The `#[tool]` attribute and `#[derive(ToolArg)]` of kesoku.
//!
//! Use them through the `kesoku` crate, which re-exports both and the
//! runtime items their expansions name.

mod ast;
mod attr;
mod call;
mod ctxt;
mod derive;
mod docs;
mod expand;
mod targets;
mod valid;

use proc_macro::TokenStream;

/// Turns a function into an LLM tool. See the `kesoku` crate's docs.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, input: TokenStream) -> TokenStream {
    expand::tool(args.into(), &input.into()).into()
}

/// Derives `kesoku::ToolArg`: a compile-time JSON Schema that follows the
/// type's serde representation. See the `kesoku` crate's docs.
#[proc_macro_derive(ToolArg, attributes(kesoku, serde))]
pub fn derive_tool_arg(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    derive::derive(&input).into()
}
