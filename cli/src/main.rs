//! The `agentpack` binary: parse the command line, run the command, print the error.
//!
//! This file stays thin on purpose (ripgrep's `main.rs` is the model): the libraries do the work, the
//! command modules under `commands/` decide what to print, and `main` only turns an error into text on
//! stderr and an exit code. Nothing else in the binary may call `std::process::exit`.

mod args;
mod check;
mod commands;
mod context;
mod env;
mod environment;
mod evidence;
mod fs_transaction;
mod logging;
mod mode_generations;
mod oci_progress;
mod output;
mod pipeline;
mod private_dir;
mod project;
mod project_lock;
mod proxy;
mod retired_homes;
mod rollback_record;
mod session;
mod user_config;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    logging::init(cli.global.verbose);
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) if err.is::<output::ClosedStdout>() => ExitCode::SUCCESS,
        Err(err) => {
            output::print_error(&err);
            ExitCode::FAILURE
        }
    }
}
