//! [`ErrorSource`]: an error kept as the source of another, where that
//! other must stay `Clone` and comparable; [`ErrorChain`]: an error and
//! its sources, as one line.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// The error under another: a database's, a client's. Shared, so the error
/// that holds it stays `Clone`; transparent, so it reads as the error it
/// holds (its `Display` and its own `source`); two are equal when they say
/// the same.
///
/// ```
/// use std::error::Error as _;
/// use kesoku_core::store::StoreError;
///
/// let io = std::io::Error::other("disk full");
/// let err = StoreError::backend("MyStore", "save message `m1`", io);
/// // The error says what failed; its source, why.
/// assert_eq!(err.to_string(), "the MyStore store failed to save message `m1`");
/// assert_eq!(err.source().unwrap().to_string(), "disk full");
/// ```
#[derive(Clone)]
pub struct ErrorSource(Arc<dyn Error + Send + Sync + 'static>);

impl ErrorSource {
    /// Keeps `error`.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        ErrorSource(Arc::new(error))
    }

    /// The error kept, to downcast to its own type.
    #[must_use]
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl Error for ErrorSource {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

impl Eq for ErrorSource {}

/// An error and its [`source`](Error::source)s, as one line: `error:
/// source: its source`. kesoku's errors print what failed and leave why to
/// their source (never both, so a chain says each thing once); this is
/// how to show the whole of one where no chain is printed (a log field, a
/// note stored for the model). A source whose text was already said (an
/// error of another crate that prints its source too) is left out.
///
/// ```
/// use kesoku_core::ErrorChain;
/// use kesoku_core::store::StoreError;
///
/// let io = std::io::Error::other("disk full");
/// let err = StoreError::backend("MyStore", "save message `m1`", io);
/// assert_eq!(
///     ErrorChain(&err).to_string(),
///     "the MyStore store failed to save message `m1`: disk full"
/// );
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut next = self.0.source();
        while let Some(cause) = next {
            let said = cause.to_string();
            if !said.is_empty() && !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            next = cause.source();
        }
        f.write_str(&text)
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
