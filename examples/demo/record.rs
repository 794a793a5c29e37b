//! The showcase's typed answer: the sums it worked out, asked for as a
//! Rust value (`Agent::send_as`). A real provider is sent the shape in its
//! own structured-output mode; offline, the script answers with JSON that
//! kesoku checks against the same shape.

use kesoku::ToolArg;
use kesoku::llm::Agent;
use serde::Deserialize;

use crate::output::{BOLD, DIM, delivered, say};

/// The typed turn's prompt.
pub(crate) const PROMPT: &str = "List the sums you worked out in this session.";

/// A sum the tools worked out.
#[derive(Debug, Deserialize, ToolArg)]
pub(crate) struct Sum {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
    /// What `calculate_sum` gave.
    total: i64,
}

/// The sums of a session.
#[derive(Debug, Deserialize, ToolArg)]
pub(crate) struct Sums {
    /// Each sum, in the order it was worked out.
    sums: Vec<Sum>,
}

/// Asks for the session's sums as a [`Sums`] and prints the value.
pub(crate) async fn typed_turn(agent: &Agent, session: &str) -> Result<(), String> {
    say!("{BOLD}> {PROMPT}{BOLD:#}");
    let typed = agent
        .send_as::<Sums>(session, PROMPT)
        .await
        .map_err(|e| e.to_string())?;
    for m in &typed.outcome.messages {
        delivered(agent, m).await;
    }
    let value = typed.value;
    let right = value.sums.iter().all(|s| s.a + s.b == s.total);
    say!("\n{value:#?}");
    say!(
        "{DIM}(a typed answer: {} sums, {}){DIM:#}",
        value.sums.len(),
        if right {
            "each total is a + b"
        } else {
            "some total is not a + b"
        }
    );
    Ok(())
}
