//! `agentpack hook-exec dispatch --agent A --event E --spec FILE`: what every staged hook calls.
//!
//! Reads the agent's JSON payload from stdin, runs the spec's handlers (see
//! `agentpack_harness::launch::hook_exec`), and answers on stdout, stderr and the exit code
//! exactly as the handlers did (exit 2 blocks). It is called by agents, not people, so it prints
//! nothing of its own except a refusal when the spec cannot be read.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use agentpack_harness::launch::hook_exec;
use agentpack_harness::render::hooks;
use agentpack_harness::Agent;
use anyhow::{Context as _, Result};

/// `hook-exec`'s subcommands.
#[derive(Debug, clap::Args)]
pub struct HookExecArgs {
    #[command(subcommand)]
    pub command: HookExecCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum HookExecCommand {
    /// Run the handlers of one staged hook for the payload on stdin.
    Dispatch(DispatchArgs),
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// The agent that fired the hook (claude, cursor, opencode, codex, grok, agy).
    #[arg(long)]
    pub agent: String,
    /// The event, in the agent's own name.
    #[arg(long)]
    pub event: String,
    /// The staged spec file naming the handlers.
    #[arg(long)]
    pub spec: PathBuf,
}

/// Runs `hook-exec`.
pub fn run(args: &HookExecArgs) -> Result<ExitCode> {
    match &args.command {
        HookExecCommand::Dispatch(dispatch) => run_dispatch(dispatch),
    }
}

fn run_dispatch(args: &DispatchArgs) -> Result<ExitCode> {
    // Take the agent's whole payload first, even when the agent or spec turns out to be unusable: an agent
    // writing to a hook that exits without reading would see a broken pipe instead of our message.
    let mut payload = Vec::new();
    std::io::stdin()
        .read_to_end(&mut payload)
        .context("cannot read the hook payload from stdin")?;
    let agent = Agent::from_name(&args.agent).with_context(|| {
        format!(
            "unknown agent `{}`\n  fix  use one of claude, cursor, opencode, codex, grok, agy",
            args.agent
        )
    })?;
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    let spec_path = hooks::resolve_spec_arg(&args.spec, codex_home.as_deref()).with_context(|| {
        format!(
            "the hook names its spec `{}` relative to CODEX_HOME, which is not set\n  fix  start Codex with `agentpack codex`, or run `agentpack eject codex` again",
            args.spec.display()
        )
    })?;
    let spec = hook_exec::load_spec(&spec_path, agent, &args.event)?;
    let outcome = hook_exec::dispatch(agent, &spec, &payload);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&outcome.stdout)?;
    stdout.flush()?;
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(&outcome.stderr)?;
    stderr.flush()?;
    Ok(ExitCode::from(u8::try_from(outcome.exit_code).unwrap_or(1)))
}
