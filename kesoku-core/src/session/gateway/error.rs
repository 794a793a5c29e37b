//! [`GatewayError`]: why the gateway could not save or deliver a message.

use crate::session::store::StoreError;

/// Why the gateway could not save or deliver a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
