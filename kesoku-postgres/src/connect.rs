//! How the pool opens a connection: on a task of its own.
//!
//! A connection being opened (TCP, TLS, the startup packet, the password
//! exchange) makes progress only as its future is polled. Opened inside
//! the call that needed it, it stood still whenever that call's caller
//! was busy elsewhere (a stream of deliveries polled now and then, a
//! `select!` waiting on something else), with the server's backend
//! waiting for a startup packet that did not come. A PostgreSQL server
//! that is shutting down waits for such backends (up to its
//! `authentication_timeout`, a minute by default) and accepts no new
//! connection meanwhile: a `pg_ctl restart` stalled for 30 to 60 s, or
//! timed out and left the server stopped. On its own task the handshake
//! goes on whoever polls; the call only waits for its end.

use std::panic;

use deadpool_postgres::Connect;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, Error};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Opens the pool's connections each on a task of its own (see the
/// module's documentation); the pool's `create_timeout` bounds the wait.
pub(crate) struct Spawned {
    pub(crate) tls: MakeRustlsConnect,
}

/// Aborts the task opening a connection when the call that waits for it
/// is dropped (it timed out, or its caller gave up): the half-open
/// connection is closed, not left for the server to wait on.
struct AbortOnDrop(JoinHandle<Result<(Client, JoinHandle<()>), Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Connect for Spawned {
    fn connect(
        &self,
        config: &Config,
    ) -> futures_util::future::BoxFuture<'_, Result<(Client, JoinHandle<()>), Error>> {
        let (config, tls) = (config.clone(), self.tls.clone());
        let mut opening = AbortOnDrop(tokio::spawn(async move {
            let (client, connection) = config.connect(tls).await?;
            // The connection's messages come as it is polled: this task
            // does it until the client is dropped or the server goes.
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "a pooled PostgreSQL connection ended");
                }
            });
            Ok((client, driver))
        }));
        Box::pin(async move {
            match (&mut opening.0).await {
                Ok(opened) => opened,
                // A panic in the driver is the caller's; a task cancelled
                // otherwise than by our drop (the runtime shutting down)
                // leaves nothing to return.
                Err(e) => panic::resume_unwind(
                    e.try_into_panic()
                        .unwrap_or_else(|e| Box::new(format!("opening a connection: {e}"))),
                ),
            }
        })
    }
}
