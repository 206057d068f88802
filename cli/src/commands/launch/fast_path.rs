//! The launcher's fast path: the record a full sync leaves for the next launch of the same agent
//! and mode (`$AGENTPACK_HOME/projects/<hash>/launch/<mode-dir>-<agent>.json`, 0600, in the state
//! directory of the (definition, workspace) pair), and the check that selects that record's
//! generation again, without staging, while its fingerprint is unchanged.
//!
//! What the fingerprint covers is `crate::pipeline::fingerprint`'s ([`fingerprint_inputs_with`],
//! shared with a bare sync's fast path); this module only keeps and compares the record. It never
//! stages, never runs the agent and writes nothing but its record; a record it cannot read or that
//! names other roots declines the fast path (said at `-v`), never fails the launch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentpack_builders::project::ProjectFiles;
use agentpack_harness::launch::command::SecretRecord;
use agentpack_harness::launch::fingerprint;
use agentpack_harness::Agent;
use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::pipeline::fingerprint::{
    fingerprint_inputs_with, lock_inputs, write_private, LockInputs,
};
use crate::pipeline::Staged;
use crate::project::Project;

/// What a full sync left for the next launch of the same agent and mode, in the state directory
/// of the (definition, workspace) pair (see `crate::project`).
#[derive(Debug, Serialize, Deserialize)]
struct FastPathRecord {
    version: u32,
    fingerprint: String,
    project_root: PathBuf,
    /// The workspace whose `.agents/` overlay the fingerprint covers.
    workspace: PathBuf,
    project_hash: String,
    agentpack_home: PathBuf,
    staging_root: PathBuf,
    mode_dir: String,
    pointer: PathBuf,
    generation: PathBuf,
    state_dir: PathBuf,
    /// The agent's secret layer (this file is 0600, outside the store), as rendering left it:
    /// secret templates keep their `${VAR}` references, expanded at each launch.
    secrets: SecretRecord,
    /// What the fingerprint took from the lock (its slots and source directories). The
    /// fingerprint covers the lock's bytes, so while it matches these are what the lock names and
    /// the fast path need not parse the lock.
    lock_inputs: LockInputs,
    /// How many packages of that lock have no content hash (said on every launch).
    unverified: usize,
}

/// Version 2: keyed by the (definition, workspace) pair, naming the workspace, and keeping what
/// the fingerprint took from the lock.
const RECORD_VERSION: u32 = 2;

fn record_path(state_dir: &Path, mode_dir: &str, agent: Agent) -> PathBuf {
    state_dir
        .join("launch")
        .join(format!("{mode_dir}-{}.json", agent.as_str()))
}

fn mode_name(ctx: &Context) -> String {
    ctx.mode.clone().unwrap_or_else(|| "default".to_string())
}

/// The fingerprint of `agent`'s launch of `project` with `generation` selected, over the
/// definition and the lock as `files` holds them and what `lock_inputs` says the lock names (the
/// workspace's overlay and eject record, the cache slots and sources, the toggles:
/// [`fingerprint_inputs_with`]).
fn launch_fingerprint(
    ctx: &Context,
    project: &Project,
    agent: Agent,
    generation: &Path,
    files: &ProjectFiles,
    lock_inputs: LockInputs,
) -> String {
    let (inputs, extra) = fingerprint_inputs_with(
        ctx,
        Some(agent),
        &project.root,
        &project.workspace,
        generation,
        lock_inputs,
    );
    let read = fingerprint::ReadFiles {
        manifest: files.manifest_bytes(),
        lock: files.lock_bytes(),
    };
    fingerprint::compute_over(&inputs, &extra, read)
}

/// The staged state of the last full sync, when nothing visible changed since (`files`: the
/// definition and the lock as this launch read them; the lock is not parsed).
pub(super) fn check(
    ctx: &Context,
    project: &Project,
    agent: Agent,
    files: Option<&ProjectFiles>,
) -> Result<Option<Staged>> {
    if env::flag(EnvVars::AGENTPACK_FULL_VERIFY) {
        tracing::debug!("launch fast path declined: AGENTPACK_FULL_VERIFY is set");
        return Ok(None);
    }
    let Some(files) = files else {
        return Ok(None);
    };
    let mode_dir = agentpack_lockfile::keys::mode_dir_component(&mode_name(ctx));
    let Ok(text) = fs_err::read_to_string(record_path(&project.state_dir(), &mode_dir, agent))
    else {
        tracing::debug!("launch fast path declined: no record of a full sync of these roots");
        return Ok(None);
    };
    let Ok(record) = serde_json::from_str::<FastPathRecord>(&text) else {
        tracing::debug!("launch fast path declined: the record is not one this agentpack writes");
        return Ok(None);
    };
    if record.version != RECORD_VERSION
        || record.agentpack_home != project.home.root
        || record.project_root != project.root
        || record.workspace != project.workspace
    {
        tracing::debug!("launch fast path declined: the record is of other roots");
        return Ok(None);
    }
    // The pointer still selects the generation the fingerprint was taken with.
    if fs_err::canonicalize(&record.pointer).ok().as_deref() != Some(record.generation.as_path()) {
        tracing::debug!("launch fast path declined: the pointer moved since the last full sync");
        return Ok(None);
    }
    let fingerprint = launch_fingerprint(
        ctx,
        project,
        agent,
        &record.generation,
        files,
        record.lock_inputs,
    );
    if fingerprint != record.fingerprint {
        tracing::debug!("launch fast path declined: inputs changed since the last full sync");
        return Ok(None);
    }
    tracing::debug!(
        "launch fast path: inputs unchanged, using {}",
        record.generation.display()
    );
    // A lock without content hashes is reported on every launch, and refused by a full sync
    // when AGENTPACK_REQUIRE_VERIFIED is set.
    if record.unverified > 0 {
        if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED) {
            return Ok(None);
        }
        output::warn(&format!(
            "{} package(s) in pack.lock have no content hash and are not verified; run `agentpack lock` to record them",
            record.unverified
        ));
    }
    let secrets = record.secrets.into_layer();
    Ok(Some(Staged {
        project_root: record.project_root,
        project_hash: record.project_hash,
        agentpack_home: record.agentpack_home,
        staging_root: record.staging_root,
        mode_dir: record.mode_dir,
        pointer: record.pointer,
        generation: record.generation,
        state_dir: record.state_dir,
        secrets: BTreeMap::from([(agent, secrets)]),
        package_warnings: Vec::new(),
    }))
}

/// Records the fingerprint after a full sync (which verified everything it staged from), over the
/// definition and the lock as the sync left them (the lock parsed once, for what it names).
pub(super) fn record(
    ctx: &Context,
    project: &Project,
    agent: Agent,
    staged: &Staged,
) -> Result<()> {
    let files = ProjectFiles::read(&project.manifest_path, &project.lock_path)?;
    let lock = files.lock().ok().flatten();
    let lock_inputs = lock_inputs(&project.root, &project.home.root, lock.as_ref());
    let secrets = staged
        .secrets
        .get(&agent)
        .map(SecretRecord::from_layer)
        .unwrap_or_default();
    let record = FastPathRecord {
        version: RECORD_VERSION,
        fingerprint: launch_fingerprint(
            ctx,
            project,
            agent,
            &staged.generation,
            &files,
            lock_inputs.clone(),
        ),
        project_root: project.root.clone(),
        workspace: project.workspace.clone(),
        project_hash: staged.project_hash.clone(),
        agentpack_home: staged.agentpack_home.clone(),
        staging_root: staged.staging_root.clone(),
        mode_dir: staged.mode_dir.clone(),
        pointer: staged.pointer.clone(),
        generation: staged.generation.clone(),
        state_dir: staged.state_dir.clone(),
        secrets,
        lock_inputs,
        unverified: lock
            .as_ref()
            .map_or(0, |lock| lock.unverified_packages().count()),
    };
    let path = record_path(&staged.state_dir, &staged.mode_dir, agent);
    let mut bytes = serde_json::to_vec_pretty(&record)?;
    bytes.push(b'\n');
    write_private(&path, &bytes)
}
