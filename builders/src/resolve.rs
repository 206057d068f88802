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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use agentpack_lockfile::keys::github_cache_key;
use agentpack_lockfile::lock::{LockedPackage, Lockfile};
use agentpack_lockfile::manifest::{Dependency, Manifest, Pin};
use agentpack_lockfile::module_id::ModuleId;
use agentpack_lockfile::validate::{CacheKey, CommitSha, ContentHash};
use agentpack_lockfile::version::VersionConstraint;

use crate::github::resolver::{RefRequest, ResolveError, ResolvedFrom};
use crate::github::RepoId;
use crate::local_package::{self, LocalPackageError};
use crate::normalize::{self, NormalizeContext, NormalizeError};
use crate::package_store::{PackageStore, SlotCheck, StoreAccessError, TreeMatch};
use crate::snapshot::{FetchError, SnapshotFetcher};

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

/// Why resolution failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolutionError {
    /// A ref could not be resolved.
    #[error(transparent)]
    Ref(Box<ResolveError>),
    /// A download failed or was refused.
    #[error(transparent)]
    Fetch(Box<FetchError>),
    /// Normalization refused the package.
    #[error(transparent)]
    Normalize(Box<NormalizeError>),
    /// A local package could not be copied.
    #[error(transparent)]
    Local(#[from] LocalPackageError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreAccessError),
    /// Two requirements on one module cannot both hold.
    #[error(
        "conflicting requirements for {module}:\n{requirements}\n  no commit satisfies all of them\n  fix       {fix}"
    )]
    Conflict {
        /// The module.
        module: String,
        /// One line per requester: `  <requester> wants <pin>`.
        requirements: String,
        /// What to do: pin the module in agentpack.toml, or, when agentpack.toml already pins
        /// it, change that pin or the packages' constraints.
        fix: String,
    },
    /// A cached copy differs from the lock's content hash.
    #[error(
        "content hash mismatch: {module}\n  expected  {expected}\n  actual    {actual}\n  cache     {cache}\n  commit    {commit}\n  repair    agentpack sync --repair   (re-fetches the commit and verifies it again)"
    )]
    CacheMismatch {
        /// The module.
        module: String,
        /// The lock's hash.
        expected: String,
        /// The slot's hash.
        actual: String,
        /// The slot.
        cache: PathBuf,
        /// The commit.
        commit: String,
    },
    /// A cached copy differs from the lock's content hash and no verified source (the kept repo
    /// snapshot, a download) could restore it: offline, or no usable snapshot.
    #[error("{}", unrestored_message(.mismatch, .why))]
    Unrestored {
        /// The [`ResolutionError::CacheMismatch`].
        mismatch: Box<ResolutionError>,
        /// Why it could not be restored.
        why: String,
    },
    /// A fresh download differs from the lock's content hash.
    #[error(
        "fetched content does not match pack.lock: {module}\n  expected  {expected}\n  actual    {actual}\n  commit    {commit}\n  fix       restore pack.lock from version control (--repair cannot fix this)"
    )]
    FetchedMismatch {
        /// The module.
        module: String,
        /// The lock's hash.
        expected: String,
        /// The download's hash.
        actual: String,
        /// The commit.
        commit: String,
    },
    /// A module id or commit from GitHub is not valid for the lock.
    #[error("{0}")]
    Invalid(String),
    /// A single-segment name with no `local/` mirror.
    #[error("unknown package {module}: {dir} does not exist\n  fix       add the package under $AGENTPACK_HOME/local/, or use github.com/<owner>/<repo>[/<path>]")]
    UnknownLocal {
        /// The module.
        module: String,
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// The graph did not settle.
    #[error("dependency resolution did not settle after {0} steps (a cycle of moving pins?)")]
    NoFixpoint(usize),
    /// A scratch directory could not be made.
    #[error("cannot prepare {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A [`ResolutionError::CacheMismatch`] with a `restore` line (why no verified source restored it)
/// before its remedy.
fn unrestored_message(mismatch: &ResolutionError, why: &str) -> String {
    let text = mismatch.to_string();
    match text.split_once("\n  repair") {
        Some((head, remedy)) => format!("{head}\n  restore   {why}\n  repair{remedy}"),
        None => format!("{text}\n  restore   {why}"),
    }
}

impl From<ResolveError> for ResolutionError {
    fn from(error: ResolveError) -> Self {
        ResolutionError::Ref(Box::new(error))
    }
}

impl From<FetchError> for ResolutionError {
    fn from(error: FetchError) -> Self {
        ResolutionError::Fetch(Box::new(error))
    }
}

impl From<NormalizeError> for ResolutionError {
    fn from(error: NormalizeError) -> Self {
        ResolutionError::Normalize(Box::new(error))
    }
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
    };

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
        let node = if let Some(spec) = mirror {
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

    fn resolve_request(
        &mut self,
        module: &str,
        repo: &RepoId,
        request: &RefRequest,
    ) -> Result<(CommitSha, Option<String>), ResolutionError> {
        let resolved = self.env.fetcher.resolver().resolve(module, repo, request)?;
        self.warnings.extend(resolved.warnings);
        Ok((Self::commit(&resolved.commit, module)?, resolved.tag))
    }

    /// Tags (name -> commit) of `repo`.
    fn tags(
        &mut self,
        module: &str,
        repo: &RepoId,
    ) -> Result<Vec<(String, String)>, ResolutionError> {
        let list = self.env.fetcher.resolver().list_tags(module, repo)?;
        self.warnings.extend(list.warnings);
        Ok(list.tags.into_iter().map(|t| (t.name, t.commit)).collect())
    }

    /// Commits of the tags satisfying `constraint`, highest version first.
    fn satisfying(
        tags: &[(String, String)],
        constraint: &VersionConstraint,
    ) -> Vec<(String, String)> {
        let mut matching: Vec<(semver::Version, String, String)> = tags
            .iter()
            .filter_map(|(name, commit)| {
                let version = agentpack_lockfile::version::parse_tag(name)?;
                constraint
                    .matches(&version)
                    .then(|| (version, name.clone(), commit.clone()))
            })
            .collect();
        matching.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| b.1.starts_with('v').cmp(&a.1.starts_with('v')))
        });
        matching
            .into_iter()
            .map(|(_, name, commit)| (name, commit))
            .collect()
    }

    /// The commit a tag, branch or ref pin names when the old lock pins `old` for the module.
    ///
    /// pack.lock records the commit, not the name it was resolved from, so whether the pin is the one
    /// that produced `old` is judged from what is known about the name:
    /// - a name that is a tag follows the tag (tags do not move; an edited tag is followed);
    /// - a short commit that `old` starts with, or a name that resolved to `old` when it was last
    ///   looked up on this machine, keeps `old` without asking GitHub;
    /// - otherwise the name is resolved: an unknown name is an error; a name that resolves to `old`
    ///   keeps it; a name that resolves elsewhere while `old` is the head of another branch was
    ///   evidently locked from that other branch (the pin changed), so the new commit is taken;
    ///   if `old` is the head of no other branch the name's branch moved on, and `old` stays (a
    ///   branch moves only with an update). When GitHub cannot be asked, `old` stays.
    fn keep_or_follow(
        &mut self,
        module: &str,
        repo: &RepoId,
        pin: &Pin,
        old: &CommitSha,
    ) -> Result<CommitSha, ResolutionError> {
        let name = match pin {
            Pin::Tag(name) | Pin::Branch(name) | Pin::Ref(name) => name,
            _ => return Ok(old.clone()),
        };
        let resolver = self.env.fetcher.resolver();
        if matches!(pin, Pin::Ref(_))
            && name.len() >= 4
            && name.chars().all(|c| c.is_ascii_hexdigit())
            && old.as_str().starts_with(&name.to_ascii_lowercase())
        {
            return Ok(old.clone());
        }
        if !matches!(pin, Pin::Branch(_)) {
            let tags = self.tags(module, repo)?;
            if let Some((_, commit)) = tags.iter().find(|(tag, _)| tag == name) {
                return Self::commit(commit, module);
            }
        }
        if resolver
            .cached_ref(repo, name)
            .is_some_and(|commit| commit == old.as_str())
        {
            return Ok(old.clone());
        }
        let resolved = match resolver.resolve_name(module, repo, name) {
            Ok(resolved) => resolved,
            Err(
                error @ (ResolveError::UnknownRef { .. } | ResolveError::UnknownRepository { .. }),
            ) => return Err(error.into()),
            // GitHub cannot be asked: the pin cannot be checked, so it stays.
            Err(_) => return Ok(old.clone()),
        };
        if resolved.commit.eq_ignore_ascii_case(old.as_str())
            || resolved.from == ResolvedFrom::StaleCache
        {
            return Ok(old.clone());
        }
        let locked_from_another_branch = resolver
            .branches_at(repo, old.as_str())
            .is_ok_and(|branches| branches.iter().any(|branch| branch != name));
        if !locked_from_another_branch {
            return Ok(old.clone());
        }
        self.warnings.extend(resolved.warnings);
        Self::commit(&resolved.commit, module)
    }

    fn choose_commit(
        &mut self,
        module: &str,
        requirements: &[Requirement],
    ) -> Result<CommitSha, ResolutionError> {
        let (repo, _) = Self::repo_of(module)?;
        let updating = self.policy.updates(module);
        let old_commit = self
            .old_entry(module)
            .filter(|_| !updating)
            .map(|e| e.commit.clone());
        let conflict = |reqs: &[Requirement]| ResolutionError::Conflict {
            module: module.to_owned(),
            requirements: reqs
                .iter()
                .map(|r| format!("  {} wants {}", r.requester, describe_pin(&r.pin)))
                .collect::<Vec<_>>()
                .join("\n"),
            fix: conflict_fix(module, reqs),
        };

        // Exact requirements (commit, branch, tag, name) each name one commit.
        let mut exact: Vec<CommitSha> = Vec::new();
        let mut constraints: Vec<VersionConstraint> = Vec::new();
        for requirement in requirements {
            match &requirement.pin {
                Pin::Commit(commit) => exact.push(commit.clone()),
                Pin::Version(constraint) => constraints.push(constraint.clone()),
                Pin::Unpinned => {}
                Pin::Tag(name) | Pin::Branch(name) | Pin::Ref(name) => {
                    let commit = match &old_commit {
                        Some(old) => self.keep_or_follow(module, &repo, &requirement.pin, old)?,
                        None => {
                            self.resolve_request(module, &repo, &RefRequest::Name(name.clone()))?
                                .0
                        }
                    };
                    exact.push(commit);
                }
            }
        }
        exact.dedup();
        let distinct: BTreeSet<&CommitSha> = exact.iter().collect();
        if distinct.len() > 1 {
            return Err(conflict(requirements));
        }
        if let Some(commit) = exact.first() {
            if !constraints.is_empty() {
                let tags = self.tags(module, &repo)?;
                for constraint in &constraints {
                    let ok = Self::satisfying(&tags, constraint)
                        .iter()
                        .any(|(_, c)| c == commit.as_str());
                    if !ok {
                        return Err(conflict(requirements));
                    }
                }
            }
            return Ok(commit.clone());
        }
        if constraints.is_empty() {
            // Only unpinned requirements: keep the pin, else the highest release or HEAD.
            if let Some(old) = old_commit {
                return Ok(old);
            }
            return Ok(self.resolve_request(module, &repo, &RefRequest::Latest)?.0);
        }
        let tags = self.tags(module, &repo)?;
        let mut candidates = Self::satisfying(&tags, &constraints[0]);
        for constraint in &constraints[1..] {
            let allowed: BTreeSet<String> = Self::satisfying(&tags, constraint)
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            candidates.retain(|(name, _)| allowed.contains(name));
        }
        if let Some(old) = &old_commit {
            if candidates.iter().any(|(_, c)| c == old.as_str()) {
                return Ok(old.clone());
            }
        }
        match candidates.first() {
            Some((_, commit)) => Self::commit(commit, module),
            None if requirements.len() > 1 => Err(conflict(requirements)),
            None => {
                let text = constraints[0].as_str().to_owned();
                Ok(self
                    .resolve_request(module, &repo, &RefRequest::Version(text))?
                    .0)
            }
        }
    }

    fn github_package(
        &mut self,
        module: &str,
        commit: &CommitSha,
    ) -> Result<Node, ResolutionError> {
        let (repo, path) = Self::repo_of(module)?;
        let cache_key = github_cache_key(&repo.owner, &repo.repo, &path, commit);
        let expected = self
            .old_entry(module)
            .filter(|e| e.commit == *commit && e.cache_key == cache_key)
            .and_then(|e| e.content_hash.clone());
        let store = self.env.store;
        if let Some(unhashed) = self
            .old_entry(module)
            .filter(|e| self.env.keep_unhashed && e.content_hash.is_none())
            .filter(|e| e.commit == *commit && e.cache_key == cache_key)
        {
            if let Some(slot) = store.slot(&cache_key)? {
                tracing::debug!(
                    module,
                    "source: the cache slot (no content hash to check it against)"
                );
                return Ok(Node {
                    entry: unhashed.clone(),
                    slot,
                    nested: Vec::new(),
                });
            }
        }
        if let Some(expected) = &expected {
            match store.check_slot(&cache_key, expected)? {
                SlotCheck::Verified(slot) => {
                    tracing::debug!(module, slot = %slot.display(), "source: the verified cache slot");
                    return self.node(
                        module,
                        &repo,
                        &path,
                        commit,
                        cache_key,
                        Some(expected.clone()),
                        slot,
                    );
                }
                SlotCheck::Mismatch {
                    path: cache,
                    actual,
                } => {
                    // An edit through a staged hard link: restored from a verified source, or
                    // the command stops with the `sync --repair` remedy when none is reachable.
                    let tree = self.next_dir("github");
                    let damaged = crate::fetch::Damaged {
                        cache_key: &cache_key,
                        expected,
                        cache,
                        actual,
                    };
                    let restored = crate::fetch::restore_damaged(
                        self.env.fetcher,
                        store,
                        module,
                        &repo,
                        commit.as_str(),
                        &path,
                        damaged,
                        &tree,
                    );
                    self.warnings.extend(self.env.fetcher.take_warnings());
                    let (slot, warning) = restored?;
                    self.warnings.push(warning);
                    return self.node(
                        module,
                        &repo,
                        &path,
                        commit,
                        cache_key,
                        Some(expected.clone()),
                        slot,
                    );
                }
                SlotCheck::Missing => {}
            }
        }
        tracing::debug!(
            module,
            commit = commit.as_str(),
            "source: GitHub (no verified cache slot)"
        );
        let tree = self.next_dir("github");
        let downloaded = download_normalized(
            self.env.fetcher,
            store,
            module,
            &repo,
            commit.as_str(),
            &path,
            &tree,
        )?;
        self.warnings.extend(downloaded.warnings(module));
        // A kept repo snapshot that was changed, or a download that could not be kept.
        self.warnings.extend(self.env.fetcher.take_warnings());
        let hash = downloaded.content_hash;
        if let Some(expected) = &expected {
            if let TreeMatch::Mismatch { actual } = store.verify_tree(&tree, expected)? {
                return Err(ResolutionError::FetchedMismatch {
                    module: module.to_owned(),
                    expected: expected.to_string(),
                    actual: actual.to_string(),
                    commit: commit.to_string(),
                });
            }
        }
        let first_hash = expected.is_none();
        let content_hash = expected.unwrap_or(hash);
        let mut published = None;
        if let Some(existing) = store.slot(&cache_key)? {
            match store.verify_tree(&existing, &content_hash)? {
                TreeMatch::Matches => published = Some(existing),
                TreeMatch::Mismatch { actual } if first_hash => self.warnings.push(format!(
                    "replaced the cache entry of {module} ({}): it held {actual}, a fresh download of commit {commit} is {content_hash}",
                    existing.display()
                )),
                TreeMatch::Mismatch { .. } => {}
            }
        }
        let published = match published {
            Some(existing) => existing,
            None => store.publish(&cache_key, module, &tree, &content_hash)?,
        };
        store.record_executables(&published, &downloaded.executables)?;
        self.node(
            module,
            &repo,
            &path,
            commit,
            cache_key,
            Some(content_hash),
            published,
        )
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
        Ok(Node {
            entry,
            slot,
            nested: Vec::new(),
        })
    }

    fn local_node(
        &mut self,
        module: &str,
        url: String,
        copy: local_package::LocalCopy,
        tree: &Path,
    ) -> Result<Node, ResolutionError> {
        self.warnings.extend(copy.warnings(module));
        let normalized = normalize::normalize_package(
            tree,
            &NormalizeContext {
                module,
                ..Default::default()
            },
        )?;
        let store = self.env.store;
        let content_hash = store.hash_tree(tree)?;
        let slot = match store.check_slot(&copy.cache_key, &content_hash)? {
            SlotCheck::Verified(existing) => existing,
            SlotCheck::Missing | SlotCheck::Mismatch { .. } => {
                store.publish(&copy.cache_key, module, tree, &content_hash)?
            }
        };
        store.record_executables(
            &slot,
            &normalized.with_copied_executables(&copy.executables),
        )?;
        store.mark_rebuildable(&copy.cache_key)?;
        let entry = LockedPackage {
            module: ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?,
            direct: false,
            kind: normalize::package_kind(&slot).to_owned(),
            url,
            owner: String::new(),
            repo: String::new(),
            path: String::new(),
            commit: Self::commit(&copy.dirhash40, module)?,
            cache_key: copy.cache_key,
            content_hash: Some(content_hash),
            name: normalize::package_name(&slot),
        };
        Ok(Node {
            entry,
            slot,
            nested: Vec::new(),
        })
    }

    fn path_package(&mut self, module: &str, dir: &str) -> Result<Node, ResolutionError> {
        let source = self.env.project_root.join(dir);
        if !source.is_dir() {
            if let Some(node) = self.locked_path_slot(module, dir)? {
                return Ok(node);
            }
        }
        tracing::debug!(module, dir = %source.display(), "source: the path package's directory");
        let tree = self.next_dir("path");
        let copy = local_package::copy_path_package(module, &source, &tree)?;
        self.local_node(module, format!("path:{dir}"), copy, &tree)
    }

    /// A path package whose directory is missing on this machine: the locked entry, when its slot
    /// is filled (and verifies against the lock's hash, when the lock has one). The docs: sync
    /// fails only when the directory is missing and the slot is empty too.
    fn locked_path_slot(
        &mut self,
        module: &str,
        dir: &str,
    ) -> Result<Option<Node>, ResolutionError> {
        let Some(old) = self
            .old_entry(module)
            .filter(|e| e.url == format!("path:{dir}"))
            .cloned()
        else {
            return Ok(None);
        };
        let store = self.env.store;
        let slot = match &old.content_hash {
            Some(expected) => match store.check_slot(&old.cache_key, expected)? {
                SlotCheck::Verified(slot) => slot,
                SlotCheck::Missing => return Ok(None),
                SlotCheck::Mismatch {
                    path: cache,
                    actual,
                } => {
                    return Err(ResolutionError::CacheMismatch {
                        module: module.to_owned(),
                        expected: expected.to_string(),
                        actual: actual.to_string(),
                        cache,
                        commit: old.commit.to_string(),
                    })
                }
            },
            None => match store.slot(&old.cache_key)? {
                Some(slot) => slot,
                None => return Ok(None),
            },
        };
        self.warnings.push(format!(
            "{module}: the directory {} does not exist; staging the copy locked in pack.lock ({})",
            self.env.project_root.join(dir).display(),
            slot.display()
        ));
        Ok(Some(Node {
            entry: old,
            slot,
            nested: Vec::new(),
        }))
    }

    fn local_mirror_package(&mut self, module: &str, spec: &str) -> Result<Node, ResolutionError> {
        let dir = local_package::local_mirror_dir(self.env.agentpack_home, spec);
        if !dir.is_dir() {
            return Err(ResolutionError::UnknownLocal {
                module: module.to_owned(),
                dir,
            });
        }
        tracing::debug!(module, dir = %dir.display(), "source: the local/ mirror");
        let tree = self.next_dir("local");
        let copy =
            local_package::copy_local_mirror_package(module, self.env.agentpack_home, spec, &tree)?;
        self.local_node(module, format!("local:{spec}"), copy, &tree)
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

/// A GitHub package as downloaded: its content hash, and the links that could not be kept.
pub struct Downloaded {
    pub content_hash: ContentHash,
    /// Package-relative paths of symbolic links written as empty files (absolute, or leaving the
    /// package), as the extraction rule says.
    pub links_emptied: Vec<String>,
    /// Package-relative paths of regular files that were executable upstream (recorded in the
    /// store with [`PackageStore::record_executables`]; the tree keeps them 0644).
    pub executables: std::collections::BTreeSet<String>,
}

impl Downloaded {
    /// One warning per emptied link, naming the package and the link.
    pub fn warnings(&self, module: &str) -> Vec<String> {
        self.links_emptied
            .iter()
            .map(|link| {
                format!(
                    "{module}: symbolic link {link} is absolute or leaves the package; not followed: the copy holds an empty file in its place\n  fix  ask the package's author to link inside the package with a relative path"
                )
            })
            .collect()
    }
}

/// Downloads (once per repo and commit), copies, normalizes and hashes one GitHub package into `tree`.
pub fn download_normalized(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    module: &str,
    repo: &RepoId,
    commit: &str,
    path: &str,
    tree: &Path,
) -> Result<Downloaded, ResolutionError> {
    let copied = fetcher.fetch_package(repo, commit, path, tree)?;
    let snapshot = fetcher.snapshot(repo, commit)?;
    // Links emptied when the archive was extracted (repository-relative), and when the package was
    // copied out of it (package-relative: they left the package).
    let prefix = if path.is_empty() {
        String::new()
    } else {
        format!("{}/", path.trim_end_matches('/'))
    };
    let mut links_emptied: Vec<String> = snapshot
        .report
        .links_emptied
        .iter()
        .filter_map(|link| link.strip_prefix(&prefix).map(str::to_owned))
        .chain(copied.links_emptied)
        .collect();
    links_emptied.sort();
    links_emptied.dedup();
    let normalized = normalize::normalize_package(
        tree,
        &NormalizeContext {
            module,
            repo_root: Some(&snapshot.root),
            package_path: path,
            inline_manifest: None,
        },
    )?;
    Ok(Downloaded {
        content_hash: store.hash_tree(tree)?,
        links_emptied,
        executables: normalized.with_copied_executables(&copied.executables),
    })
}
