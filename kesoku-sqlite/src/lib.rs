//! [`SqliteStore`]: kesoku's embedded session store, a
//! [`Store`](kesoku_core::store::Store) in a `SQLite` file.
//!
//! Modules, each using only those listed before it:
//! - `options`: [`SqliteOptions`], how a database is opened;
//! - `error`: how failures name the database and the call;
//! - `schema`: the versioned migrations;
//! - `codec`: a message as a row, and back;
//! - `connection`: opening a connection (pragmas, migrations);
//! - `checkpoints`: copying the log into the file, beside the writer;
//! - `group`: the writes waiting for the writer, committed together;
//! - `sql`: the statements of each store call;
//! - `worker`: the connections, their threads, and where a call runs;
//! - `store`: [`SqliteStore`] itself.

mod checkpoints;
mod codec;
mod connection;
mod error;
mod group;
mod options;
mod schema;
mod sql;
mod store;
mod worker;

pub use options::SqliteOptions;
pub use store::SqliteStore;
