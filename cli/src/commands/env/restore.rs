//! `agentpack env restore`: frozen, like `npm ci`. Fetch exactly the locked content, verified
//! against each `content_hash`, and build the mode's generation from it.
//!
//! Never rewrites `pack.lock`, never moves a pin, never writes the checkout (the staging root and
//! the per-project state are outside it). A lock that does not match its manifest, a package
//! without a content hash, or a path package whose directory changed since the lock was written
//! stops the command before anything is staged, saying to run `lock` where the definition lives.
//! With a warm store it needs no network.

use std::process::ExitCode;

use agentpack_builders::project::ResolvePolicy;
use agentpack_lockfile::manifest::{Dependency, Pin};
use agentpack_lockfile::{Lockfile, Manifest};
use anyhow::{bail, Result};

use crate::context::{Context, RootsSource, LOCK_FILE};
use crate::output;
use crate::pipeline::{self, stage};
use crate::project::Project;

/// Why a lock does not match its manifest: one line per difference.
pub fn lock_mismatches(manifest: &Manifest, lock: &Lockfile) -> Vec<String> {
    let mut found = Vec::new();
    for (module, dependency) in &manifest.dependencies {
        let Some(entry) = lock.package(module.as_str()).filter(|entry| entry.direct) else {
            found.push(format!("{module} is in agentpack.toml but not locked"));
            continue;
        };
        match dependency {
            Dependency::Path(dir) if entry.url != format!("path:{dir}") => found.push(format!(
                "{module} is the path {dir} in agentpack.toml but {} in pack.lock",
                entry.url
            )),
            Dependency::Remote(Pin::Commit(commit)) if &entry.commit != commit => {
                found.push(format!(
                    "{module} pins commit {commit} in agentpack.toml but pack.lock has {}",
                    entry.commit
                ));
            }
            _ => {}
        }
    }
    for entry in lock.packages.iter().filter(|entry| entry.direct) {
        if !manifest
            .dependencies
            .keys()
            .any(|module| module == &entry.module)
        {
            found.push(format!(
                "{} is locked as a direct dependency but is not in agentpack.toml",
                entry.module
            ));
        }
    }
    for (name, server) in &manifest.mcp_servers {
        if server.disabled {
            continue;
        }
        match lock.mcp_server(name) {
            None => found.push(format!("MCP server {name} has no record in pack.lock")),
            Some(record)
                if !agentpack_builders::mcp_lock::definition_matches(
                    &record.definition,
                    server,
                ) =>
            {
                found.push(format!(
                    "MCP server {name} changed since pack.lock recorded it"
                ));
            }
            Some(_) => {}
        }
    }
    found
}

/// How to run `lock` where the definition lives, for a fix line.
fn lock_fix(project: &Project) -> String {
    match &project.source {
        RootsSource::EnvFlag { name }
        | RootsSource::Binding {
            environment: name, ..
        } => format!("agentpack --env {name} lock"),
        _ => format!("agentpack --project-root {} lock", project.root.display()),
    }
}

pub fn run_restore(ctx: &Context) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    let session = pipeline::open(&project)?;
    let manifest = session.manifest();
    let fix = lock_fix(&project);
    let Some(lock) = session.files().lock()? else {
        bail!(
            "no {LOCK_FILE} in {}: restore stages exactly what a lock pins\n  fix  run `{fix}` where the definition lives, then restore",
            project.root.display()
        );
    };
    let mode = pipeline::mode_name(ctx).to_owned();
    if manifest.mode(&mode).is_none() {
        bail!(
            "mode `{mode}` is not declared in agentpack.toml (declared: {})\n  fix  pick one with --mode",
            manifest.mode_names().join(", ")
        );
    }
    let mismatches = lock_mismatches(manifest, &lock);
    if !mismatches.is_empty() {
        bail!(
            "{} does not match its agentpack.toml; restore never rewrites the lock:\n  {}\n  fix  run `{fix}` where the definition lives, then restore",
            project.lock_path.display(),
            mismatches.join("\n  ")
        );
    }
    let unverified: Vec<&str> = lock
        .unverified_packages()
        .map(|package| package.module.as_str())
        .collect();
    if !unverified.is_empty() {
        bail!(
            "{} package(s) in {} have no content hash, so restore cannot verify them: {}\n  fix  run `{fix}` where the definition lives to record them, then restore",
            unverified.len(),
            project.lock_path.display(),
            unverified.join(", ")
        );
    }
    let outcome = session.resolve(&ResolvePolicy::Frozen, None);
    pipeline::say_warnings(&session);
    let outcome = outcome?;
    if !outcome.updated_entries.is_empty() {
        bail!(
            "the files of {} changed since {} was written; restore never rewrites the lock\n  fix  run `{fix}` where the definition lives, then restore",
            outcome.updated_entries.join(", "),
            project.lock_path.display()
        );
    }
    let staged = stage::stage_resolved(ctx, &project, &session, &outcome)?;
    if ctx.json {
        output::json(&serde_json::json!({
            "mode": mode,
            "definition_root": project.root,
            "workspace": project.workspace,
            "packages": lock.packages.len(),
            // Restore never writes the checkout; with --strict-external that is the contract.
            "strict_external": ctx.strict_external,
            "downloaded": outcome.downloaded,
            "generation": staged.generation,
            "pointer": staged.pointer,
        }))?;
    } else if ctx.says() {
        output::info(&format!(
            "Restored mode `{mode}` from {} ({} package(s), {} downloaded) at {}",
            project.lock_path.display(),
            lock.packages.len(),
            outcome.downloaded.len(),
            staged.pointer.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
