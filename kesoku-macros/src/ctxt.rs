//! Error collection, after serde's `Ctxt`: every check records its errors
//! here so that one compile reports all of them.

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

/// Collects errors. Dropping it without [`Ctxt::check`] is a bug in the
/// macro and panics, so no error is ever lost.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub(crate) fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error spanning `tokens`.
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, msg: M) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// Records an error at `span`.
    pub(crate) fn error_at<M: Display>(&self, span: proc_macro2::Span, msg: M) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// Records a parse error.
    pub(crate) fn syn_error(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// Consumes the context: all errors combined into one, if any.
    pub(crate) fn check(self) -> syn::Result<()> {
        let mut errors = self
            .errors
            .borrow_mut()
            .take()
            .expect("Ctxt checked twice")
            .into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        assert!(
            std::thread::panicking() || self.errors.borrow().is_none(),
            "kesoku-macros: Ctxt dropped without check()"
        );
    }
}
