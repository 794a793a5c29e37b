//! The interactive mode: a line editor; a line typed while a turn runs
//! interrupts it, and so does Ctrl-C; a spinner right after the prompt.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kesoku::llm::Agent;

use crate::output::{BAD, DIM, EDITING, PROMPT, say};
use crate::turn;

/// How many turns run (interactive mode).
static TURNS: AtomicUsize = AtomicUsize::new(0);
/// Whether the line being typed is empty, as the line editor last said.
static LINE_EMPTY: AtomicBool = AtomicBool::new(true);

/// Tells [`LINE_EMPTY`] what is typed; highlights nothing.
struct Watch;

impl rustyline::highlight::Highlighter for Watch {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> std::borrow::Cow<'l, str> {
        LINE_EMPTY.store(line.is_empty(), Ordering::Relaxed);
        std::borrow::Cow::Borrowed(line)
    }

    fn highlight_char(
        &self,
        line: &str,
        _pos: usize,
        _kind: rustyline::highlight::CmdKind,
    ) -> bool {
        // Asked at every key, before the line is drawn.
        LINE_EMPTY.store(line.is_empty(), Ordering::Relaxed);
        false
    }
}

impl rustyline::completion::Completer for Watch {
    type Candidate = String;
}
impl rustyline::hint::Hinter for Watch {
    type Hint = String;
}
impl rustyline::validate::Validator for Watch {}
impl rustyline::Helper for Watch {}

/// While a turn runs and nothing is typed, a spinner right after the
/// prompt, the cursor kept where the line editor has it (the first key
/// typed overwrites it); cleared when no turn runs.
async fn spin_at_the_prompt() {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let mut shown = false;
    for frame in FRAMES.iter().cycle() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let busy = TURNS.load(Ordering::Relaxed) > 0;
        if !LINE_EMPTY.load(Ordering::Relaxed) || !(busy || shown) {
            continue;
        }
        let mut out = std::io::stdout().lock();
        if busy {
            let _ = write!(out, "\r\x1b[K{PROMPT}{frame}\x1b[1D");
        } else {
            let _ = write!(out, "\r\x1b[K{PROMPT}");
        }
        let _ = out.flush();
        shown = busy;
    }
}

/// What the line editor read.
enum Input {
    Line(String),
    /// Ctrl-C.
    Stop,
}

/// A line editor; each line is a prompt. A line typed while a turn runs
/// interrupts it, as a newer prompt does, and so does Ctrl-C; Ctrl-D
/// stops the running turn and quits.
pub(crate) async fn interactive(agent: &Agent, session: &str) -> Result<ExitCode, String> {
    say!(
        "{DIM}type a prompt; a new one or Ctrl-C interrupts the running turn; Ctrl-D quits{DIM:#}"
    );
    let (input_tx, mut input) = tokio::sync::mpsc::unbounded_channel::<Input>();
    std::thread::spawn(move || {
        let Ok(mut editor) = rustyline::Editor::<Watch, rustyline::history::DefaultHistory>::new()
        else {
            return;
        };
        editor.set_helper(Some(Watch));
        loop {
            LINE_EMPTY.store(true, Ordering::Relaxed);
            let read = match editor.readline(PROMPT) {
                Ok(line) => {
                    let _ = editor.add_history_entry(&line);
                    Input::Line(line)
                }
                Err(rustyline::error::ReadlineError::Interrupted) => Input::Stop,
                Err(_) => break,
            };
            if input_tx.send(read).is_err() {
                break;
            }
        }
    });
    EDITING.store(true, Ordering::Relaxed);
    let spinner = std::io::stdout()
        .is_terminal()
        .then(|| tokio::spawn(spin_at_the_prompt()));
    let mut running = tokio::task::JoinSet::new();
    while let Some(read) = input.recv().await {
        let line = match read {
            Input::Stop => {
                if !agent.interrupt(session) {
                    say!("{DIM}(nothing is running; Ctrl-D quits){DIM:#}");
                }
                continue;
            }
            Input::Line(line) => line.trim().to_owned(),
        };
        // A paused turn asked for a decision: this line is the answer.
        if let Some(answer) = crate::approval::ANSWER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let _ = answer.send(line);
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let agent = agent.clone();
        let session = session.to_owned();
        running.spawn(async move {
            TURNS.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = turn(&agent, &session, &line, false).await {
                say!("{BAD}error:{BAD:#} {e}");
            }
            TURNS.fetch_sub(1, Ordering::Relaxed);
        });
    }
    if let Some(spinner) = spinner {
        spinner.abort();
    }
    EDITING.store(false, Ordering::Relaxed);
    // Quitting stops the running turn (it ends `interrupted`, its calls
    // answered) rather than waiting for it.
    agent.interrupt(session);
    while running.join_next().await.is_some() {}
    Ok(ExitCode::SUCCESS)
}
