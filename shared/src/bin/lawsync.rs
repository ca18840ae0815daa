//! `lawsync`: the command line. Runs the same code as the Lambda functions; see
//! [`lawsync::cli`]. Wiring only: a failure is printed and ends the process with its
//! [`lawsync::cli::ExitStatus`].

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    lawsync::telemetry::init_cli();
    let args = lawsync::cli::Args::parse();
    match lawsync::cli::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lawsync: {e}");
            e.exit_status().into()
        }
    }
}
