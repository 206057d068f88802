//! Retiring home layers after a sync or a launch: the layers of this project's and mode's
//! generations that no launch uses any more are removed, and the Codex homes of projects that are
//! gone.
//!
//! A layer is in use while a live lease holds its generation (a wrapped agent runs from it) or,
//! for Codex, while the generation's daemon has loaded threads; an idle retired daemon is stopped
//! first. Failures here never fail the command: they are warnings, and the next sync or launch
//! tries again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_harness::home_layer::{self, DaemonPolicy, PruneReport};
use agentpack_harness::{launch, Agent};
use agentpack_store::{LeaseState, Store};
use anyhow::Result;

use crate::commands::sync::Staged;
use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;

/// Where Codex homes go when `AGENTPACK_STAGING_ROOT` leaves no room for the socket path.
const DEFAULT_CODEX_BASE: &str = "/var/tmp";

/// Removes what no launch uses any more and prints what it did; never fails.
pub fn retire(ctx: &Context, store: &Store, staged: &Staged) {
    match prune(store, staged) {
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

fn prune(store: &Store, staged: &Staged) -> Result<PruneReport> {
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
    let codex = launch::resolve_binary(
        Agent::Codex,
        std::env::var_os(launch::path_override_var(Agent::Codex)).as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
    .ok();
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
    Ok(report)
}
