//! The command line, as clap types, and nothing else.
//!
//! Like `uv-cli`, this module only declares the interface: every command and flag with its help text.
//! Command bodies live in `commands/`. Global flags are marked `global = true`, so they are accepted
//! before or after the subcommand (`agentpack --quiet init` and `agentpack init --quiet` are the same).
//! Only commands that work appear here; a command is added in the same change as its body.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Pin the skills, plugins, commands, agents, rules, hooks and MCP servers your AI coding agents use.
#[derive(Debug, Parser)]
#[command(name = "agentpack", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command accepts, before or after the subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The project directory (default: the nearest parent directory with an agentpack.toml, for `init`
    /// the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub project_root: Option<PathBuf>,

    /// The mode to stage or launch (default: the reserved `default` mode).
    #[arg(long, global = true, value_name = "NAME")]
    pub mode: Option<String>,

    /// Print machine-readable JSON on stdout (reads that print state).
    #[arg(long, global = true)]
    pub json: bool,

    /// Do not report progress on stderr.
    #[arg(long, global = true)]
    pub no_progress: bool,

    /// Print only warnings and errors.
    #[arg(long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create agentpack.toml and an empty pack.lock, and make sure AGENTPACK_HOME exists.
    Init(InitArgs),

    /// Print a shell completion script to stdout.
    Completion(CompletionArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project name (default: the directory name).
    #[arg(long)]
    pub name: Option<String>,

    /// The project version.
    #[arg(long, default_value = "0.0.1")]
    pub version: String,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to generate a script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
