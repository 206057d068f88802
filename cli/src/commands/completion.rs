//! `agentpack completion <shell>`: prints a completion script generated from the clap definitions.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory as _;

use crate::args::{Cli, CompletionArgs};

pub fn run(args: &CompletionArgs) -> Result<ExitCode> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "agentpack", &mut script);
    crate::output::write_stdout(&script)?;
    Ok(ExitCode::SUCCESS)
}
