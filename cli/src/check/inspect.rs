//! The built-in checks of a locked environment, each producing findings of its own code: lock vs
//! manifest drift, unverified packages, cache entries, the staged tree, MCP pins and inline
//! secrets. Reads only; a check that cannot read something says so as a finding.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::UNIX_EPOCH;

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_harness::MergedServer;
use agentpack_lockfile::manifest::Dependency;
use agentpack_lockfile::{Lockfile, Manifest, McpStatus};
use agentpack_store::StorePathMeta;

use super::finding::{code, Finding, Severity};
use super::plan::SlotCheck;
use crate::evidence::policy::Policy;

const LOCK_REMEDY: &str =
    "run `agentpack lock` (or `agentpack sync`), review `git diff pack.lock`, and commit it";

/// Direct dependencies the lock does not record, locked direct packages the manifest no longer
/// names, and path dependencies whose directory changed since they were locked.
pub fn lock_drift(manifest: &Manifest, lock: &Lockfile, definition_root: &Path) -> Vec<Finding> {
    let mut found = Vec::new();
    let locked: BTreeSet<&str> = lock
        .packages
        .iter()
        .filter(|p| p.direct)
        .map(|p| p.module.as_str())
        .collect();
    for (module, dependency) in &manifest.dependencies {
        if !locked.contains(module.as_str()) {
            found.push(Finding::new(
                code::LOCK_DRIFT,
                Severity::Violation,
                "agentpack.toml",
                module.as_str(),
                format!(
                    "{module} is a dependency in agentpack.toml but pack.lock does not record it"
                ),
                LOCK_REMEDY,
            ));
            continue;
        }
        if let Dependency::Path(dir) = dependency {
            let Some(package) = lock.package(module.as_str()) else {
                continue;
            };
            // A path package's `dirhash40` of its directory stands in for its commit.
            let source = definition_root.join(dir);
            match agentpack_builders::local_package::dirhash40(module.as_str(), &source) {
                Ok(actual) if actual == package.commit.as_str() => {}
                Ok(actual) => found.push(Finding::new(
                    code::LOCK_DRIFT,
                    Severity::Violation,
                    source.display().to_string(),
                    module.as_str(),
                    format!(
                        "the path dependency {module} changed since it was locked: its directory hashes to {actual}, pack.lock records {}",
                        package.commit
                    ),
                    LOCK_REMEDY,
                )),
                Err(err) => found.push(Finding::new(
                    code::LOCK_DRIFT,
                    Severity::Violation,
                    source.display().to_string(),
                    module.as_str(),
                    format!("the path dependency {module} cannot be read: {err}"),
                    "restore the directory, or change the dependency in agentpack.toml and run `agentpack lock`",
                )),
            }
        }
    }
    if !manifest.dependencies.is_empty() {
        for module in &locked {
            if !manifest.dependencies.keys().any(|m| m.as_str() == *module) {
                found.push(Finding::new(
                    code::LOCK_DRIFT,
                    Severity::Violation,
                    "pack.lock",
                    *module,
                    format!("pack.lock records {module} as a direct dependency, and agentpack.toml no longer names it"),
                    LOCK_REMEDY,
                ));
            }
        }
    }
    found
}

/// Packages the lock records without a `content_hash`.
pub fn unverified(lock: &Lockfile, policy: Policy, require_verified: bool) -> Vec<Finding> {
    let severity = if policy == Policy::Ci || require_verified {
        Severity::Violation
    } else {
        Severity::Warning
    };
    lock.unverified_packages()
        .map(|package| {
            Finding::new(
                code::LOCK_UNVERIFIED,
                severity,
                "pack.lock",
                package.module.as_str(),
                format!(
                    "{} has no content_hash: its cache entry cannot be verified",
                    package.module
                ),
                "run `agentpack lock` to record content hashes, then commit pack.lock",
            )
        })
        .collect()
}

/// The findings of each package's slot check.
pub fn cache(slots: &BTreeMap<String, SlotCheck>, cache_dir: &Path) -> Vec<Finding> {
    let mut found = Vec::new();
    for (module, check) in slots {
        let (code, severity, message, remedy) = match check {
            SlotCheck::Usable { .. } => continue,
            SlotCheck::Missing(why) => (
                code::CACHE_MISSING,
                Severity::Warning,
                format!("{module}: {why}; what it stages is not in the plan"),
                "run `agentpack env restore` (or `agentpack sync`) to fetch the locked inputs; preflight never fetches",
            ),
            SlotCheck::Mismatch(why) => (
                code::CACHE_MISMATCH,
                Severity::Violation,
                format!("{module}: {why}"),
                "run `agentpack sync --repair` to fetch the pinned content again and replace the entry",
            ),
        };
        let shown = cache_dir.display().to_string();
        found.push(Finding::new(
            code,
            severity,
            shown,
            module.as_str(),
            message,
            remedy,
        ));
    }
    found
}

/// The staged tree of the mode (`target`: the generation checked, which `pointer` selects or a
/// launch holds its lease on): selected at all, and built from the cache entries the lock names
/// now and from the current `.agents/` overlay.
pub fn staging(
    pointer: &ModePointer,
    target: Option<&Path>,
    mode_name: &str,
    slots: &BTreeMap<String, SlotCheck>,
    workspace: &Path,
    cache_dir: &Path,
) -> Vec<Finding> {
    let missing = |why: String| {
        vec![Finding::new(
            code::STAGING_MISSING,
            Severity::Warning,
            pointer.path().display().to_string(),
            format!("mode {mode_name}"),
            why,
            "run `agentpack sync` (or `agentpack env restore`) to build the staged tree",
        )]
    };
    let Some(target) = target else {
        return missing(format!("mode `{mode_name}` has never been staged here"));
    };
    if !target.is_dir() {
        return missing(format!(
            "the staged generation {} is gone",
            target.display()
        ));
    }
    let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return missing("the staging pointer names no generation".to_owned());
    };
    let stale = |why: String| {
        Finding::new(
            code::STAGING_STALE,
            Severity::Warning,
            pointer.path().display().to_string(),
            format!("mode {mode_name}"),
            why,
            "run `agentpack sync` to rebuild the staged tree from the current inputs",
        )
    };
    let meta_path = cache_dir.join("store/v1/meta").join(format!("{name}.json"));
    let meta = match StorePathMeta::read(&meta_path) {
        Ok(meta) => meta,
        Err(err) => {
            return vec![stale(format!(
                "the staged generation's record cannot be read: {err}"
            ))];
        }
    };
    let mut found = Vec::new();
    let references: BTreeSet<&str> = meta.references.iter().map(String::as_str).collect();
    for (module, check) in slots {
        if let SlotCheck::Usable {
            store_name: Some(store_name),
            ..
        } = check
        {
            if !references.contains(store_name.as_str()) {
                found.push(stale(format!(
                    "the staged tree was not built from the locked content of {module} ({store_name})"
                )));
            }
        }
    }
    let overlay = workspace.join(".agents");
    if let Some(newest) = newest_mtime(&overlay) {
        if newest > meta.created {
            found.push(stale(format!(
                "{} changed after the staged tree was built",
                overlay.display()
            )));
        }
    }
    found
}

/// The newest modification time (Unix seconds) under `dir`, links not followed.
fn newest_mtime(dir: &Path) -> Option<u64> {
    let mut newest = None;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if let Ok(modified) = meta.modified() {
            let seconds = modified
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            newest = Some(newest.map_or(seconds, |n: u64| n.max(seconds)));
        }
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    newest
}

/// MCP servers of the plan without a lock record, with a changed definition, or unpinned.
pub fn mcp(servers: &[MergedServer], lock: &Lockfile, policy: Policy) -> Vec<Finding> {
    let gap = if policy == Policy::Ci {
        Severity::Violation
    } else {
        Severity::Warning
    };
    let mut found = Vec::new();
    for server in servers {
        let name = &server.name;
        let Some(record) = lock.mcp_server(name) else {
            found.push(Finding::new(
                code::MCP_UNLOCKED,
                gap,
                "pack.lock",
                format!("mcp:{name}"),
                format!(
                    "MCP server `{name}` has no record in pack.lock: what it runs is not pinned"
                ),
                "run `agentpack lock` to record it, then commit pack.lock",
            ));
            continue;
        };
        if !agentpack_builders::mcp_lock::definition_matches(&record.definition, &server.server) {
            found.push(Finding::new(
                code::MCP_UNLOCKED,
                gap,
                "pack.lock",
                format!("mcp:{name}"),
                format!("MCP server `{name}` changed since pack.lock recorded it"),
                "run `agentpack lock` to record the new definition, then commit pack.lock",
            ));
            continue;
        }
        let (severity, why) = match record.status {
            McpStatus::Pinned => continue,
            McpStatus::Unpinned if record.allow_unpinned => (
                Severity::Info,
                "is recorded unpinned on purpose (--allow-unpinned)",
            ),
            McpStatus::Unpinned => (gap, "is not pinned: it runs whatever its registry serves"),
            McpStatus::Unpinnable => (
                Severity::Info,
                "cannot be pinned by agentpack (a remote server or a local command)",
            ),
        };
        let reason = record
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        found.push(Finding::new(
            code::MCP_UNPINNED,
            severity,
            "pack.lock",
            format!("mcp:{name}"),
            format!("MCP server `{name}` {why}{reason}"),
            "pin an exact version in its definition (`pkg@1.2.3`), then run `agentpack lock`",
        ));
    }
    found
}

/// Secret-bearing values written inline in the manifest's MCP servers.
pub fn secrets(manifest: &Manifest, lock: &Lockfile) -> Vec<Finding> {
    agentpack_builders::sharing::findings(manifest, lock, &[])
        .into_iter()
        .filter(|f| f.item.starts_with("[mcp.servers.") && !f.problem.starts_with("a host-private"))
        .map(|f| {
            Finding::new(
                code::SECRET_INLINE,
                Severity::Warning,
                "agentpack.toml",
                f.item.clone(),
                format!("{}: {}", f.item, f.problem),
                f.fix,
            )
        })
        .collect()
}
