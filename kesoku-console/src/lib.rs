//! A web console for kesoku agents: every session with its status, a
//! session's history as a conversation and its turn as it runs, a new
//! prompt, an interruption, and every call waiting for a person, to
//! approve or deny. See [`Console`].
//!
//! It serves plain HTML, CSS and JavaScript embedded in the binary (no
//! build step, no framework), behind a random token, and shows everything
//! a model, a tool or a user wrote as text, never as markup.
//!
//! # Layers
//!
//! A module uses only modules listed below it:
//!
//! | module | holds |
//! | --- | --- |
//! | `console` | [`Console`], [`Running`]: the router, its guard, the pages, the server |
//! | `events` | a session as server-sent events: messages stored, pieces of replies |
//! | `api` | the JSON API: sessions, messages, a prompt, an interruption, approvals |
//! | `auth` | the token (URL once, then a cookie), the Origin and CSRF checks |

mod api;
mod auth;
mod console;
mod events;

pub use console::{Console, Running};
