//! [`PostgresOptions`]: how a [`PostgresStore`](crate::PostgresStore)
//! connects.

use std::time::Duration;

/// How [`PostgresStore::connect_with`](crate::PostgresStore::connect_with)
/// connects.
///
/// ```
/// use std::time::Duration;
/// use kesoku_postgres::PostgresOptions;
///
/// let options = PostgresOptions::new().with_max_connections(32);
/// assert_eq!(options.max_connections, 32);
/// assert_eq!(PostgresOptions::new().wait_timeout, Duration::from_secs(30));
/// assert_eq!(PostgresOptions::new().connect_timeout, Duration::from_secs(5));
/// assert!(PostgresOptions::new().with_relay_deltas(true).relay_deltas);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// How many pooled connections the store keeps at most (besides the
    /// one that listens). 16 unless set.
    pub max_connections: usize,
    /// How long a call waits for a free connection before it fails. 30 s
    /// unless set.
    pub wait_timeout: Duration,
    /// How long opening a connection may take (TCP, TLS and the startup
    /// handshake) before it fails, and the call with it: a server that is
    /// restarting can accept a connection it never answers. 5 s unless
    /// set; a `connect_timeout` in the URL bounds the TCP part alone.
    pub connect_timeout: Duration,
    /// Whether the store relays deltas (replies as they are written)
    /// between processes, so a front end's `Gateway::deltas` gets the
    /// replies every worker streams. Each delta is a `NOTIFY` (sent in
    /// batches, from a connection of the store's own): off unless set,
    /// since a busy service streams many.
    pub relay_deltas: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 16,
            wait_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            relay_deltas: false,
        }
    }
}

impl PostgresOptions {
    /// The defaults: 16 connections, waiting up to 30 s for one and 5 s
    /// for one to open, deltas not relayed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder: sets [`max_connections`](Self::max_connections).
    #[must_use]
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Builder: sets [`relay_deltas`](Self::relay_deltas).
    #[must_use]
    pub fn with_relay_deltas(mut self, relay: bool) -> Self {
        self.relay_deltas = relay;
        self
    }

    /// Builder: sets [`wait_timeout`](Self::wait_timeout).
    #[must_use]
    pub fn with_wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Builder: sets [`connect_timeout`](Self::connect_timeout).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}
