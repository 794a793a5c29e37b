//! The demo's interactive mode, through a pseudo-terminal: a prompt (and
//! the spinner while its turn runs), a newer prompt typed while the turn
//! runs (it interrupts it), Ctrl-C interrupting the next turn, and Ctrl-D
//! quitting.
#![cfg(unix)]

use kesoku::store::MessageLog;
use std::path::{Path, PathBuf};

use kesoku::store::SqliteStore;
use kesoku::{Role, Status};

fn demo() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let debug = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let demo = debug.join("examples").join("demo");
    assert!(demo.exists(), "{} is built by `cargo test`", demo.display());
    demo
}

#[test]
fn typing_interrupts_the_running_turn_and_ctrl_c_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(demo());
    // Each offline reply takes 1.5 s, so there is time to interrupt.
    cmd.current_dir(dir.path())
        .args(["--session", "pty", "--delay-ms", "1500"])
        .env("NO_COLOR", "1")
        .env_remove("KESOKU_PROVIDER");
    let mut p = rexpect::session::spawn_command(cmd, Some(20_000)).unwrap();
    p.exp_string("Ctrl-D quits").unwrap();

    // A prompt; while its model call waits (a spinner at the prompt), a
    // newer one.
    p.send_line("first").unwrap();
    // (rexpect reads bytes one by one as chars: the spinner is told by the
    // cursor step back it ends with, which nothing else writes.)
    p.exp_string("\u{1b}[1D").unwrap();
    p.send_line("second").unwrap();
    p.exp_string("(interrupted)").unwrap();
    // The second turn runs: the script's first reply is a call.
    p.exp_string("calculate_sum(a=2, b=40)").unwrap();
    p.exp_string("42").unwrap();

    // Its next model call waits 1.5 s: Ctrl-C stops the turn.
    p.send_control('c').unwrap();
    p.exp_string("(interrupted)").unwrap();

    // Ctrl-D quits.
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();

    let history = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
        store.history("pty").await.unwrap()
    });
    let prompts: Vec<(&str, Status)> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.content.as_str(), m.status))
        .collect();
    assert_eq!(
        prompts,
        [
            ("first", Status::Interrupted),
            ("second", Status::Interrupted)
        ]
    );
}

#[test]
fn on_a_terminal_the_offline_showcase_runs_then_the_prompt_opens() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(demo());
    cmd.current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env_remove("KESOKU_PROVIDER");
    let mut p = rexpect::session::spawn_command(cmd, Some(20_000)).unwrap();
    p.exp_string("offline").unwrap();
    // The showcase pauses on a call that needs approval and asks.
    p.exp_string("needs your approval").unwrap();
    p.exp_string("a reason to deny").unwrap();
    p.send_line("the list stays").unwrap();
    p.exp_string("(denied: the list stays)").unwrap();
    p.exp_string("2 + 40 = 42 and 7 + 8 = 15.").unwrap();
    p.exp_string("not approved: the list stays").unwrap();
    p.exp_string("Ctrl-D quits").unwrap();
    p.send_line("and now?").unwrap();
    p.exp_string("it has played its showcase").unwrap();
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}

#[test]
fn ctrl_d_stops_the_running_turn_and_quits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(demo());
    // Each reply takes 10 s: quitting must not wait for it.
    cmd.current_dir(dir.path())
        .args(["--session", "q", "--delay-ms", "10000"])
        .env("NO_COLOR", "1")
        .env_remove("KESOKU_PROVIDER");
    let mut p = rexpect::session::spawn_command(cmd, Some(5_000)).unwrap();
    p.exp_string("Ctrl-D quits").unwrap();
    p.send_line("wait").unwrap();
    p.exp_string("\u{1b}[1D").unwrap();
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
    let history = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = SqliteStore::open(dir.path().join("kesoku-demo.sqlite")).unwrap();
        store.history("q").await.unwrap()
    });
    assert_eq!(history[0].status, Status::Interrupted);
}

/// In interactive mode the line editor holds the terminal: a paused turn
/// asks, and the next line typed is the answer, not a new prompt.
#[test]
fn a_paused_turn_takes_the_next_line_typed_as_its_decision() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(demo());
    cmd.current_dir(dir.path())
        .args(["--session", "ask"])
        .env("NO_COLOR", "1")
        .env_remove("KESOKU_PROVIDER");
    let mut p = rexpect::session::spawn_command(cmd, Some(20_000)).unwrap();
    p.exp_string("Ctrl-D quits").unwrap();
    // A new named session plays the script from its start.
    p.send_line("go").unwrap();
    p.exp_string("needs your approval").unwrap();
    p.exp_string("a reason to deny").unwrap();
    p.send_line("y").unwrap();
    p.exp_string("(approved)").unwrap();
    p.exp_string("Deleting it: Deleted note 1").unwrap();
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}
