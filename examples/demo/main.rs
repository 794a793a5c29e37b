//! The kesoku demo agent: a few tools, an agent over a model, and a
//! session kept in a `SQLite` file.
//!
//! `cargo run --example demo` runs offline, on a scripted model playing
//! `script.json` (beside this file): one tool call, two calls in one step,
//! a call with a wrong argument that gets the validation error back and is
//! corrected, a tool posting progress through the gateway, and
//! `analyze_media` on `sample.png`; then a final answer quoting the tools'
//! real results. `--provider anthropic|gemini|openai` uses a real model
//! (the backends' environment variables: `ANTHROPIC_API_KEY` and
//! `ANTHROPIC_BASE_URL`, `GEMINI_API_KEY` and `GOOGLE_GEMINI_BASE_URL`,
//! `OPENAI_API_KEY` and `OPENAI_BASE_URL`).
//!
//! ```text
//! demo                      the offline showcase, then (on a terminal) an interactive prompt
//! demo "Add 2 and 3"        one prompt, then exit
//! demo --session ID         go on with a stored session
//! demo --history --session ID
//! demo --show-schemas       every tool as each provider receives it
//! ```

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anstream::{eprintln, println};
use anstyle::{AnsiColor, Style};
use clap::{Parser, ValueEnum};
use futures_util::StreamExt as _;
use kesoku::gateway::Filter;
use kesoku::llm::tools::{Sandbox, analyze_media, list_files, read_file};
use kesoku::llm::{
    Agent, ClaudeLlm, GeminiLlm, Llm, OpenAiLlm, ScriptedLlm, ToolDeclaration, TurnStatus,
};
use kesoku::lowering::Dialect;
use kesoku::store::SqliteStore;
use kesoku::store::Store as _;
use kesoku::{Message, MessageType, Role, State, Status, ToolContext, ToolRegistry, keys, tool};

/// The spinner shown while a turn runs, on a terminal only; what prints
/// meanwhile hides it for the moment.
static SPINNER: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// Whether the line editor is reading: lines then print above its prompt.
static EDITING: AtomicBool = AtomicBool::new(false);
/// The line editor's prompt.
const PROMPT: &str = "> ";

/// Prints a line of the conversation: above the line editor's prompt
/// (which is drawn again after it; what was typed reappears at the next
/// key), around the spinner if one spins, or plainly.
fn emit(line: &str) {
    if EDITING.load(std::sync::atomic::Ordering::Relaxed) {
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

/// `println!` through [`emit`].
macro_rules! say {
    ($($arg:tt)*) => {
        emit(&format!($($arg)*))
    };
}

/// The offline model's script: turns played in order for each session.
const SCRIPT: &str = include_str!("script.json");
/// The script, read once.
static SCRIPT_VALUE: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(|| serde_json::from_str(SCRIPT).expect("script.json is JSON"));
/// How many of the script's turns play the showcase; the rest answer any
/// later prompt.
const SHOWCASE_TURNS: usize = 7;
/// The sample image `analyze_media` looks at offline.
const SAMPLE: &[u8] = include_bytes!("sample.png");
/// The prompt of the offline showcase.
const SHOWCASE: &str = "What are 2 + 40 and 7 + 8, and the time in Tokyo? Check 40 + 2, \
                        note the sums, and tell me what sample.png shows.";

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool]
fn calculate_sum(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b)
        .ok_or_else(|| format!("{a} + {b} does not fit in a 64-bit integer"))
}

/// Tells the current date and time.
///
/// # Arguments
/// * `timezone` - An IANA time zone, such as `Europe/Paris`; UTC if
///   omitted.
#[tool]
fn current_time(timezone: Option<String>) -> Result<String, String> {
    let name = timezone.as_deref().unwrap_or("UTC");
    let zone = jiff::tz::TimeZone::get(name).map_err(|e| {
        format!("unknown time zone `{name}` (use an IANA name such as `Europe/Paris`): {e}")
    })?;
    let now = jiff::Zoned::now().with_time_zone(zone);
    Ok(now.strftime("%Y-%m-%d %H:%M %Z").to_string())
}

/// The notes `save_note` keeps, shared by every turn.
#[derive(Default)]
struct Notebook(Mutex<Vec<String>>);

/// Saves a note for later.
///
/// # Arguments
/// * `text` - The note.
#[tool]
async fn save_note(
    text: String,
    context: &ToolContext,
    notebook: State<Notebook>,
) -> Result<String, String> {
    context
        .post(format!(
            "saving a note of {} characters",
            text.chars().count()
        ))
        .await
        .map_err(|e| format!("could not post progress: {e}"))?;
    let count = {
        let Notebook(notes) = &*notebook.0;
        let mut notes = notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        notes.push(text);
        notes.len()
    };
    Ok(format!("Saved as note {count}"))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Provider {
    Anthropic,
    Gemini,
    Openai,
}

/// The kesoku demo agent.
#[derive(Debug, Parser)]
#[command(
    name = "demo",
    version,
    about = "The kesoku demo agent: tools, an agent and a session store, offline by default"
)]
struct Cli {
    /// A prompt to answer, then exit. Without one: an interactive prompt on
    /// a terminal, else the offline showcase.
    prompt: Option<String>,
    /// A real model instead of the offline script.
    /// (Default: `KESOKU_PROVIDER`.)
    #[arg(long, value_enum)]
    provider: Option<Provider>,
    /// The model, such as `claude-sonnet-4-5`; the provider's usual one
    /// if omitted.
    /// (Default: `KESOKU_MODEL`.)
    #[arg(long)]
    model: Option<String>,
    /// Go on with this stored session (a new one if omitted).
    #[arg(long)]
    session: Option<String>,
    /// Print the session's stored messages and exit.
    #[arg(long, requires = "session")]
    history: bool,
    /// Print every tool's declaration as each provider receives it, with
    /// what lowering changed, and exit.
    #[arg(long)]
    show_schemas: bool,
    /// The session store.
    #[arg(long, default_value = "kesoku-demo.sqlite")]
    store: PathBuf,
    /// How long the offline model takes per reply, in milliseconds (to
    /// try interrupting a turn).
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in [
        calculate_sum::TOOL,
        current_time::TOOL,
        save_note::TOOL,
        list_files::TOOL,
        read_file::TOOL,
        analyze_media::TOOL,
    ] {
        registry.register(tool).expect("distinct tool names");
    }
    registry
}

/// Styles, which anstream drops when stdout is not a terminal or
/// `NO_COLOR` is set.
const DIM: Style = AnsiColor::BrightBlack.on_default();
const CALL: Style = AnsiColor::Cyan.on_default();
const GOOD: Style = AnsiColor::Green.on_default();
const BAD: Style = AnsiColor::Red.on_default();
const BOLD: Style = Style::new().bold();

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{BAD}error:{BAD:#} {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, String> {
    let registry = registry();
    if cli.show_schemas {
        show_schemas(&registry);
        return Ok(ExitCode::SUCCESS);
    }
    // `KESOKU_PROVIDER` and `KESOKU_MODEL` are defaults; set but empty is
    // unset.
    let provider = match cli.provider {
        Some(p) => Some(p),
        None => env_provider()?,
    };
    let model = cli.model.clone().or_else(|| env_nonempty("KESOKU_MODEL"));
    // A new session unless one is named: the time and this process, so
    // two runs never share one.
    let session = cli.session.clone().unwrap_or_else(|| {
        format!(
            "demo-{}-{}",
            jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S"),
            std::process::id()
        )
    });
    if cli.history && !cli.store.exists() {
        return Err(format!("there is no store at {}", cli.store.display()));
    }
    // The model first: a missing key is reported before any file is made.
    let llm = real_model(provider)?;
    let store = SqliteStore::open(&cli.store)
        .map_err(|e| format!("cannot open the store {}: {e}", cli.store.display()))?;
    let llm = match llm {
        Some(llm) => llm,
        None => offline_model(&store, &session, cli.session.is_some(), cli.delay_ms).await?,
    };
    let label = match provider {
        None => "offline: a scripted model, no network",
        Some(Provider::Anthropic) => "Anthropic",
        Some(Provider::Gemini) => "Gemini",
        Some(Provider::Openai) => "OpenAI",
    };
    let cwd =
        std::env::current_dir().map_err(|e| format!("the current directory is unknown: {e}"))?;
    let mut builder = Agent::builder(BoxedLlm(llm))
        .registry(registry)
        .system_prompt(
            "You are a helpful assistant. Use the tools when they help, and quote their results.",
        )
        .store(store)
        .sessions_dir(cwd.join("kesoku-demo-sessions"))
        .sandbox(Sandbox::new(&cwd))
        .state(Notebook::default());
    if let Some(model) = model {
        builder = builder.model(model);
    }
    let agent = builder.build().map_err(|e| e.to_string())?;

    if cli.history {
        print_history(&agent, &session).await?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("{DIM}kesoku demo · {label} · session {session}{DIM:#}");
    if provider.is_none() {
        // As if the user had attached it: attachments go to the session's
        // staging directory, where `analyze_media` finds relative paths.
        let staging = agent
            .workspace(&session)
            .ok_or("the demo's agent has a sessions directory")?;
        std::fs::create_dir_all(&staging)
            .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
        std::fs::write(staging.join("sample.png"), SAMPLE).map_err(|e| e.to_string())?;
    }
    let printer = tokio::spawn(print_messages(agent.clone(), session.clone()));
    let code = match (&cli.prompt, std::io::stdin().is_terminal()) {
        (Some(prompt), _) => turn(&agent, &session, prompt, true).await?,
        (None, true) => {
            // Offline on a new session, the showcase first: it is what
            // the scripted model knows.
            if provider.is_none() && cli.session.is_none() {
                println!("{BOLD}> {SHOWCASE}{BOLD:#}");
                turn(&agent, &session, SHOWCASE, true).await?;
            }
            interactive(&agent, &session).await?
        }
        (None, false) => {
            println!("{BOLD}> {SHOWCASE}{BOLD:#}");
            turn(&agent, &session, SHOWCASE, true).await?
        }
    };
    printer.abort();
    Ok(code)
}

/// Runs one turn, with a spinner if `spin` and stdout is a terminal, and
/// prints how it ended.
async fn turn(agent: &Agent, session: &str, prompt: &str, spin: bool) -> Result<ExitCode, String> {
    let start = Instant::now();
    if spin && std::io::stdout().is_terminal() {
        let bar = indicatif::ProgressBar::new_spinner().with_message("working");
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        *SPINNER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(bar);
    }
    let outcome = agent.send(session, prompt).await;
    // Let the printer show the turn's last messages first.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    if let Some(bar) = SPINNER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        bar.finish_and_clear();
    }
    let outcome = outcome.map_err(|e| e.to_string())?;
    let took = start.elapsed();
    // Shown (just below, or as they came): delivered, as a front end marks
    // what it rendered.
    for m in &outcome.messages {
        delivered(agent, m).await;
    }
    match outcome.status {
        TurnStatus::Completed => {
            say!("\n{BOLD}{}{BOLD:#}", outcome.answer.unwrap_or_default());
            say!("{DIM}({} ms){DIM:#}", took.as_millis());
            Ok(ExitCode::SUCCESS)
        }
        TurnStatus::Interrupted => {
            say!("{DIM}(interrupted){DIM:#}");
            Ok(ExitCode::SUCCESS)
        }
        TurnStatus::StepLimit => {
            say!("{BAD}stopped at the step limit{BAD:#}");
            Ok(ExitCode::FAILURE)
        }
        _ => {
            let why = outcome
                .messages
                .iter()
                .rev()
                .find_map(|m| m.meta_str("error").map(str::to_owned))
                .unwrap_or_else(|| "the turn failed".to_owned());
            Err(why)
        }
    }
}

/// How many turns run (interactive mode).
static TURNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Whether the line being typed is empty, as the line editor last said.
static LINE_EMPTY: AtomicBool = AtomicBool::new(true);

/// Tells [`LINE_EMPTY`] what is typed; highlights nothing.
struct Watch;

impl rustyline::highlight::Highlighter for Watch {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> std::borrow::Cow<'l, str> {
        LINE_EMPTY.store(line.is_empty(), std::sync::atomic::Ordering::Relaxed);
        std::borrow::Cow::Borrowed(line)
    }

    fn highlight_char(
        &self,
        line: &str,
        _pos: usize,
        _kind: rustyline::highlight::CmdKind,
    ) -> bool {
        // Asked at every key, before the line is drawn.
        LINE_EMPTY.store(line.is_empty(), std::sync::atomic::Ordering::Relaxed);
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
        let busy = TURNS.load(std::sync::atomic::Ordering::Relaxed) > 0;
        if !LINE_EMPTY.load(std::sync::atomic::Ordering::Relaxed) || !(busy || shown) {
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
async fn interactive(agent: &Agent, session: &str) -> Result<ExitCode, String> {
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
            LINE_EMPTY.store(true, std::sync::atomic::Ordering::Relaxed);
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
    EDITING.store(true, std::sync::atomic::Ordering::Relaxed);
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
        if line.is_empty() {
            continue;
        }
        let agent = agent.clone();
        let session = session.to_owned();
        running.spawn(async move {
            TURNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(e) = turn(&agent, &session, &line, false).await {
                say!("{BAD}error:{BAD:#} {e}");
            }
            TURNS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        });
    }
    if let Some(spinner) = spinner {
        spinner.abort();
    }
    EDITING.store(false, std::sync::atomic::Ordering::Relaxed);
    // Quitting stops the running turn (it ends `interrupted`, its calls
    // answered) rather than waiting for it.
    agent.interrupt(session);
    while running.join_next().await.is_some() {}
    Ok(ExitCode::SUCCESS)
}

/// Prints the session's messages as they are posted: calls with compact
/// arguments, results with their timings, and progress notes.
async fn print_messages(agent: Agent, session: String) {
    let Ok(mut listener) = agent
        .gateway()
        .listen(
            Filter::new()
                .session(&session)
                .after(agent.gateway().store().last_seq().await.unwrap_or(0)),
        )
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
async fn delivered(agent: &Agent, m: &Message) {
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

async fn print_history(agent: &Agent, session: &str) -> Result<(), String> {
    let history = agent.history(session).await.map_err(|e| e.to_string())?;
    if history.is_empty() {
        println!("session {session} has no messages");
    }
    for m in history {
        println!(
            "{DIM}{} {:?}/{:?} [{:?}]{DIM:#} {}",
            m.timestamp.format("%H:%M:%S"),
            m.role,
            m.kind,
            m.status,
            one_line(&m.content)
        );
    }
    Ok(())
}

fn show_schemas(registry: &ToolRegistry) {
    let declarations = ToolDeclaration::all(registry);
    for dialect in [
        Dialect::Anthropic,
        Dialect::OpenAi,
        Dialect::GeminiJsonSchema,
    ] {
        println!("{BOLD}== {dialect} =={BOLD:#}");
        for d in &declarations {
            let lowered = kesoku::lowering::lower(dialect, &d.name, &d.parameters);
            println!("{CALL}{}{CALL:#}: {}", d.name, one_line(&d.description));
            println!(
                "{}",
                serde_json::to_string_pretty(&lowered.schema).unwrap_or_default()
            );
            for entry in &lowered.report {
                println!("  {DIM}lowering: {entry}{DIM:#}");
            }
        }
        println!();
    }
}

/// The real provider's model, or `None` offline.
fn real_model(provider: Option<Provider>) -> Result<Option<Box<dyn Llm>>, String> {
    let llm: Box<dyn Llm> = match provider {
        None => return Ok(None),
        Some(Provider::Anthropic) => Box::new(
            ClaudeLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
        Some(Provider::Gemini) => Box::new(
            GeminiLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
        Some(Provider::Openai) => Box::new(
            OpenAiLlm::from_env()
                .map_err(|e| e.to_string())?
                .with_http_options(http_options()),
        ),
    };
    Ok(Some(llm))
}

/// The offline model: the showcase, or, for a named session that already
/// has messages (resumed in a new process), only the script's closing
/// turns; answering after `delay_ms`.
async fn offline_model(
    store: &SqliteStore,
    session: &str,
    named: bool,
    delay_ms: u64,
) -> Result<Box<dyn Llm>, String> {
    let resumed = named
        && !store
            .history(session)
            .await
            .map_err(|e| e.to_string())?
            .is_empty();
    let script = if resumed {
        SCRIPT_VALUE
            .as_array()
            .map(|turns| turns[SHOWCASE_TURNS..].to_vec())
            .unwrap_or_default()
            .into()
    } else {
        SCRIPT_VALUE.clone()
    };
    let model = ScriptedLlm::from_json(script).map_err(|e| e.to_string())?;
    Ok(Box::new(DelayedLlm(
        Box::new(model),
        std::time::Duration::from_millis(delay_ms),
    )))
}

/// `KESOKU_PROVIDER`, if set and not empty.
fn env_provider() -> Result<Option<Provider>, String> {
    let Some(value) = env_nonempty("KESOKU_PROVIDER") else {
        return Ok(None);
    };
    Provider::from_str(&value, true).map(Some).map_err(|_| {
        format!(
            "KESOKU_PROVIDER is `{value}`, which is not a provider: use anthropic, gemini or openai"
        )
    })
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A real provider's HTTP limits: a model call that gets no answer ends
/// within minutes, with the error, instead of waiting on every retry.
fn http_options() -> kesoku::llm::HttpOptions {
    kesoku::llm::HttpOptions {
        request_timeout: std::time::Duration::from_secs(120),
        max_retries: 2,
        ..Default::default()
    }
}

/// The offline model, answering after a delay (`--delay-ms`).
struct DelayedLlm(Box<dyn Llm>, std::time::Duration);

impl Llm for DelayedLlm {
    fn provider(&self) -> &'static str {
        self.0.provider()
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a kesoku::llm::LlmOptions,
    ) -> kesoku::llm::LlmFuture<'a, Result<kesoku::llm::AssistantTurn, kesoku::llm::LlmError>> {
        Box::pin(async move {
            if !self.1.is_zero() {
                tokio::time::sleep(self.1).await;
            }
            self.0.complete(session_id, messages, tools, options).await
        })
    }
}

/// A boxed model as an `Llm`, so the provider is chosen at run time.
struct BoxedLlm(Box<dyn Llm>);

impl Llm for BoxedLlm {
    fn provider(&self) -> &'static str {
        self.0.provider()
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolDeclaration],
        options: &'a kesoku::llm::LlmOptions,
    ) -> kesoku::llm::LlmFuture<'a, Result<kesoku::llm::AssistantTurn, kesoku::llm::LlmError>> {
        self.0.complete(session_id, messages, tools, options)
    }
}
