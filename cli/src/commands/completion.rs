//! `agentpack completion <shell>`: prints a completion script generated from the clap definitions.
//!
//! The script offers what `--help` shows: hidden commands (`hook-exec`, `mcp-exec`, which agents
//! call, not people) are left out, and visible aliases (`cursor-agent`) are in.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory as _;

use crate::args::{Cli, CompletionArgs};

pub fn run(args: &CompletionArgs) -> Result<ExitCode> {
    let mut command = without_hidden_commands(&Cli::command());
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "agentpack", &mut script);
    crate::output::write_stdout(&script)?;
    Ok(ExitCode::SUCCESS)
}

/// `full` without its hidden subcommands (clap's generators list every subcommand).
fn without_hidden_commands(full: &clap::Command) -> clap::Command {
    let mut command = clap::Command::new("agentpack")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(full.is_subcommand_required_set());
    for arg in full.get_arguments() {
        command = command.arg(arg.clone());
    }
    command.subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_completion_command_keeps_every_visible_command_and_flag() {
        let full = super::Cli::command();
        let command = super::without_hidden_commands(&full);
        command.clone().debug_assert();
        let names: Vec<&str> = command.get_subcommands().map(|s| s.get_name()).collect();
        assert!(
            names.contains(&"agent") && names.contains(&"sync"),
            "{names:?}"
        );
        assert!(!names.contains(&"hook-exec") && !names.contains(&"mcp-exec"));
        assert_eq!(
            command.get_arguments().count(),
            full.get_arguments().count()
        );
    }
}
