//! The kesoku demo agent: a few tools, an agent over a model, and a
//! session kept in a `SQLite` file.
//!
//! `cargo run --example demo` runs offline, on a scripted model playing
//! `script.json` (beside this file): one tool call, two calls in one step,
//! a call with a wrong argument that gets the validation error back and is
//! corrected, a tool posting progress through the gateway, a call that
//! waits for a person's approval (`delete_note`: asked on a terminal,
//! approved at once when stdin is not one), and `analyze_media` on
//! `sample.png`; then a final answer quoting the tools' real results, and
//! the sums asked for again as a Rust value (`Agent::send_as`, in the
//! provider's structured-output mode), printed with `{:#?}`; then a
//! research assistant called as a tool (`Agent::as_tool`: its calls and
//! answer printed indented under the call, as they happen), and a prompt
//! asking for a password, which a guardrail stops.
//! `--session` on a session left waiting for a decision asks for it and
//! resumes the turn. `--provider anthropic|gemini|openai` uses a real model
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
//! demo --otlp http://localhost:4318   export the trace (`--features otel`)
//! demo --web [ADDR]         the web console beside the agent (`--features console`)
//! ```

mod approval;
mod composed;
mod interactive;
mod model;
mod otlp;
mod output;
mod record;
mod tools;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anstream::{eprintln, println};
use clap::{Parser, ValueEnum};
use kesoku::llm::tools::Sandbox;
use kesoku::llm::{Agent, TurnStatus};
use kesoku::store::SqliteStore;

use interactive::interactive;
use model::{SAMPLE, SHOWCASE, env_nonempty, env_provider, offline_model, real_model};
use output::{
    BAD, BOLD, DIM, SPINNER, STREAMED, delivered, print_deltas, print_history, print_messages, say,
    show_schemas,
};
use tools::{Notebook, registry};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Provider {
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
    /// Export traces and metrics over OTLP/HTTP to this collector, such as
    /// `http://localhost:4318` (built with `--features otel`).
    /// (Default: `OTEL_EXPORTER_OTLP_ENDPOINT`.)
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// Serve the web console beside the agent, on this address
    /// (loopback, a free port, unless given), and print the URL to open;
    /// the demo then runs until Ctrl-C (built with `--features console`).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    web: Option<std::net::SocketAddr>,
}

/// The `service.name` of the demo's exported spans.
const SERVICE: &str = "kesoku-demo";

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _exporting = match otlp::layer(SERVICE, cli.otlp.as_deref()) {
        Ok((None, exporting)) => exporting,
        Ok((Some(layer), exporting)) => {
            use tracing_subscriber::layer::SubscriberExt as _;
            use tracing_subscriber::util::SubscriberInitExt as _;
            tracing_subscriber::registry().with(layer).init();
            exporting
        }
        Err(e) => {
            eprintln!("{BAD}error:{BAD:#} {e}");
            return ExitCode::FAILURE;
        }
    };
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
        show_schemas(&registry, &kesoku::OutputSchema::of::<record::Sums>());
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
    let assistant_llm = real_model(provider)?;
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
    // One store for the demo's agent and the research assistant it calls.
    let gateway = kesoku::Gateway::new(store);
    let mut builder = Agent::builder(llm)
        .registry(registry)
        .system_prompt(
            "You are a helpful assistant. Use the tools when they help, and quote their results.",
        )
        .gateway(gateway.clone())
        .sub_agent(composed::research(assistant_llm, &gateway)?)
        .input_guardrail(composed::no_secrets())
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
    if let Some(addr) = cli.web {
        return web(&agent, addr).await;
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
    let after = agent
        .gateway()
        .store()
        .last_seq()
        .await
        .map_err(|e| e.to_string())?;
    let printer = tokio::spawn(print_messages(agent.clone(), session.clone(), after));
    let streamer = tokio::spawn(print_deltas(agent.gateway().deltas(Some(&session))));
    approval::resume_waiting(&agent, &session).await?;
    let code = match (&cli.prompt, std::io::stdin().is_terminal()) {
        (Some(prompt), _) => turn(&agent, &session, prompt, true).await?,
        (None, true) => {
            // Offline on a new session, the showcase first: it is what
            // the scripted model knows.
            if provider.is_none() && cli.session.is_none() {
                showcase(&agent, &session).await?;
            }
            interactive(&agent, &session).await?
        }
        (None, false) => showcase(&agent, &session).await?,
    };
    printer.abort();
    streamer.abort();
    Ok(code)
}

/// The web console beside the agent, until Ctrl-C.
#[cfg(feature = "console")]
async fn web(agent: &Agent, addr: std::net::SocketAddr) -> Result<ExitCode, String> {
    let running = kesoku::console::Console::new(agent)
        .bind(addr)
        .await
        .map_err(|e| format!("cannot serve the console on {addr}: {e}"))?;
    println!("{BOLD}the console: open {}{BOLD:#}", running.url());
    println!("{DIM}(Ctrl-C stops it){DIM:#}");
    running.wait().await.map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// Without the console feature: says how to build with it.
#[cfg(not(feature = "console"))]
async fn web(_: &Agent, _: std::net::SocketAddr) -> Result<ExitCode, String> {
    Err("the demo was built without the web console: `cargo run --example demo --features console -- --web`".into())
}

/// The showcase's prompt, then, once it completed, its typed answer.
async fn showcase(agent: &Agent, session: &str) -> Result<ExitCode, String> {
    println!("{BOLD}> {SHOWCASE}{BOLD:#}");
    let code = turn(agent, session, SHOWCASE, true).await?;
    if code == ExitCode::SUCCESS
        && agent
            .pending_approvals(session)
            .await
            .map_err(|e| e.to_string())?
            .is_empty()
    {
        record::typed_turn(agent, session).await?;
        return composed::showcase(agent, session).await;
    }
    Ok(code)
}

/// Runs one turn, with a spinner if `spin` and stdout is a terminal, and
/// prints how it ended.
pub(crate) async fn turn(
    agent: &Agent,
    session: &str,
    prompt: &str,
    spin: bool,
) -> Result<ExitCode, String> {
    let start = Instant::now();
    STREAMED.store(false, std::sync::atomic::Ordering::Relaxed);
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
    let mut outcome = outcome.map_err(|e| e.to_string())?;
    // The tokens of the turn's model calls, before a pause and after it.
    let mut usage = outcome.usage();
    if outcome.status == TurnStatus::AwaitingApproval {
        for m in &outcome.messages {
            delivered(agent, m).await;
        }
        let waiting = outcome.pending_approvals();
        let on_terminal = std::io::stdin().is_terminal();
        if let Some(resumed) = approval::decide_and_resume(agent, waiting, on_terminal).await? {
            usage += resumed.usage();
            outcome = resumed;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let took = start.elapsed();
    // Shown (just below, or as they came): delivered, as a front end marks
    // what it rendered.
    for m in &outcome.messages {
        delivered(agent, m).await;
    }
    match outcome.status {
        TurnStatus::Completed => {
            // Shown as it was written, or now.
            if !STREAMED.swap(false, std::sync::atomic::Ordering::Relaxed) {
                say!("\n{BOLD}{}{BOLD:#}", outcome.answer.unwrap_or_default());
            }
            if usage.is_empty() {
                say!("{DIM}({} ms){DIM:#}", took.as_millis());
            } else {
                say!("{DIM}({} ms; tokens: {usage}){DIM:#}", took.as_millis());
            }
            Ok(ExitCode::SUCCESS)
        }
        TurnStatus::Interrupted => {
            say!("{DIM}(interrupted){DIM:#}");
            Ok(ExitCode::SUCCESS)
        }
        TurnStatus::AwaitingApproval => {
            say!("{DIM}(waiting for approval: --session {session} decides it){DIM:#}");
            Ok(ExitCode::SUCCESS)
        }
        TurnStatus::Tripped => {
            if let Some(tripped) = outcome.tripped {
                say!(
                    "{BAD}stopped by the guardrail `{}`: {}{BAD:#}",
                    tripped.guardrail,
                    tripped.reason
                );
            }
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
