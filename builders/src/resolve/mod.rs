//! Dependency resolution: (manifest, old lock, update policy) -> a new lock.
//!
//! Every package, direct and transitive, is pinned to one commit. Pins already in the old lock are kept
//! unless the policy updates them or the manifest asks for something they no longer satisfy (another
//! commit, a tag that points elsewhere, a constraint the locked tag does not meet). Each resolved package
//! is materialized once (a verified store slot, else a fresh download), normalized and hashed; a
//! package's own `agentpack.toml` adds its `[dependencies]` to the graph. Two requirements on one module
//! resolve to a commit satisfying both, else the error names both requesters.
//!
//! Freshly downloaded, verified trees are published to the store here (lock "fetches every package it
//! has no content hash for"). A hash already in the lock is never recomputed for the same commit: the
//! download is checked against it. Nothing is printed: changes and warnings are returned.
//!
//! Layout: `github`, `oci` and `local` pin and materialize each kind of package, `error` holds
//! [`ResolutionError`], `download` holds [`download_normalized`]; this module holds the policy, the
//! graph walk and the pin changes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use agentpack_lockfile::manifest::{Dependency, Manifest, Pin};
use agentpack_lockfile::module_id::ModuleId;
use agentpack_lockfile::validate::{CacheKey, CommitSha, ContentHash};

use crate::github::RepoId;
use crate::local_package;
use crate::normalize;
use crate::package_store::PackageStore;
use crate::snapshot::SnapshotFetcher;

mod download;
mod error;
mod github;
mod local;
mod oci;

pub use download::{download_normalized, fetch_normalized, Downloaded, Fetched, GithubPackage};
pub use error::ResolutionError;

/// Which pins may move.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UpdatePolicy {
    /// Keep every pin the manifest still accepts (`lock`, `add`, `remove`, `sync`).
    #[default]
    KeepPins,
    /// Re-resolve every floating pin (`lock --update`, `update`, `sync --update-lock`).
    UpdateAll,
    /// Re-resolve these modules only (`update <module>...`).
    UpdateModules(BTreeSet<String>),
}

impl UpdatePolicy {
    fn updates(&self, module: &str) -> bool {
        match self {
            UpdatePolicy::KeepPins => false,
            UpdatePolicy::UpdateAll => true,
            UpdatePolicy::UpdateModules(modules) => modules.contains(module),
        }
    }
}

/// One pin that changed between the old and the new lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinChange {
    /// A package entered the lock.
    Added {
        /// The module.
        module: String,
        /// Its commit (a `dirhash40` for local packages).
        commit: String,
    },
    /// A package left the lock.
    Removed {
        /// The module.
        module: String,
        /// Its old commit.
        commit: String,
    },
    /// A package moved to another commit.
    Moved {
        /// The module.
        module: String,
        /// The old commit.
        from: String,
        /// The new commit.
        to: String,
    },
}

impl fmt::Display for PinChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinChange::Added { module, commit } => write!(f, "{module}: added at commit {commit}"),
            PinChange::Removed { module, commit } => {
                write!(f, "{module}: removed (was commit {commit})")
            }
            PinChange::Moved { module, from, to } => {
                write!(f, "{module}: moved from commit {from} to {to}")
            }
        }
    }
}

/// The result of a resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveOutcome {
    /// The new lock (meta from the manifest; config and MCP records carried over from the old lock).
    pub lock: Lockfile,
    /// Every pin that changed, sorted by module.
    pub changes: Vec<PinChange>,
    /// Warnings for the cli to print (stale metadata, replaced cache entries, skipped nested paths).
    pub warnings: Vec<String>,
    /// The verified store slot of every package, by module.
    pub slots: BTreeMap<String, PathBuf>,
}

/// What resolution needs besides the manifest and the old lock.
#[derive(Clone, Copy)]
pub struct ResolveEnv<'a> {
    /// The project root (path dependencies are relative to it).
    pub project_root: &'a Path,
    /// `$AGENTPACK_HOME` (for the `local/` mirror).
    pub agentpack_home: &'a Path,
    /// Downloads (and the resolver inside it).
    pub fetcher: &'a SnapshotFetcher,
    /// The store.
    pub store: &'a dyn PackageStore,
    /// Called with each module as resolution starts on it (the cli names it on stderr).
    pub progress: Option<&'a (dyn Fn(&str) + Sync)>,
    /// `sync` and the launchers: a locked GitHub package without a content hash (a version 2
    /// lock) is served from its filled slot unverified and stays without one, so the lock is not
    /// rewritten unless a package has to be downloaded. `lock`, `add`, `remove` and `update`
    /// leave it false: they fetch and record the hash.
    pub keep_unhashed: bool,
}

/// Who asked for a module, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    requester: String,
    pin: Pin,
}

/// A resolved node of the graph.
#[derive(Debug, Clone)]
struct Node {
    entry: LockedPackage,
    slot: PathBuf,
    nested: Vec<String>,
}

impl Node {
    /// A package just resolved into `slot`; the walk reads its nested requirements next.
    fn new(entry: LockedPackage, slot: PathBuf) -> Node {
        Node {
            entry,
            slot,
            nested: Vec::new(),
        }
    }
}

const PROJECT: &str = "agentpack.toml";
const MAX_STEPS: usize = 10_000;

/// The `fix` line of a conflict: pinning the module in agentpack.toml is offered only when the
/// manifest does not already pin it (then its pin is one of the requirements that disagree).
fn conflict_fix(module: &str, requirements: &[Requirement]) -> String {
    let pinned = requirements
        .iter()
        .find(|r| r.requester == PROJECT && r.pin != Pin::Unpinned);
    match pinned {
        Some(requirement) => format!(
            "agentpack.toml already pins {module} ({}): change that pin to one the packages named above accept, or align their constraints",
            describe_pin(&requirement.pin)
        ),
        None => format!(
            "align the constraints in the packages named above, or pin {module} in agentpack.toml"
        ),
    }
}

fn describe_pin(pin: &Pin) -> String {
    match pin {
        Pin::Unpinned => "any version".to_owned(),
        Pin::Version(constraint) => format!("version {constraint}"),
        Pin::Branch(name) => format!("branch {name}"),
        Pin::Tag(name) => format!("tag {name}"),
        Pin::Commit(commit) => format!("commit {commit}"),
        Pin::Ref(name) => format!("ref {name}"),
        Pin::Digest(digest) => format!("digest {digest}"),
    }
}

/// Resolves `manifest` against `old` (see the module docs).
pub fn resolve(
    manifest: &Manifest,
    old: Option<&Lockfile>,
    policy: &UpdatePolicy,
    env: &ResolveEnv<'_>,
) -> Result<ResolveOutcome, ResolutionError> {
    if let Some(old) = old {
        // An invalid or inconsistent lock is never replaced by any command.
        old.check_integrity()
            .map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    }
    let scratch = env.store.scratch()?;
    let mut run = Run {
        env,
        old,
        policy,
        scratch: scratch.path(),
        warnings: Vec::new(),
        counter: 0,
        filled: crate::fetch::Filled::default(),
    };
    // Pins kept: the old lock's packages with empty slots are asked of the substituters all at
    // once, instead of one by one as the graph is walked (each verified against its hash).
    if let (Some(old), UpdatePolicy::KeepPins) = (old, policy) {
        let substitutes = scratch.path().join("substitutes");
        fs_err::create_dir_all(&substitutes).map_err(|source| ResolutionError::Io {
            path: substitutes.clone(),
            cause: source,
        })?;
        crate::substitute::fill_from_substituters(old, env.fetcher, env.store, &substitutes)?;
        // Then the rest from GitHub: repositories fetched concurrently, one store batch per
        // repository snapshot. Best effort: a package the walk still needs and that could not be
        // filled here is downloaded (and its failure reported) by the walk, as before; the
        // failure is a warning all the same (the walk may not need that package any more).
        match crate::fetch::fill_from_github(old, env.fetcher, env.store, &substitutes) {
            Ok(filled) => {
                run.warnings.extend(filled.warnings.iter().cloned());
                run.filled = filled;
            }
            Err(error) => run.warnings.push(crate::fetch::fill_failed_warning(&error)),
        }
        run.warnings.extend(env.fetcher.take_warnings());
    }

    let mut requirements: BTreeMap<String, Vec<Requirement>> = BTreeMap::new();
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut direct = BTreeSet::new();
    let mut queue = VecDeque::new();
    for (module, dependency) in &manifest.dependencies {
        let module = module.as_str().to_owned();
        direct.insert(module.clone());
        match dependency {
            Dependency::Path(dir) => {
                if let Some(progress) = env.progress {
                    progress(&module);
                }
                let node = run.path_package(&module, dir)?;
                nodes.insert(module, node);
            }
            Dependency::Remote(pin) => {
                requirements
                    .entry(module.clone())
                    .or_default()
                    .push(Requirement {
                        requester: PROJECT.to_owned(),
                        pin: pin.clone(),
                    });
                queue.push_back(module);
            }
        }
    }
    // Nested requirements of path packages.
    let path_modules: Vec<String> = nodes.keys().cloned().collect();
    for module in path_modules {
        let nested = run.nested_requirements(&module, &nodes[&module].slot)?;
        let names = add_nested(&module, nested, &mut requirements, &mut queue);
        if let Some(node) = nodes.get_mut(&module) {
            node.nested = names;
        }
    }

    let mut steps = 0;
    while let Some(module) = queue.pop_front() {
        steps += 1;
        if steps > MAX_STEPS {
            return Err(ResolutionError::NoFixpoint(MAX_STEPS));
        }
        let Some(reqs) = requirements.get(&module).filter(|r| !r.is_empty()).cloned() else {
            continue;
        };
        if let Some(progress) = env.progress {
            progress(&module);
        }
        let mirror = local_mirror_spec(&module, env.agentpack_home);
        let node = if module.starts_with(agentpack_lockfile::module_id::OCI_SCHEME) {
            let chosen = run.oci_digest(&module, &reqs)?;
            let commit = LockedPackage::oci_commit(&chosen.digest);
            if nodes
                .get(&module)
                .is_some_and(|n| Some(&n.entry.commit) == commit.as_ref())
            {
                continue;
            }
            run.oci_node(&module, &chosen)?
        } else if let Some(spec) = mirror {
            if nodes.contains_key(&module) {
                continue;
            }
            run.local_mirror_package(&module, &spec)?
        } else {
            let commit = run.choose_commit(&module, &reqs)?;
            if nodes.get(&module).is_some_and(|n| n.entry.commit == commit) {
                continue;
            }
            run.github_package(&module, &commit)?
        };
        // Replace what this module asked for before.
        for list in requirements.values_mut() {
            list.retain(|r| r.requester != module);
        }
        if let Some(previous) = nodes.get(&module) {
            queue.extend(previous.nested.iter().cloned());
        }
        let nested = run.nested_requirements(&module, &node.slot)?;
        let names = add_nested(&module, nested, &mut requirements, &mut queue);
        nodes.insert(
            module.clone(),
            Node {
                nested: names,
                ..node
            },
        );
    }

    // Keep what is reachable from the manifest.
    let mut reachable = BTreeSet::new();
    let mut walk: Vec<String> = direct.iter().cloned().collect();
    while let Some(module) = walk.pop() {
        if !reachable.insert(module.clone()) {
            continue;
        }
        if let Some(node) = nodes.get(&module) {
            walk.extend(node.nested.iter().cloned());
        }
    }
    let mut lock = Lockfile::new(manifest.name.clone(), manifest.version.clone());
    if let Some(old) = old {
        lock.config = old.config.clone();
        lock.mcp_servers = old.mcp_servers.clone();
    }
    let mut slots = BTreeMap::new();
    for module in &reachable {
        let Some(node) = nodes.get(module) else {
            continue;
        };
        let mut entry = node.entry.clone();
        entry.direct = direct.contains(module);
        slots.insert(module.clone(), node.slot.clone());
        lock.packages.push(entry);
    }
    lock.sort();
    let changes = pin_changes(old, &lock);
    Ok(ResolveOutcome {
        lock,
        changes,
        warnings: run.warnings,
        slots,
    })
}

/// The `$AGENTPACK_HOME/local/` spec a module resolves from, if any: a single-segment name always
/// does (`local/<name>`); a GitHub module does when the offline mirror `local/<owner>/<repo>[/<path>]`
/// exists, which then wins over the network (it is a copy, re-hashed on every lock and sync).
fn local_mirror_spec(module: &str, agentpack_home: &Path) -> Option<String> {
    let id = ModuleId::parse(module).ok()?;
    if id.is_local_name() {
        return Some(module.to_owned());
    }
    let spec = module.strip_prefix("github.com/")?;
    local_package::has_local_mirror(agentpack_home, spec).then(|| spec.to_owned())
}

fn add_nested(
    requester: &str,
    nested: Vec<(String, Pin)>,
    requirements: &mut BTreeMap<String, Vec<Requirement>>,
    queue: &mut VecDeque<String>,
) -> Vec<String> {
    let mut names = Vec::new();
    for (module, pin) in nested {
        requirements
            .entry(module.clone())
            .or_default()
            .push(Requirement {
                requester: requester.to_owned(),
                pin,
            });
        queue.push_back(module.clone());
        names.push(module);
    }
    names
}

/// The pin changes between two locks, sorted by module.
pub fn pin_changes(old: Option<&Lockfile>, new: &Lockfile) -> Vec<PinChange> {
    let before: BTreeMap<&str, &str> = old
        .map(|lock| {
            lock.packages
                .iter()
                .map(|p| (p.module.as_str(), p.commit.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let after: BTreeMap<&str, &str> = new
        .packages
        .iter()
        .map(|p| (p.module.as_str(), p.commit.as_str()))
        .collect();
    let mut changes = Vec::new();
    for (module, commit) in &after {
        match before.get(module) {
            None => changes.push(PinChange::Added {
                module: (*module).to_owned(),
                commit: (*commit).to_owned(),
            }),
            Some(old) if old != commit => changes.push(PinChange::Moved {
                module: (*module).to_owned(),
                from: (*old).to_owned(),
                to: (*commit).to_owned(),
            }),
            Some(_) => {}
        }
    }
    for (module, commit) in &before {
        if !after.contains_key(module) {
            changes.push(PinChange::Removed {
                module: (*module).to_owned(),
                commit: (*commit).to_owned(),
            });
        }
    }
    changes.sort_by(|a, b| change_module(a).cmp(change_module(b)));
    changes
}

fn change_module(change: &PinChange) -> &str {
    match change {
        PinChange::Added { module, .. }
        | PinChange::Removed { module, .. }
        | PinChange::Moved { module, .. } => module,
    }
}

struct Run<'a, 'e> {
    env: &'a ResolveEnv<'e>,
    old: Option<&'a Lockfile>,
    policy: &'a UpdatePolicy,
    scratch: &'a Path,
    warnings: Vec<String>,
    counter: usize,
    /// What the fill of the old lock's empty slots published (pins kept): not hashed again.
    filled: crate::fetch::Filled,
}

impl Run<'_, '_> {
    fn next_dir(&mut self, label: &str) -> PathBuf {
        self.counter += 1;
        self.scratch.join(format!("{}-{label}", self.counter))
    }

    fn old_entry(&self, module: &str) -> Option<&LockedPackage> {
        self.old.and_then(|lock| lock.package(module))
    }

    fn repo_of(module: &str) -> Result<(RepoId, String), ResolutionError> {
        let id = ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?;
        let github = id.as_github().ok_or_else(|| {
            ResolutionError::Invalid(format!("{module} is not a github.com module"))
        })?;
        Ok((
            RepoId::new(github.owner, github.repo),
            github.path.to_owned(),
        ))
    }

    fn commit(text: &str, module: &str) -> Result<CommitSha, ResolutionError> {
        CommitSha::parse(text).map_err(|e| ResolutionError::Invalid(format!("{module}: {e}")))
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &self,
        module: &str,
        repo: &RepoId,
        path: &str,
        commit: &CommitSha,
        cache_key: CacheKey,
        content_hash: Option<ContentHash>,
        slot: PathBuf,
    ) -> Result<Node, ResolutionError> {
        let entry = LockedPackage {
            module: ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?,
            direct: false,
            kind: normalize::package_kind(&slot).to_owned(),
            url: LockedPackage::github_url(&repo.owner, &repo.repo, commit, path),
            owner: repo.owner.clone(),
            repo: repo.repo.clone(),
            path: path.to_owned(),
            commit: commit.clone(),
            cache_key,
            content_hash,
            name: normalize::package_name(&slot),
        };
        Ok(Node::new(entry, slot))
    }

    /// The remote `[dependencies]` of a package's own `agentpack.toml`.
    fn nested_requirements(
        &mut self,
        module: &str,
        slot: &Path,
    ) -> Result<Vec<(String, Pin)>, ResolutionError> {
        let path = slot.join("agentpack.toml");
        let Ok(text) = fs_err::read_to_string(&path) else {
            return Ok(Vec::new());
        };
        let manifest = match parse_dependencies_only(&text, &path) {
            Ok(manifest) => manifest,
            Err(error) => {
                self.warnings
                    .push(format!("ignoring the dependencies of {module}: {error}"));
                return Ok(Vec::new());
            }
        };
        let mut nested = Vec::new();
        for (dependency, value) in manifest.dependencies {
            match value {
                Dependency::Remote(pin) => nested.push((dependency.as_str().to_owned(), pin)),
                Dependency::Path(dir) => self.warnings.push(format!(
                    "{module} declares the path dependency {dependency} = {{ path = {dir:?} }}; path dependencies of packages are not followed"
                )),
            }
        }
        Ok(nested)
    }
}

/// Parses only the `[dependencies]` table of a package's `agentpack.toml` (the only part consulted).
fn parse_dependencies_only(text: &str, path: &Path) -> Result<Manifest, String> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| format!("{} is not valid TOML: {e}", path.display()))?;
    let mut minimal = toml::Table::new();
    minimal.insert("name".into(), toml::Value::String("package".into()));
    minimal.insert("version".into(), toml::Value::String("0.0.0".into()));
    if let Some(dependencies) = table.get("dependencies") {
        minimal.insert("dependencies".into(), dependencies.clone());
    }
    let rendered = toml::to_string(&minimal).map_err(|e| e.to_string())?;
    Manifest::parse(&rendered, path).map_err(|e| e.to_string())
}
