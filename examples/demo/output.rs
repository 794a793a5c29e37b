//! What the demo prints: the conversation as it is posted, through the
//! spinner or above the line editor's prompt; a stored session; the tools
//! as each provider receives them.

use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anstream::println;
use anstyle::{AnsiColor, Style};
use futures_util::StreamExt as _;
use kesoku::gateway::Filter;
use kesoku::llm::{Agent, ToolDeclaration};
use kesoku::lowering::Dialect;
use kesoku::{DeltaKind, Message, MessageType, Role, Status, ToolRegistry, keys};

/// Styles, which anstream drops when stdout is not a terminal or
/// `NO_COLOR` is set.
pub(crate) const DIM: Style = AnsiColor::BrightBlack.on_default();
pub(crate) const CALL: Style = AnsiColor::Cyan.on_default();
pub(crate) const GOOD: Style = AnsiColor::Green.on_default();
pub(crate) const BAD: Style = AnsiColor::Red.on_default();
pub(crate) const BOLD: Style = Style::new().bold();

/// The spinner shown while a turn runs, on a terminal only; what prints
/// meanwhile hides it for the moment.
pub(crate) static SPINNER: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// Whether the line editor is reading: lines then print above its prompt.
pub(crate) static EDITING: AtomicBool = AtomicBool::new(false);
/// The line editor's prompt.
pub(crate) const PROMPT: &str = "> ";

/// Prints a line of the conversation: above the line editor's prompt
/// (which is drawn again after it; what was typed reappears at the next
/// key), around the spinner if one spins, or plainly.
pub(crate) fn emit(line: &str) {
    // A streamed answer's line is ended first.
    if OPEN.swap(false, Ordering::Relaxed) {
        println!();
    }
    if EDITING.load(Ordering::Relaxed) {
        let mut out = std::io::stdout().lock();
        // Back to the prompt's column 0, and clear that line.
        let _ = write!(out, "\r\x1b[K");
        drop(out);
        println!("{line}");
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{PROMPT}");
        let _ = out.flush();
        return;
    }
    let spinner = SPINNER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match spinner.as_ref() {
        Some(bar) => bar.suspend(|| println!("{line}")),
        None => println!("{line}"),
    }
}

/// Whether streamed text was printed and its line not ended yet.
static OPEN: AtomicBool = AtomicBool::new(false);
/// Whether this turn's answer was shown as it streamed (so it is not
/// printed again at the end).
pub(crate) static STREAMED: AtomicBool = AtomicBool::new(false);

/// Prints the session's reply text as the model writes it (a real
/// provider streams; the offline script does not). Not above the line
/// editor, whose prompt sits on the last line: there the answer prints
/// whole at the end.
/// `deltas` is subscribed before the turn starts, so none is missed.
pub(crate) async fn print_deltas(mut deltas: kesoku::Deltas) {
    while let Some(delta) = deltas.next().await {
        // An agent called as a tool: what it stored, under the call.
        if !delta.path.is_empty() {
            if let DeltaKind::Message(m) = &delta.kind {
                print_nested(&delta.path, m);
            }
            continue;
        }
        let DeltaKind::Text(piece) = delta.kind else {
            continue;
        };
        if EDITING.load(Ordering::Relaxed) {
            continue;
        }
        // The spinner would draw over a line being written.
        if let Some(bar) = SPINNER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            bar.finish_and_clear();
        }
        if !OPEN.swap(true, Ordering::Relaxed) {
            println!();
        }
        STREAMED.store(true, Ordering::Relaxed);
        let mut out = anstream::stdout().lock();
        let _ = write!(out, "{BOLD}{piece}{BOLD:#}");
        let _ = out.flush();
    }
}

/// `println!` through [`emit`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::emit(&format!($($arg)*))
    };
}
pub(crate) use say;

/// Prints the session's messages as they are posted: calls with compact
/// arguments, results with their timings, and progress notes. Those
/// after `after`, the store's last sequence number read before the turn
/// was sent: read in the printer's own task, it could already include the
/// turn's first calls.
pub(crate) async fn print_messages(agent: Agent, session: String, after: kesoku::store::Seq) {
    let Ok(mut listener) = agent
        .gateway()
        .listen(Filter::new().session(&session).after(after))
        .await
    else {
        return;
    };
    while let Some(Ok(delivery)) = listener.next().await {
        print_message(&delivery.message);
        if delivery.message.metadata.get("progress").is_some() {
            delivered(&agent, &delivery.message).await;
        }
        let _ = std::io::stdout().flush();
    }
}

/// A message an agent called as a tool stored, indented under the call
/// (`path`: the calls that lead to it).
fn print_nested(path: &[kesoku::Via], m: &Message) {
    let indent = "    ".repeat(path.len());
    let who = path.last().map_or("", |via| via.tool.as_str());
    let line = match (m.role, m.kind) {
        (_, MessageType::ToolCall) => format!(
            "{CALL}→ {}({}){CALL:#}",
            m.meta_str(keys::TOOL_NAME).unwrap_or("?"),
            m.metadata
                .get(keys::ARGUMENTS)
                .map(compact)
                .unwrap_or_default()
        ),
        (_, MessageType::ToolResult) => {
            let style = if m.is_tool_error() { BAD } else { GOOD };
            format!("  {style}← {}{style:#}", one_line(&m.content))
        }
        (Role::Assistant, MessageType::Text) => one_line(&m.content),
        _ => return,
    };
    say!("{indent}{DIM}{who} │{DIM:#} {line}");
}

fn print_message(m: &Message) {
    match (m.role, m.kind) {
        (_, MessageType::ToolCall) => {
            let args = m
                .metadata
                .get(keys::ARGUMENTS)
                .map(compact)
                .unwrap_or_default();
            say!(
                "{CALL}→ {}({args}){CALL:#}",
                m.meta_str(keys::TOOL_NAME).unwrap_or("?")
            );
        }
        (_, MessageType::ToolResult) => {
            let ms = m
                .metadata
                .get(keys::DURATION_MS)
                .and_then(serde_json::Value::as_f64)
                .map(|d| {
                    if d < 1.0 {
                        format!(" {DIM}(<1 ms){DIM:#}")
                    } else {
                        format!(" {DIM}({d:.0} ms){DIM:#}")
                    }
                })
                .unwrap_or_default();
            let style = if m.is_tool_error() { BAD } else { GOOD };
            say!("  {style}← {}{style:#}{ms}", one_line(&m.content));
        }
        (Role::Assistant, MessageType::Text) if m.metadata.get("progress").is_some() => {
            say!("  {DIM}… {}{DIM:#}", m.content);
        }
        _ => {}
    }
}

/// Marks `m` delivered, if it waited for that; a failure to mark is only
/// a status, and the conversation goes on.
pub(crate) async fn delivered(agent: &Agent, m: &Message) {
    let _ = agent
        .gateway()
        .transition(
            &m.id,
            &[Status::Pending, Status::Responded],
            Status::Delivered,
        )
        .await;
}

/// Arguments as `a=1, b="x"`.
fn compact(args: &serde_json::Value) -> String {
    let args = match args {
        serde_json::Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| args.clone()),
        other => other.clone(),
    };
    match args {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

fn one_line(text: &str) -> String {
    let line = text.replace('\n', " ⏎ ");
    if line.chars().count() > 160 {
        line.chars().take(157).collect::<String>() + "..."
    } else {
        line
    }
}

pub(crate) async fn print_history(agent: &Agent, session: &str) -> Result<(), String> {
    let history = agent.history(session).await.map_err(|e| e.to_string())?;
    if history.is_empty() {
        println!("session {session} has no messages");
    }
    let mut total = kesoku::llm::Usage::default();
    for m in history {
        // The tokens of the model call that wrote it, on its first message;
        // on a tool's result, those of the calls the tool made.
        let usage = kesoku::llm::Usage::of(&m).map_or_else(String::new, |u| {
            total += u;
            format!(" {DIM}(tokens: {u}){DIM:#}")
        });
        println!(
            "{DIM}{} {:?}/{:?} [{:?}]{DIM:#} {}{usage}",
            m.timestamp.format("%H:%M:%S"),
            m.role,
            m.kind,
            m.status,
            one_line(&m.content)
        );
    }
    if !total.is_empty() {
        println!("{DIM}tokens used by the session's model calls: {total}{DIM:#}");
    }
    Ok(())
}

pub(crate) fn show_schemas(registry: &ToolRegistry, answer: &kesoku::OutputSchema) {
    let declarations = ToolDeclaration::all(registry);
    // Each provider's tools' dialect, and its structured outputs'.
    for (dialect, output) in [
        (Dialect::Anthropic, Dialect::AnthropicStructured),
        (Dialect::OpenAi, Dialect::OpenAiStrict),
        (Dialect::GeminiJsonSchema, Dialect::GeminiJsonSchema),
    ] {
        println!("{BOLD}== {dialect} =={BOLD:#}");
        for d in &declarations {
            let lowered = kesoku::lowering::lower(dialect, &d.name, &d.parameters);
            println!("{CALL}{}{CALL:#}: {}", d.name, one_line(&d.description));
            print_lowered(&lowered);
        }
        println!(
            "{CALL}answer `{}`{CALL:#}: the typed answer's shape, in {output}",
            answer.name()
        );
        print_lowered(answer.lowered(output));
        println!();
    }
}

fn print_lowered(lowered: &kesoku::lowering::Lowered) {
    println!(
        "{}",
        serde_json::to_string_pretty(&lowered.schema).unwrap_or_default()
    );
    for entry in &lowered.report {
        println!("  {DIM}lowering: {entry}{DIM:#}");
    }
}
