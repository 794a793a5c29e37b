//! [`ErrorSource`]: an error kept as the source of another, where that
//! other must stay `Clone` and comparable.

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
/// assert_eq!(err.to_string(), "the MyStore store failed to save message `m1`: disk full");
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
