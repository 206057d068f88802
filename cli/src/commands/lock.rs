//! `agentpack lock` and `agentpack update`: resolve the manifest into pack.lock.
//!
//! Both re-resolve on purpose. `lock` keeps every pin the manifest still accepts (`--update` moves
//! floating pins); `update [spec...]` moves the named modules, or all of them. Each prints one line per
//! pin it changes and records a content hash for every package it fetched. Neither stages anything.

use std::collections::BTreeSet;
use std::process::ExitCode;

use agentpack_builders::resolve::{resolve, ResolveEnv, ResolveOutcome, UpdatePolicy};
use agentpack_lockfile::{parse_spec, Lockfile, Manifest, ManifestDocument, PackageSpec};
use anyhow::{bail, Result};
use clap::Args;

use crate::commands::mcp;
use crate::commands::sync::{self, SyncOptions};
use crate::context::Context;
use crate::output;
use crate::project::Project;
use crate::session;

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
    let manifest = project.load_manifest()?;
    let old = project.load_lock_for_relock()?;
    let policy = if args.update {
        UpdatePolicy::UpdateAll
    } else {
        UpdatePolicy::KeepPins
    };
    let mut outcome = relock(ctx, &project, &manifest, old.as_ref(), &policy)?;
    let old = old.unwrap_or_else(|| Lockfile::new(manifest.name.clone(), manifest.version.clone()));
    let options = mcp::lock_options(args.update, args.allow_unpinned_mcp, false);
    sync::record_mcp_servers(
        ctx,
        &project,
        &manifest,
        &mut outcome.lock,
        &outcome.slots,
        &old,
        &options,
    )?;
    save(ctx, &project, &outcome.lock)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_update(ctx: &Context, args: &UpdateArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let manifest = project.load_manifest()?;
    let old = project.load_lock(&manifest)?;
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
    let snapshot = project.snapshot()?;
    let mut outcome = relock(ctx, &project, &manifest, Some(&old), &policy)?;
    let options = mcp::lock_options(args.specs.is_empty(), false, false);
    sync::record_mcp_servers(
        ctx,
        &project,
        &manifest,
        &mut outcome.lock,
        &outcome.slots,
        &old,
        &options,
    )?;
    save(ctx, &project, &outcome.lock)?;
    if !args.no_sync {
        match sync::run_sync(ctx, &project, &SyncOptions::default()) {
            Ok(staged) => {
                sync::tidy_after_sync(ctx, &project, &staged)?;
                if ctx.says() {
                    output::info(&format!(
                        "Staged mode `{}` at {}",
                        sync::mode_name(ctx),
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

/// The module id a user's spec names.
pub fn module_of(spec: &str) -> Result<String> {
    Ok(match parse_spec(spec)? {
        PackageSpec::Github(github) => github.module.as_str().to_owned(),
        PackageSpec::Name { name, .. } => name.as_str().to_owned(),
        PackageSpec::Path(path) => {
            bail!("`{path}` is a filesystem path; name the package by its key in agentpack.toml")
        }
    })
}

/// Resolves and reports; writes nothing.
pub fn relock(
    ctx: &Context,
    project: &Project,
    manifest: &Manifest,
    old: Option<&Lockfile>,
    policy: &UpdatePolicy,
) -> Result<ResolveOutcome> {
    let store = session::open_store(&project.home)?;
    let github = session::github(&store)?;
    github
        .resolver()
        .set_refresh(!matches!(policy, UpdatePolicy::KeepPins));
    let name_each = |module: &str| output::progress(ctx, &format!("resolving {module}"));
    let env = ResolveEnv {
        project_root: &project.root,
        agentpack_home: &project.home.root,
        fetcher: &github.fetcher,
        store: store.as_ref(),
        progress: Some(&name_each),
        keep_unhashed: false,
    };
    let ticker = output::Ticker::start(ctx, "resolving");
    let outcome = resolve(manifest, old, policy, &env);
    drop(ticker);
    let outcome = outcome?;
    for warning in &outcome.warnings {
        output::warn(warning);
    }
    if ctx.says() {
        for change in &outcome.changes {
            output::info(&change.to_string());
        }
    }
    sync::say_mirrored(ctx, &outcome.lock, &project.home.root);
    session::flush_store_warnings(&store);
    Ok(outcome)
}

/// Applies an edited manifest as one transaction: re-resolve the lock (keeping pins), let `adjust`
/// change the resolved lock (e.g. MCP records), write both files, then sync unless `no_sync`. If any
/// step fails, `agentpack.toml` and `pack.lock` are put back exactly as they were and the error says
/// so, naming `command`.
pub fn apply_manifest_edit(
    ctx: &Context,
    project: &Project,
    document: &ManifestDocument,
    no_sync: bool,
    command: &str,
    adjust: impl FnOnce(&mut Lockfile) -> Result<()>,
) -> Result<()> {
    let manifest = document.to_manifest()?;
    let old = project.load_lock(&manifest)?;
    let snapshot = project.snapshot()?;
    let result = (|| -> Result<Option<sync::Staged>> {
        let outcome = relock(ctx, project, &manifest, Some(&old), &UpdatePolicy::KeepPins)?;
        let mut lock = outcome.lock;
        // New servers (e.g. of an added package) are pinned when the registry answers; an
        // unreachable registry leaves them unrecorded, with a warning, rather than failing the edit.
        let options = mcp::lock_options(false, false, true);
        sync::record_mcp_servers(
            ctx,
            project,
            &manifest,
            &mut lock,
            &outcome.slots,
            &old,
            &options,
        )?;
        adjust(&mut lock)?;
        agentpack_lockfile::write_if_changed(
            &project.manifest_path,
            document.to_string().as_bytes(),
        )?;
        lock.save(&project.lock_path)?;
        if no_sync {
            return Ok(None);
        }
        sync::run_sync(ctx, project, &SyncOptions::default()).map(Some)
    })();
    let staged = result.map_err(|err| {
        snapshot.restore();
        err.context(format!(
            "`agentpack {command}` failed; agentpack.toml and pack.lock are unchanged"
        ))
    })?;
    // After a successful sync, what a bare `agentpack sync` tidies (outside the transaction: the
    // manifest and lock are final by now).
    match staged {
        Some(staged) => sync::tidy_after_sync(ctx, project, &staged),
        None => Ok(()),
    }
}

fn save(ctx: &Context, project: &Project, lock: &Lockfile) -> Result<()> {
    let written = lock.save(&project.lock_path)?;
    if ctx.says() {
        let what = if written { "Wrote" } else { "Unchanged:" };
        output::info(&format!("{what} {}", project.lock_path.display()));
    }
    Ok(())
}
