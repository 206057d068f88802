//! `agentpack lock` and `agentpack update`: resolve the manifest into pack.lock.
//!
//! Both re-resolve on purpose. `lock` keeps every pin the manifest still accepts (`--update` moves
//! floating pins); `update [spec...]` moves the named modules, or all of them. Each prints one line per
//! pin it changes and records a content hash for every package it fetched. `lock` stages nothing;
//! `update` then stages what it resolved (never resolving twice).

use std::collections::BTreeSet;
use std::process::ExitCode;

use agentpack_builders::project::ProjectSession;
use agentpack_builders::resolve::UpdatePolicy;
use agentpack_lockfile::Lockfile;
use anyhow::{bail, Result};
use clap::Args;

use crate::context::Context;
use crate::output;
use crate::pipeline;
use crate::pipeline::edit::{self, module_of};
use crate::pipeline::stage;
use crate::project::Project;

#[derive(Debug, Args)]
pub struct LockArgs {
    /// Re-resolve floating pins (branches, floating semver constraints, npm dist-tags).
    #[arg(long)]
    pub update: bool,
    /// Record an MCP server whose registry cannot be reached as unpinned instead of failing.
    #[arg(long)]
    pub allow_unpinned_mcp: bool,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The packages to move (module ids or specs); all when none is given.
    pub specs: Vec<String>,
    /// Update pack.lock only; do not sync.
    #[arg(long)]
    pub no_sync: bool,
}

pub fn run_lock(ctx: &Context, args: &LockArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let mut session = pipeline::open(&project)?;
    let policy = if args.update {
        UpdatePolicy::UpdateAll
    } else {
        UpdatePolicy::KeepPins
    };
    let mut resolved = stage::relock(ctx, &project, &session, policy, true)?;
    let options = edit::lock_options(args.update, args.allow_unpinned_mcp, false);
    stage::record_mcp_servers(ctx, &session, &mut resolved, &options)?;
    save(ctx, &project, &mut session, &resolved.lock)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_update(ctx: &Context, args: &UpdateArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let mut session = pipeline::open(&project)?;
    let old = session.lock()?;
    let policy = if args.specs.is_empty() {
        UpdatePolicy::UpdateAll
    } else {
        let mut modules = BTreeSet::new();
        for spec in &args.specs {
            let module = module_of(spec)?;
            if !old.packages.iter().any(|p| p.module.as_str() == module) {
                bail!("{module} is not in pack.lock\n  fix  check the name with `cat pack.lock`, or add it with `agentpack add {spec}`");
            }
            modules.insert(module);
        }
        UpdatePolicy::UpdateModules(modules)
    };
    let snapshot = pipeline::snapshot(&session)?;
    let mut resolved = stage::relock(ctx, &project, &session, policy, false)?;
    let options = edit::lock_options(args.specs.is_empty(), false, false);
    stage::record_mcp_servers(ctx, &session, &mut resolved, &options)?;
    save(ctx, &project, &mut session, &resolved.lock)?;
    if !args.no_sync {
        match stage::stage_resolved(ctx, &project, &session, &resolved) {
            Ok(staged) => {
                stage::tidy_after_sync(ctx, &session, &staged)?;
                if ctx.says() {
                    output::info(&format!(
                        "Staged mode `{}` at {}",
                        pipeline::mode_name(ctx),
                        staged.pointer.display()
                    ));
                }
            }
            Err(err) => {
                snapshot.restore();
                return Err(err);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn save(
    ctx: &Context,
    project: &Project,
    session: &mut ProjectSession,
    lock: &Lockfile,
) -> Result<()> {
    let written = session.save_lock(lock, true)?;
    if ctx.says() {
        let what = if written { "Wrote" } else { "Unchanged:" };
        output::info(&format!("{what} {}", project.lock_path.display()));
    }
    Ok(())
}
