//! `agentpack gc`, `agentpack store verify [--repair]` and `agentpack store info`: store maintenance.
//!
//! Thin: the store crate does the work and returns reports; this module prints them as text or, with
//! `--json`, in the automation envelope.

use std::process::ExitCode;
use std::time::Duration;

use agentpack_store::{gc, info, verify, GcOptions, VerifyOptions};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};

use crate::context::{Context, Home};
use crate::output::{self, human_bytes};
use crate::session;

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Report what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Generations kept per project and mode, newest first, whatever their age.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub keep_generations: usize,
    /// Beyond the kept ones, keep generations younger than this (e.g. `7d`, `12h`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<Duration>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|err| format!("{err} (examples: 30m, 12h, 7d)"))
}

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Re-hash every blob and store path; name what is damaged.
    Verify(VerifyArgs),
    /// Location, filesystem, link mode, counts, bytes and the dedup ratio.
    Info,
    /// Push store paths to an OCI registry (a team cache): `store push oci://REGISTRY/REPO`.
    Push(super::store_push::StorePushArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Restore damaged files from good copies; report what cannot be restored.
    #[arg(long)]
    pub repair: bool,
}

pub fn run_gc(ctx: &Context, args: &GcArgs) -> Result<ExitCode> {
    let store = session::open_store(&Home::from_env()?)?;
    let report = gc(
        &store,
        GcOptions {
            dry_run: args.dry_run,
            keep_generations: args.keep_generations,
            older_than: args.older_than,
        },
    )?;
    session::flush_store_warnings(&store);
    // What could not be removed (another user's files in a shared store, a failed removal) is said on
    // stderr with the remedy, in both output modes; `--json` lists it in `not_removed`.
    for warning in &report.warnings {
        output::warn(warning);
    }
    if ctx.json {
        output::json(&report)?;
    } else {
        output::stdout(&gc_summary(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_store(ctx: &Context, args: &StoreArgs) -> Result<ExitCode> {
    let store = session::open_store(&Home::from_env()?)?;
    match &args.command {
        StoreCommand::Info => {
            let info = info(&store)?;
            session::flush_store_warnings(&store);
            if ctx.json {
                output::json(&info)?;
            } else {
                let filesystem = if info.filesystem.remote {
                    format!("{} (network or userspace)", info.filesystem.name)
                } else {
                    info.filesystem.name.clone()
                };
                let link = match info.link_method {
                    Some(method) => {
                        format!("{} (files are linked by {method} here)", info.link_mode)
                    }
                    None => info.link_mode.to_string(),
                };
                output::stdout(&format!(
                    "location     {}\nfilesystem   {}\nlink mode    {}\nindex        {}\nstore paths  {}\n{}blobs        {}\nslots        {}\n{}",
                    info.location.display(),
                    filesystem,
                    link,
                    info.index.as_ref().map_or("none".to_owned(), |p| p.display().to_string()),
                    info.store_paths,
                    info_kinds(&info),
                    info.blobs,
                    info.slots,
                    info_bytes(&info),
                ))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Verify(verify_args) => verify_store(ctx, &store, verify_args.repair),
        StoreCommand::Push(push_args) => super::store_push::run(ctx, &store, push_args),
    }
}

/// `store verify [--repair]`. Repair restores damaged files from good copies; what has no good copy is
/// removed from the store, and, inside a project, fetched or built again by a sync.
fn verify_store(
    ctx: &Context,
    store: &std::sync::Arc<agentpack_store::Store>,
    repair: bool,
) -> Result<ExitCode> {
    let report = verify(store, VerifyOptions { repair })?;
    session::flush_store_warnings(store);
    let damaged = !report.is_clean() && !repair;
    if ctx.json {
        if damaged {
            // A refusal is never JSON: say it on stderr, exit non-zero.
            bail!(
                "the store is damaged: {}\n  fix  agentpack store verify --repair",
                serde_json::to_string(&report)?
            );
        }
        output::json(&report)?;
    } else {
        output::stdout(&format!(
            "checked {} blob(s) and {} store path(s)\n",
            report.blobs_checked, report.store_paths_checked
        ))?;
        for blob in &report.damaged_blobs {
            output::stdout(&format!("damaged blob  {}: {}\n", blob.blob, blob.problem))?;
        }
        for path in &report.damaged_paths {
            output::stdout(&format!(
                "damaged path  {}: {}\n",
                path.name,
                path.problems.join("; ")
            ))?;
        }
        // One line per name: its label, the name, what the label needs said after it. The store
        // database is a cache: a record it corrected is said, never counted as damage.
        let named: [(&str, &[String], &str); 6] = [
            ("no metadata   ", &report.missing_metadata, ""),
            ("missing path  ", &report.missing_paths, ""),
            ("repaired      ", &report.repaired, ""),
            (
                "removed       ",
                &report.unrepairable,
                " (no good copy was left)",
            ),
            ("not repaired  ", &report.not_repaired, ""),
            ("index record  ", &report.index_corrected, ""),
        ];
        for (label, names, after) in named {
            for name in names {
                output::stdout(&format!("{label}{name}{after}\n"))?;
            }
        }
    }
    if damaged {
        bail!("the store is damaged\n  fix  agentpack store verify --repair");
    }
    if repair && !report.unrepairable.is_empty() {
        // Re-fetch or rebuild what was removed, for the project we are in.
        match crate::project::Project::discover(ctx) {
            Ok(project) => {
                // The same store handle: one per process.
                let mut session =
                    crate::pipeline::open_with_store(&project, std::sync::Arc::clone(store))?;
                let policy = agentpack_builders::project::ResolvePolicy::Sync {
                    update: agentpack_builders::resolve::UpdatePolicy::KeepPins,
                    repair: false,
                };
                crate::pipeline::stage::sync(
                    ctx,
                    &project,
                    &mut session,
                    &policy,
                    crate::pipeline::stage::StageOptions::default(),
                )?;
                output::info(
                    "fetched and built again what this project uses; run `agentpack sync` in other projects that used the removed paths",
                );
            }
            Err(_) => output::warn(
                "removed store paths that had no good copy; run `agentpack sync` in each project that used them to fetch or build them again",
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The store paths of `store info` by kind (`package`, `files`, `built`, ...), one indented line each:
/// how many and what they allocate, each path counted alone.
fn info_kinds(info: &agentpack_store::StoreInfo) -> String {
    info.kinds
        .iter()
        .map(|(kind, summary)| {
            format!(
                "  {kind:<12} {} ({} allocated)\n",
                summary.store_paths,
                human_bytes(summary.disk_bytes)
            )
        })
        .collect()
}

/// The byte lines of `store info`: allocated bytes (what `du` counts) by part, then logical sizes.
fn info_bytes(info: &agentpack_store::StoreInfo) -> String {
    let allocated = &info.allocated;
    format!(
        "allocated    {} (on disk, as `du -s` counts: every inode once, directories, symlinks and metadata included)\n  blobs        {}\n  store paths  {} (directories, symlinks, files not linked to a blob)\n  metadata     {}\n  index        {}\n  stamps       {} (one per blob)\n  other        {} (roots, generation histories, leases, .tmp)\nunique content {} (file sizes of the distinct files, each once)\napparent     {} (file sizes of every store path's files as independent copies)\ndedup ratio  {:.2} (allocated as independent copies / allocated for the store paths, each inode once)\n",
        human_bytes(allocated.total),
        human_bytes(allocated.blobs),
        human_bytes(allocated.store_paths),
        human_bytes(allocated.metadata),
        human_bytes(allocated.index),
        human_bytes(allocated.stamps),
        human_bytes(allocated.other),
        human_bytes(info.unique_content_bytes),
        human_bytes(info.apparent_bytes),
        info.dedup_ratio,
    )
}

/// The one-line summary of a GC: only what really went is counted (`--dry-run`: what would go).
fn gc_summary(report: &agentpack_store::GcReport) -> String {
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let stayed = if report.not_removed.is_empty() {
        String::new()
    } else {
        format!(
            "; {} unused item(s) {} (see the warnings above)",
            report.not_removed.len(),
            if report.dry_run {
                "could not be removed by this user"
            } else {
                "were not removed"
            }
        )
    };
    format!(
        "{verb} {} store path(s) and {} blob(s), {} generation(s) pruned, {} freed; kept {} store path(s){stayed}\n",
        report.store_paths_removed.len(),
        report.blobs_removed,
        report.generations_pruned,
        human_bytes(report.bytes_freed),
        report.store_paths_kept,
    )
}
