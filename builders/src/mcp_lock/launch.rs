//! What a staged config runs instead of an npm server's written command: the mcp-exec spec store
//! path of every tree-locked server (planned by name, published without contacting a registry) and
//! the launch of every current pinned record (`agentpack mcp-exec --spec ...`, or the runner with
//! `pkg@<exact>`).
//!
//! Reads records only; it must never decide a pin (that is [`super::record`]) nor write anything
//! but spec store paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentpack_harness::{McpLaunch, MergedServer};
use agentpack_lockfile::{Lockfile, McpStatus};
use agentpack_store::{Store, StoreError, StorePath, StorePathName};

use super::{current_record, unlocked_warnings};
use crate::npm::exec_spec::{ExecSpec, EXEC_SPEC_FILE};
use crate::npm::spec::{classify, Launch};
use crate::npm::tree_store::tree_root_name;

/// The spec-file paths of tree-locked servers and the store paths a generation must reference.
#[derive(Debug, Clone, Default)]
pub struct ExecSpecs {
    /// Server name -> the spec file (inside a store path).
    pub paths: BTreeMap<String, PathBuf>,
    /// The spec store paths (each references the root of its npm tree, published or not yet).
    pub references: Vec<StorePath>,
}

/// Publishes the mcp-exec spec of every current, tree-locked record among `servers` as a store
/// path (no registry contact; nothing secret is in a spec). Each spec path references its tree's
/// root by the name the lock determines ([`tree_root_name`]), whether or not a start has published
/// it yet, so the spec path (and the generation) is the same before and after the first start, and
/// GC keeps the tree from the moment `mcp-exec` publishes it.
pub fn publish_exec_specs(
    store: &Store,
    lock: &Lockfile,
    servers: &[MergedServer],
) -> Result<ExecSpecs, StoreError> {
    let planned = plan_exec_specs(store, lock, servers);
    publish_planned_exec_specs(store, &planned)?;
    Ok(planned.specs)
}

/// One mcp-exec spec store path a generation needs, planned (named, not yet written).
#[derive(Debug, Clone)]
pub struct PlannedExecSpec {
    pub server: String,
    pub name: StorePathName,
    /// The root of the npm tree it references.
    pub root: StorePath,
    pub bytes: Vec<u8>,
}

/// The exec specs of `servers`, planned without writing, and where they will be.
#[derive(Debug, Clone, Default)]
pub struct PlannedExecSpecs {
    pub planned: Vec<PlannedExecSpec>,
    /// Where each will be once published (names are input-addressed, so known now).
    pub specs: ExecSpecs,
}

/// [`publish_exec_specs`] without the publication: every spec's name and path (pure).
pub fn plan_exec_specs(
    store: &Store,
    lock: &Lockfile,
    servers: &[MergedServer],
) -> PlannedExecSpecs {
    let mut out = PlannedExecSpecs::default();
    for server in servers {
        let Some(spec) = current_record(lock, server).and_then(ExecSpec::from_record) else {
            continue;
        };
        let bytes = spec.to_bytes();
        let root = store.planned(&tree_root_name(&spec));
        let mut inputs = bytes.clone();
        inputs.extend_from_slice(b"\0references ");
        inputs.extend_from_slice(root.name().as_str().as_bytes());
        let label = format!("mcp-exec-{}", spec.package.replace('/', "-"));
        let name = StorePathName::from_inputs(&inputs, &label);
        let path = store.planned(&name);
        out.specs
            .paths
            .insert(server.name.clone(), path.path().join(EXEC_SPEC_FILE));
        if !out.specs.references.iter().any(|r| r.name() == path.name()) {
            out.specs.references.push(path);
        }
        out.planned.push(PlannedExecSpec {
            server: server.name.clone(),
            name,
            root,
            bytes,
        });
    }
    out
}

/// Publishes the planned specs (a spec already published is the same one).
pub fn publish_planned_exec_specs(
    store: &Store,
    planned: &PlannedExecSpecs,
) -> Result<(), StoreError> {
    for spec in &planned.planned {
        store.publish_built(&spec.name, std::slice::from_ref(&spec.root), |dir, _| {
            std::fs::write(dir.join(EXEC_SPEC_FILE), &spec.bytes)?;
            Ok(())
        })?;
    }
    Ok(())
}

/// What to write instead of each server's command: `agentpack mcp-exec --spec <spec> -- <args>`
/// for a tree-locked npx server whose spec is in `spec_paths`, and the runner with `pkg@<exact>`
/// for any other current pinned npm record. Servers without a current pinned record are absent
/// (they run as written).
pub fn launches_for(
    lock: &Lockfile,
    servers: &[MergedServer],
    agentpack_exe: &Path,
    spec_paths: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, McpLaunch> {
    let mut launches = BTreeMap::new();
    for server in servers {
        let Some(record) = current_record(lock, server) else {
            continue;
        };
        if record.status != McpStatus::Pinned || record.launcher != "npm" {
            continue;
        }
        let Launch::Npm(invocation) = classify(
            server.server.command.as_deref(),
            &server.server.args,
            server.server.url.as_deref(),
        ) else {
            continue;
        };
        let (Some(index), Some(package), Some(version)) = (
            invocation.spec_index,
            record.package.as_deref(),
            record.version.as_deref(),
        ) else {
            continue;
        };
        if let Some(spec) = spec_paths.get(&server.name) {
            let mut args = vec![
                "mcp-exec".to_owned(),
                "--spec".to_owned(),
                spec.display().to_string(),
                "--".to_owned(),
            ];
            args.extend(invocation.server_args.iter().cloned());
            launches.insert(
                server.name.clone(),
                McpLaunch {
                    command: agentpack_exe.display().to_string(),
                    args,
                },
            );
            continue;
        }
        let mut args = server.server.args.clone();
        args[index] = format!("{package}@{version}");
        launches.insert(
            server.name.clone(),
            McpLaunch {
                command: server.server.command.clone().unwrap_or_default(),
                args,
            },
        );
    }
    launches
}

/// Everything the generation builder needs for MCP servers.
#[derive(Debug, Clone, Default)]
pub struct PreparedLaunches {
    /// `GenerationInputs::mcp_launch`.
    pub launches: BTreeMap<String, McpLaunch>,
    /// Store paths the generation must reference (GC roots for the specs and npm trees).
    pub references: Vec<StorePath>,
    /// The warnings naming servers that run unlocked and that `lock` can change (empty when none).
    pub warnings: Vec<String>,
}

/// [`publish_exec_specs`] + [`launches_for`] + [`unlocked_warnings`].
pub fn prepare_launches(
    store: &Store,
    lock: &Lockfile,
    servers: &[MergedServer],
    agentpack_exe: &Path,
) -> Result<PreparedLaunches, StoreError> {
    let specs = publish_exec_specs(store, lock, servers)?;
    Ok(PreparedLaunches {
        launches: launches_for(lock, servers, agentpack_exe, &specs.paths),
        references: specs.references,
        warnings: unlocked_warnings(lock, servers),
    })
}
