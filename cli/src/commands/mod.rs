//! Command bodies: one module per command, each a function from parsed arguments to an exit code.
//!
//! A command module never uses another command module (its own sub-modules are fine): what two
//! commands share lives in a shared module of the binary (`check`, `evidence`, `environment`,
//! `pipeline`...) or in a library, and only this dispatcher composes commands (`sync --probe`).
//! `cli/tests/it/architecture.rs` enforces it.

pub mod add;
mod completion;
pub mod eject;
pub mod env;
pub mod extra;
pub mod hook_exec;
mod init;
pub mod launch;
pub mod lock;
pub mod mcp;
pub mod mcp_exec;
pub mod mode;
pub mod mode_tui;
pub mod preflight;
pub mod probe;
pub mod publish;
pub mod store;
pub mod store_push;
pub mod sync;

use std::process::ExitCode;

use agentpack_harness::Agent;
use anyhow::Result;

use crate::args::{Cli, Command};
use crate::context::Context;

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let ctx = Context::new(&cli.global)?;
    if ctx.proxy && !matches!(cli.command, Command::Claude(_)) {
        anyhow::bail!(
            "--proxy works only with Claude Code: the diagnostics proxy speaks the Anthropic API\n  fix  run `agentpack --proxy claude`, or drop --proxy"
        );
    }
    // Commands that write the manifest, the lock or the staging pointers run one at a time per
    // project (launchers lock only while they stage: see `pipeline::stage::stage_for_launch`).
    let _project_lock = match cli.command {
        // The editor can stay open for long: it locks only while it saves.
        Command::Mode(ref args) if matches!(args.command, mode::ModeCommand::Tui) => None,
        Command::Add(_)
        | Command::Remove(_)
        | Command::Lock(_)
        | Command::Update(_)
        | Command::Sync(_)
        | Command::Mode(_)
        | Command::Rollback(_)
        | Command::Mcp(_)
        | Command::Eject(_)
        | Command::Extra(_) => lock_project(&ctx)?,
        Command::Env(ref args) if matches!(args.command, env::EnvCommand::Restore) => {
            lock_project(&ctx)?
        }
        _ => None,
    };
    match cli.command {
        Command::Init(args) => init::run(&ctx, &args),
        Command::Add(args) => add::run_add(&ctx, &args),
        Command::Remove(args) => add::run_remove(&ctx, &args),
        Command::Lock(args) => lock::run_lock(&ctx, &args),
        Command::Update(args) => lock::run_update(&ctx, &args),
        Command::Sync(args) => sync::run(&ctx, &args, &probe_after_sync),
        // Pure: takes no project lock and writes nothing.
        Command::Preflight(args) => preflight::run(&ctx, &args),
        Command::Probe(args) => probe::diff::dispatch(&ctx, &args),
        Command::Support(args) => probe::support::run(&ctx, &args),
        Command::Mode(args) if matches!(args.command, mode::ModeCommand::Tui) => {
            mode_tui::run(&ctx)
        }
        Command::Mode(args) => mode::run(&ctx, &args),
        Command::Rollback(args) => mode::run_rollback(&ctx, &args),
        Command::Gc(args) => store::run_gc(&ctx, &args),
        Command::Store(args) => store::run_store(&ctx, &args),
        Command::Publish(args) => publish::run(&ctx, &args),
        Command::Mcp(args) => mcp::run(&ctx, &args),
        Command::McpExec(args) => mcp_exec::run(&ctx, &args),
        Command::Claude(args) => launch::run(&ctx, Agent::Claude, &args),
        Command::Agent(args) => launch::run(&ctx, Agent::Cursor, &args),
        Command::Opencode(args) => launch::run(&ctx, Agent::OpenCode, &args),
        Command::Codex(args) => launch::run(&ctx, Agent::Codex, &args),
        Command::Grok(args) => launch::run(&ctx, Agent::Grok, &args),
        Command::Agy(args) => launch::run(&ctx, Agent::Antigravity, &args),
        Command::Eject(args) => eject::run(&ctx, &args),
        Command::Extra(args) => extra::run(&ctx, &args),
        Command::HookExec(args) => hook_exec::run(&args),
        Command::Env(args) => env::run(&ctx, &args),
        Command::Completion(args) => completion::run(&args),
    }
}

/// The project lock of the project this command runs in; `None` when there is no project (the
/// command itself then says so).
fn lock_project(ctx: &Context) -> Result<Option<crate::project_lock::ProjectLock>> {
    let Ok(project) = crate::project::Project::discover(ctx) else {
        return Ok(None);
    };
    crate::project_lock::ProjectLock::acquire(&project.state_dir(), &project.root).map(Some)
}

/// `sync --probe`: the probes of every installed agent, composed here so that `sync` never calls
/// the probe command.
fn probe_after_sync(
    ctx: &Context,
    policy: Option<crate::evidence::policy::Policy>,
) -> Result<sync::ProbeReport> {
    let rows = probe::all::probe_all(ctx, policy)?;
    Ok(sync::ProbeReport {
        json: serde_json::to_value(&rows)?,
        table: probe::all::table(&rows),
        exit: probe::all::exit_code(&rows),
    })
}
