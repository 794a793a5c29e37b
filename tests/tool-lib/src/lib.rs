//! A library crate of tools, for the test that tools in dependencies (and
//! in their modules) reach the binary's default registry.
//!
//! It also denies warnings, missing docs and clippy's pedantic lints, so
//! `cargo clippy --workspace` proves the `#[tool]` expansion is clean in a
//! strict user crate.
#![deny(warnings, missing_docs, clippy::pedantic)]

use kesoku::{ToolArg, ToolContext, tool};
use serde::Deserialize;

/// Upper-cases text.
///
/// # Arguments
/// * `text` - The text to shout.
#[tool]
#[must_use]
pub fn shout(text: String) -> String {
    text.to_uppercase()
}

/// A unit of length.
#[derive(Debug, Clone, Copy, Deserialize, ToolArg)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Metric.
    Meters,
    /// Imperial.
    Feet,
}

/// Tools in a nested module.
pub mod nested {
    use super::{ToolContext, Unit, tool};

    /// Converts a length.
    ///
    /// # Arguments
    /// * `value` - The length.
    /// * `to` - The unit to convert to.
    ///
    /// # Returns
    /// The converted length.
    ///
    /// # Errors
    /// When the context has no session.
    #[tool]
    pub async fn convert_length(
        value: f64,
        to: Unit,
        context: &ToolContext,
    ) -> Result<f64, String> {
        if context.session_id().is_empty() {
            return Err("no session".into());
        }
        // Stands for real async work, such as a unit-table lookup.
        std::future::ready(()).await;
        Ok(match to {
            Unit::Meters => value * 0.3048,
            Unit::Feet => value / 0.3048,
        })
    }

    /// A private tool is registered too.
    #[tool]
    fn private_ping() -> &'static str {
        "pong"
    }
}

/// Something from this crate that a binary can name, so the linker keeps
/// the crate (see the linker caveat in `docs/registries.md`).
pub const TOOL_NAMES: [&str; 3] = ["convert_length", "private_ping", "shout"];
