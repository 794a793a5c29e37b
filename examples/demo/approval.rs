//! Deciding the calls a paused turn waits on: asked on a terminal (y, n,
//! or a reason to deny), approved at once when stdin is not one (the
//! showcase in CI), then the turn resumed here.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use kesoku::agent::{PendingApproval, ResumeError, Verdict};
use kesoku::llm::{Agent, TurnOutcome, TurnStatus};

use crate::output::{BOLD, DIM, EDITING, say};

/// Where the interactive mode's line editor sends the next line typed,
/// when a decision is asked for (the editor owns the terminal then).
pub(crate) static ANSWER: Mutex<Option<tokio::sync::oneshot::Sender<String>>> = Mutex::new(None);

/// The verdict a typed answer gives: `y` approves; `n` or nothing
/// denies; anything else denies with it as the reason.
fn verdict(answer: &str) -> Verdict {
    match answer.trim() {
        "y" | "Y" | "yes" => Verdict::Approve,
        "" | "n" | "N" | "no" => Verdict::Deny(None),
        reason => Verdict::Deny(Some(reason.to_owned())),
    }
}

/// Asks about `call` and reads the answer: from the line editor in
/// interactive mode, else from stdin; approved at once when stdin is not
/// a terminal.
async fn ask(call: &PendingApproval, on_terminal: bool) -> Verdict {
    say!(
        "{BOLD}⏸ {}({}) needs your approval{BOLD:#}",
        call.tool,
        call.arguments
    );
    if !on_terminal {
        say!("{DIM}(approved: stdin is not a terminal, so no one can be asked){DIM:#}");
        return Verdict::Approve;
    }
    say!("{DIM}approve? y, n, or a reason to deny{DIM:#}");
    let answer = if EDITING.load(Ordering::Relaxed) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *ANSWER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tx);
        rx.await.unwrap_or_default()
    } else {
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        })
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
    };
    verdict(&answer)
}

/// Decides every call `waiting` lists, then resumes the turn of
/// `prompt_id` here; again while it pauses. The last outcome.
pub(crate) async fn decide_and_resume(
    agent: &Agent,
    mut waiting: Vec<PendingApproval>,
    on_terminal: bool,
) -> Result<Option<TurnOutcome>, String> {
    let mut last = None;
    while let Some(first) = waiting.first() {
        let prompt = first.prompt_id.clone();
        for call in &waiting {
            let verdict = ask(call, on_terminal).await;
            let said = match &verdict {
                Verdict::Approve => "approved".to_owned(),
                Verdict::Deny(Some(r)) => format!("denied: {r}"),
                _ => "denied".to_owned(),
            };
            agent
                .decide(&call.id, verdict)
                .await
                .map_err(|e| e.to_string())?;
            say!("{DIM}({said}){DIM:#}");
        }
        let outcome = match agent.resume(&prompt).await {
            Ok(outcome) => outcome,
            // A serving worker (another process) took it: it ends there.
            Err(ResumeError::Taken { .. }) => break,
            Err(e) => return Err(e.to_string()),
        };
        waiting = if outcome.status == TurnStatus::AwaitingApproval {
            outcome.pending_approvals()
        } else {
            Vec::new()
        };
        last = Some(outcome);
    }
    Ok(last)
}

/// A session left waiting for a decision (by this demo quit at the
/// question, or another front end): decided first, and resumed.
pub(crate) async fn resume_waiting(agent: &Agent, session: &str) -> Result<(), String> {
    let waiting = agent
        .pending_approvals(session)
        .await
        .map_err(|e| e.to_string())?;
    if waiting.is_empty() {
        return Ok(());
    }
    let on_terminal = std::io::stdin().is_terminal();
    if let Some(outcome) = decide_and_resume(agent, waiting, on_terminal).await? {
        // Let the printer show the turn's messages first.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if let Some(answer) = outcome.answer {
            say!("\n{BOLD}{answer}{BOLD:#}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_answers_become_verdicts() {
        assert_eq!(verdict("y\n"), Verdict::Approve);
        assert_eq!(verdict("n"), Verdict::Deny(None));
        assert_eq!(verdict("\n"), Verdict::Deny(None));
        assert_eq!(
            verdict("keep it, please\n"),
            Verdict::Deny(Some("keep it, please".into()))
        );
    }
}
