//! `actiongate-executor`: parses the command line and runs it.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = actiongate_executor::cli::Cli::parse();
    match actiongate_executor::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("actiongate-executor: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
