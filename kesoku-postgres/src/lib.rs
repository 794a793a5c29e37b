//! [`PostgresStore`]: kesoku's session store for many agent processes, a
//! [`Store`](kesoku_core::store::Store) in a PostgreSQL database.
//!
//! Several agent processes, on several machines, share one database: each
//! message has one place in one total order, claims and turn leases are
//! conditional updates, and every process hears of every new message
//! through `LISTEN`/`NOTIFY`, recovering anything it missed from the
//! table. Nothing lives only in one process's memory.
//!
//! Modules, each using only those listed before it:
//! - `options`: [`PostgresOptions`], how a store connects;
//! - `tls`: the URL's `sslmode` and `sslrootcert`, and the TLS connector;
//! - `error`: how failures name the database and the call;
//! - `connect`: the pool's connections, each opened on a task of its own;
//! - `schema`: the versioned migrations;
//! - `sql`: the statements, and a row as a message;
//! - `relay`: deltas between processes;
//! - `notify`: the connection that listens for new messages;
//! - `store`: [`PostgresStore`] itself.

mod connect;
mod error;
mod notify;
mod options;
mod relay;
mod schema;
mod sql;
mod store;
mod tls;

pub use options::PostgresOptions;
pub use store::PostgresStore;
