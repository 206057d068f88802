//! Command bodies: one module per command, each a function from parsed arguments to an exit code.

mod completion;
mod init;

use std::process::ExitCode;

use anyhow::Result;

use crate::args::{Cli, Command};
use crate::context::Context;

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let ctx = Context::new(&cli.global)?;
    match cli.command {
        Command::Init(args) => init::run(&ctx, &args),
        Command::Completion(args) => completion::run(&args),
    }
}
