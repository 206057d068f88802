//! The command line, as clap types, and nothing else.
//!
//! Like `uv-cli`, this module only declares the interface: every command and flag with its help text.
//! Command bodies live in `commands/`. Global flags are marked `global = true`, so they are accepted
//! before or after the subcommand (`agentpack --quiet init` and `agentpack init --quiet` are the same).
//! Only commands that work appear here; a command is added in the same change as its body.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands;

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

    /// The definition root: where agentpack.toml, pack.lock and contract.json are, when they live
    /// outside the checkout (the workspace is then --workspace, else the current directory).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        conflicts_with = "project_root"
    )]
    pub definition_root: Option<PathBuf>,

    /// The environment under $AGENTPACK_HOME/environments/NAME as the definition root; fails when it
    /// does not exist, never falls through to another one. Give it before the command
    /// (`agentpack --env team sync`): after it, `mcp add --env K=V` is the server's variable.
    #[arg(long = "env", value_name = "NAME", conflicts_with_all = ["project_root", "definition_root"])]
    pub env_name: Option<String>,

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

    /// Explain what happens on stderr: `-v` for decisions (which source served a package, why a fast
    /// path was declined), `-vv` for every step. `RUST_LOG` takes a full filter instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Let the agent act without asking (mapped to each agent's own flag or setting).
    #[arg(long, global = true)]
    pub yolo: bool,

    /// Launch and restore without writing any configuration into the checkout: Claude Code,
    /// OpenCode, Codex and Grok get theirs from outside it; Cursor and Antigravity, which read a
    /// workspace overlay, are refused. With `preflight`, planned workspace writes are violations.
    #[arg(long, global = true)]
    pub strict_external: bool,

    /// Run Claude Code through a local diagnostics proxy that logs each API request as a JSONL
    /// line (only with `agentpack claude`): `agentpack --proxy claude`.
    #[arg(long, global = true)]
    pub proxy: bool,

    /// The workspace a launched agent works in (default: the current directory). Cursor reads
    /// sub-agents from <DIR>/.cursor/agents; Grok gets it as --cwd, Antigravity as --add-dir.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create agentpack.toml and an empty pack.lock, and make sure AGENTPACK_HOME exists.
    Init(InitArgs),

    /// Resolve a package spec, add it under [dependencies], lock, then sync.
    Add(commands::add::AddArgs),

    /// Drop a dependency (and mode selectors naming it), lock, then sync.
    Remove(commands::add::RemoveArgs),

    /// Resolve agentpack.toml into pack.lock (direct and transitive), keeping pins already locked.
    Lock(commands::lock::LockArgs),

    /// Move pins to the newest commits their constraints allow, then sync.
    Update(commands::lock::UpdateArgs),

    /// Verify the lock and the store, build the mode's generation, and select it.
    Sync(commands::sync::SyncArgs),

    /// Check, offline and writing nothing, what an agent will load; evaluate contract.json.
    Preflight(commands::preflight::PreflightArgs),

    /// Run the real agent against the staged tree (no model request) and write a receipt.
    Probe(commands::probe::diff::ProbeCommand),

    /// Diagnostics to share: `support export RECEIPT --output FILE` writes a redacted capsule.
    Support(commands::probe::support::SupportArgs),

    /// Manage [modes] in agentpack.toml.
    Mode(commands::mode::ModeArgs),

    /// Select an earlier generation of a mode.
    Rollback(commands::mode::RollbackArgs),

    /// Remove store paths and blobs that no root reaches.
    Gc(commands::store::GcArgs),

    /// Inspect and repair the store.
    Store(commands::store::StoreArgs),

    /// Push a skill or plugin directory to an OCI registry: `publish DIR oci://REGISTRY/REPO:TAG`.
    Publish(commands::publish::PublishArgs),

    /// Manage [mcp.servers] and their records in pack.lock.
    Mcp(commands::mcp::McpArgs),

    /// Starts a tree-locked MCP server from the store (staged configs call it, not people).
    #[command(hide = true)]
    McpExec(commands::mcp_exec::McpExecArgs),

    /// Launch Claude Code with the mode's plugin bundle.
    Claude(commands::launch::LaunchArgs),

    /// Launch Cursor Agent (cursor-agent) with a staged HOME.
    #[command(visible_alias = "cursor-agent")]
    Agent(commands::launch::LaunchArgs),

    /// Launch OpenCode with a staged config root.
    Opencode(commands::launch::LaunchArgs),

    /// Launch Codex with a staged CODEX_HOME.
    Codex(commands::launch::LaunchArgs),

    /// Launch Grok with a staged GROK_HOME.
    Grok(commands::launch::LaunchArgs),

    /// Launch Antigravity (agy) with the workspace plugin.
    Agy(commands::launch::LaunchArgs),

    /// Copy the staged trees into the project for editors that start without a launcher.
    Eject(commands::eject::EjectArgs),

    /// Helpers outside the main workflow (`extra sync-claude`).
    Extra(commands::extra::ExtraArgs),

    /// Runs a staged hook's handlers (called by the agents, not by people).
    #[command(hide = true)]
    HookExec(commands::hook_exec::HookExecArgs),

    /// Portable environments: definitions kept outside the checkout (init, use, status, export...).
    Env(commands::env::EnvArgs),

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
