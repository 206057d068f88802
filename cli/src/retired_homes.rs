//! Retiring home layers after a sync or a launch: the layers of this project's and mode's
//! generations that no launch uses any more are removed. A sync also removes the Codex homes and
//! the default-location staging trees (`<temp>/agentpack-<hash>/`) of projects that are gone; a
//! launch does not list those shared directories ([`Reach`]).
//!
//! A layer is in use while a live lease holds its generation (a wrapped agent runs from it) or,
//! for Codex, while the generation's daemon has loaded threads; an idle retired daemon is stopped
//! first. Failures here never fail the command: they are warnings, and the next sync or launch
//! tries again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_harness::launch::home_layer::{self, DaemonPolicy, PruneReport};
use agentpack_harness::Agent;
use agentpack_store::{LeaseState, Store};
use anyhow::Result;

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::pipeline::Staged;

/// Where Codex homes go when `AGENTPACK_STAGING_ROOT` leaves no room for the socket path.
const DEFAULT_CODEX_BASE: &str = "/var/tmp";

/// How far a clean-up looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// This project's and mode's layers only (a launch: nothing on its hot path lists `/tmp`).
    ThisProject,
    /// Also the Codex homes and default staging roots of projects that no longer exist (a sync).
    AlsoGoneProjects,
}

/// Removes what no launch uses any more and prints what it did; never fails.
pub fn retire(ctx: &Context, store: &Store, staged: &Staged, reach: Reach) {
    match prune(store, staged, reach) {
        Ok(report) => {
            if ctx.says() {
                for home in &report.stopped_daemons {
                    output::info(&format!(
                        "Stopped the idle Codex daemon of a retired generation ({})",
                        home.display()
                    ));
                }
            }
            for warning in &report.warnings {
                output::warn(warning);
            }
        }
        Err(error) => output::warn(&format!("cannot remove unused home layers: {error:#}")),
    }
}

/// The file in a default-location staging tree that names its project.
const STAGING_MARKER: &str = ".agentpack-project";

/// Which project a staging root serves: `Ok` when it is `project_root`'s or nobody's (then it is
/// claimed for it when `claim`), an error naming both when another project that still exists has
/// it. A staging root holds one project's `modes/` pointers, so two projects sharing one
/// (`AGENTPACK_STAGING_ROOT` exported for both) would switch each other's pointers.
pub fn check_staging_root(staging_root: &Path, project_root: &Path, claim: bool) -> Result<()> {
    let marker = staging_root.join(STAGING_MARKER);
    let text = format!("{}\n", project_root.display());
    match fs_err::read_to_string(&marker) {
        Ok(current) if current == text => return Ok(()),
        Ok(current) if Path::new(current.trim_end()).exists() => {
            anyhow::bail!(
                "the staging root {} holds the staging of another project, {}\n  fix  give each project its own staging root, e.g. AGENTPACK_STAGING_ROOT={}/<project name>, or unset AGENTPACK_STAGING_ROOT",
                staging_root.display(),
                current.trim_end(),
                staging_root.display()
            );
        }
        _ => {}
    }
    if claim {
        fs_err::create_dir_all(staging_root)?;
        let options =
            agentpack_fs::WriteOptions::shared_file().durability(agentpack_fs::Durability::None);
        agentpack_fs::write_file(&marker, text.as_bytes(), &options)?;
    }
    Ok(())
}

/// Removes the default-location staging trees (`<temp>/agentpack-<hash>/`) whose recorded project
/// no longer exists. Trees without the marker (older versions, or not ours) are never touched;
/// links inside are removed, never followed. A running agent is unaffected: it resolved its
/// generation (a store path its lease holds) when it started.
fn prune_orphan_staging_trees(temp: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(temp) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(hash) = name.to_str().and_then(|n| n.strip_prefix("agentpack-")) else {
            continue;
        };
        if hash.len() != 16 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let dir = entry.path();
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Ok(recorded) = std::fs::read_to_string(dir.join(STAGING_MARKER)) else {
            continue;
        };
        if Path::new(recorded.trim_end()).exists() {
            continue;
        }
        if std::fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

fn prune(store: &Store, staged: &Staged, reach: Reach) -> Result<PruneReport> {
    let mut keep: BTreeSet<String> = BTreeSet::new();
    keep.insert(home_layer::generation_id(&staged.generation));
    for (lease, state) in store.leases()? {
        if state == LeaseState::Live {
            keep.extend(
                lease
                    .record
                    .paths
                    .iter()
                    .map(|name| home_layer::generation_id(Path::new(name))),
            );
        }
    }
    let codex = env::agent_binary(Agent::Codex).ok();
    let policy = DaemonPolicy {
        codex: codex.as_deref(),
        ..DaemonPolicy::default()
    };
    let staging_override = env::var(EnvVars::AGENTPACK_STAGING_ROOT).map(PathBuf::from);
    let mut report = home_layer::prune_layers(
        &staged.state_dir,
        &staged.mode_dir,
        &staged.project_hash,
        staging_override.as_deref(),
        &keep,
        &policy,
    )?;
    if reach == Reach::ThisProject {
        return Ok(report);
    }
    // Codex homes of projects that no longer exist, wherever they were put.
    for base in staging_override
        .as_deref()
        .into_iter()
        .chain([Path::new(DEFAULT_CODEX_BASE)])
    {
        let orphans = home_layer::prune_orphan_codex_homes(base, &keep, &policy)?;
        report.removed.extend(orphans.removed);
        report.stopped_daemons.extend(orphans.stopped_daemons);
        report.busy.extend(orphans.busy);
        report.warnings.extend(orphans.warnings);
    }
    report
        .removed
        .extend(prune_orphan_staging_trees(&std::env::temp_dir()));
    Ok(report)
}
