//! A test fixture: an agent worker process over a shared store (see
//! `worker.rs`). `cargo test` builds it as an example.

#[path = "worker.rs"]
mod worker;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Warnings (a resumed turn, a lost lease) to stderr, which the tests read.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match worker::main_with(&args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent_worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
