//! Ref resolution: a branch, tag, commit or SemVer constraint of one repository -> one commit.
//!
//! The order is the ADDENDUM's: a full 40-hex commit as is; a fresh cached ref (15 min) or tag list
//! (1 h); the REST API; the git protocol (ls-refs); last, a stale cached value with a warning.
//! Warnings are returned in the result, never printed. Once REST has been unavailable (after its
//! retries) in this session, later lookups go straight to the git protocol instead of waiting again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::git_protocol::{self, RemoteRefs};
use super::metadata_cache::{ref_key, tags_key, CachedEntry, MetadataCache, REF_TTL, TAGS_TTL};
use super::rest::{RemoteTag, RestClient};
use super::{full_commit, GitHubConfig, RepoId, SourceFailure};
use agentpack_lockfile::version::{parse_tag, VersionConstraint};

/// Where a resolved commit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedFrom {
    /// The ref was already a full commit id.
    Commit,
    /// A cached value that was still fresh.
    FreshCache,
    /// The REST API.
    Rest,
    /// The git protocol (ls-refs).
    GitProtocol,
    /// A stale cached value, used because every live source failed (a warning says so).
    StaleCache,
}

/// A ref resolved to a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRef {
    /// The 40-hex commit, lowercase.
    pub commit: String,
    /// The tag chosen for a version constraint.
    pub tag: Option<String>,
    /// Where the answer came from.
    pub from: ResolvedFrom,
    /// Things the user should know (stale cache used...), for the cli to print.
    pub warnings: Vec<String>,
}

/// Every tag of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagList {
    /// The tags (order as the source gave them).
    pub tags: Vec<RemoteTag>,
    /// Where the list came from.
    pub from: ResolvedFrom,
    /// Things the user should know.
    pub warnings: Vec<String>,
}

/// What the user pinned: the lockfile crate's spec classification, reduced to what resolution needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefRequest {
    /// A full commit id.
    Commit(String),
    /// A branch, a tag, or any name GitHub resolves (also a short commit).
    Name(String),
    /// A SemVer constraint matched against the repository's tags.
    Version(String),
    /// Nothing pinned: the highest release tag, else the default branch (`HEAD`).
    Latest,
}

impl RefRequest {
    /// What a manifest pin asks for.
    pub fn from_pin(pin: &agentpack_lockfile::manifest::Pin) -> RefRequest {
        use agentpack_lockfile::manifest::Pin;
        match pin {
            Pin::Unpinned => RefRequest::Latest,
            Pin::Version(constraint) => RefRequest::Version(constraint.as_str().to_owned()),
            Pin::Branch(name) | Pin::Tag(name) | Pin::Ref(name) => RefRequest::Name(name.clone()),
            Pin::Commit(commit) => RefRequest::Commit(commit.as_str().to_owned()),
        }
    }

    /// The text shown in messages (`^1.2`, `main`, a commit, `latest`).
    pub fn describe(&self) -> &str {
        match self {
            RefRequest::Commit(text) | RefRequest::Name(text) | RefRequest::Version(text) => text,
            RefRequest::Latest => "latest",
        }
    }
}

/// Why a ref could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// No source knows the ref (or the repository).
    #[error(
        "cannot resolve {module}: github.com/{repo} has no branch, tag or commit {reference:?} (or the repository does not exist or is private)\n  tried     {tried}\n  fix       check the name and the ref; for a private repository set GITHUB_TOKEN or GH_TOKEN"
    )]
    UnknownRef {
        /// The module being resolved.
        module: String,
        /// Its repository.
        repo: RepoId,
        /// The ref asked for.
        reference: String,
        /// What each source answered.
        tried: String,
    },
    /// GitHub answered "not found" for the repository's tag list (and, for an unpinned dependency,
    /// its default branch): the repository does not exist or cannot be seen.
    #[error(
        "cannot resolve {module}: github.com/{repo} was not found when asked for {asked} (the repository does not exist or is private)\n  tried     {tried}\n  fix       check the owner and repository name; for a private repository set GITHUB_TOKEN or GH_TOKEN"
    )]
    UnknownRepository {
        /// The module being resolved.
        module: String,
        /// Its repository.
        repo: RepoId,
        /// What was asked for (`its tags`, `its tags and its default branch`).
        asked: String,
        /// What each source answered.
        tried: String,
    },
    /// No tag satisfies the constraint.
    #[error(
        "cannot resolve {module}: no tag of github.com/{repo} satisfies {constraint:?}\n  tags      {available}\n  fix       relax the constraint, or pin a branch, tag or commit"
    )]
    NoMatchingVersion {
        /// The module.
        module: String,
        /// Its repository.
        repo: RepoId,
        /// The constraint.
        constraint: String,
        /// SemVer tags that exist.
        available: String,
    },
    /// The constraint does not parse.
    #[error("invalid version constraint {constraint:?} for {module}: {reason}")]
    InvalidConstraint {
        /// The module.
        module: String,
        /// The constraint.
        constraint: String,
        /// Why.
        reason: String,
    },
    /// GitHub could not be reached and nothing usable is cached.
    #[error(
        "cannot resolve {module} ({reference}): GitHub is unreachable and nothing is cached\n  tried     {tried}\n  fix       check the network or AGENTPACK_GITHUB_API_URL / AGENTPACK_GITHUB_URL, then retry"
    )]
    Unavailable {
        /// The module.
        module: String,
        /// The ref asked for.
        reference: String,
        /// What each source answered.
        tried: String,
    },
    /// The HTTP client could not be set up.
    #[error("cannot set up the GitHub client: {0}")]
    Client(SourceFailure),
    /// An answer crossed a download limit (an endless body or tag list).
    #[error("cannot resolve {module} ({reference}): {source}")]
    Limit {
        /// The module.
        module: String,
        /// What was asked.
        reference: String,
        /// The limit crossed.
        source: crate::limits::LimitExceeded,
    },
}

/// Resolves refs against GitHub with the metadata cache; one per command.
pub struct Resolver {
    config: GitHubConfig,
    rest: RestClient,
    cache: Arc<dyn MetadataCache>,
    rest_down: AtomicBool,
    /// Skip fresh cached lookups (`lock --update`): ask GitHub, fall back to the cache only when stale.
    refresh: AtomicBool,
    ls_refs_memo: Mutex<HashMap<String, Result<RemoteRefs, SourceFailure>>>,
    clock: fn() -> SystemTime,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn describe(failures: &[(&str, SourceFailure)]) -> String {
    if failures.is_empty() {
        return "nothing".to_owned();
    }
    failures
        .iter()
        .map(|(source, failure)| format!("{source}: {failure}"))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Resolver {
    /// A resolver for `config` using `cache`.
    pub fn new(
        config: GitHubConfig,
        cache: Arc<dyn MetadataCache>,
    ) -> Result<Resolver, ResolveError> {
        let rest = RestClient::new(config.clone()).map_err(ResolveError::Client)?;
        Ok(Resolver {
            config,
            rest,
            cache,
            rest_down: AtomicBool::new(false),
            refresh: AtomicBool::new(false),
            ls_refs_memo: Mutex::new(HashMap::new()),
            clock: SystemTime::now,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GitHubConfig {
        &self.config
    }

    /// The REST client (fetching uses it for tarballs).
    pub fn rest(&self) -> &RestClient {
        &self.rest
    }

    /// With `true`, fresh cached refs and tag lists are not trusted: every lookup asks GitHub first
    /// (the cache still answers, with a warning, when GitHub cannot). Commands that move pins on
    /// purpose (`lock --update`, `update`, `sync --update-lock`) set it, so a branch moves at once.
    pub fn set_refresh(&self, refresh: bool) {
        self.refresh.store(refresh, Ordering::SeqCst);
    }

    fn trusts_fresh_cache(&self) -> bool {
        !self.refresh.load(Ordering::SeqCst)
    }

    /// Has REST been unavailable during this session?
    pub fn rest_is_down(&self) -> bool {
        self.rest_down.load(Ordering::SeqCst)
    }

    /// Records a REST failure; `Unavailable` marks REST down for the rest of the session.
    pub fn note_rest_failure(&self, failure: &SourceFailure) {
        if matches!(failure, SourceFailure::Unavailable(_)) {
            self.rest_down.store(true, Ordering::SeqCst);
        }
    }

    fn ls_refs(&self, repo: &RepoId) -> Result<RemoteRefs, SourceFailure> {
        let key = repo.key();
        if let Some(found) = self
            .ls_refs_memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return found.clone();
        }
        let answer = git_protocol::ls_refs(&self.config, repo);
        self.ls_refs_memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, answer.clone());
        answer
    }

    fn put(&self, key: &str, value: String) {
        self.cache.put(
            key,
            CachedEntry {
                value,
                fetched_at: (self.clock)(),
            },
        );
    }

    /// Resolves any request to a commit.
    pub fn resolve(
        &self,
        module: &str,
        repo: &RepoId,
        request: &RefRequest,
    ) -> Result<ResolvedRef, ResolveError> {
        match request {
            RefRequest::Commit(commit) => self.resolve_name(module, repo, commit),
            RefRequest::Name(name) => self.resolve_name(module, repo, name),
            RefRequest::Version(constraint) => self.resolve_version(module, repo, constraint),
            RefRequest::Latest => {
                let list = self.list_tags(module, repo)?;
                let names: Vec<&str> = list.tags.iter().map(|tag| tag.name.as_str()).collect();
                let any = VersionConstraint::parse("*").map_err(|error| {
                    ResolveError::InvalidConstraint {
                        module: module.to_owned(),
                        constraint: "*".to_owned(),
                        reason: error.reason,
                    }
                })?;
                if let Some(selected) = any.select(names.iter().copied()) {
                    if let Some(tag) = list.tags.iter().find(|tag| tag.name == selected.tag) {
                        return Ok(ResolvedRef {
                            commit: tag.commit.clone(),
                            tag: Some(tag.name.clone()),
                            from: list.from,
                            warnings: list.warnings,
                        });
                    }
                }
                let mut head =
                    self.resolve_name(module, repo, "HEAD")
                        .map_err(|error| match error {
                            ResolveError::UnknownRef {
                                module,
                                repo,
                                tried,
                                ..
                            } => ResolveError::UnknownRepository {
                                module,
                                repo,
                                asked: "its default branch".to_owned(),
                                tried,
                            },
                            other => other,
                        })?;
                head.warnings.splice(0..0, list.warnings);
                Ok(head)
            }
        }
    }

    /// Resolves a branch, tag or commit name to a commit.
    pub fn resolve_name(
        &self,
        module: &str,
        repo: &RepoId,
        reference: &str,
    ) -> Result<ResolvedRef, ResolveError> {
        if let Some(commit) = full_commit(reference) {
            return Ok(ResolvedRef {
                commit,
                tag: None,
                from: ResolvedFrom::Commit,
                warnings: Vec::new(),
            });
        }
        let now = (self.clock)();
        let key = ref_key(&repo.key(), reference);
        let cached = self.cache.get(&key);
        if let Some(entry) = cached
            .as_ref()
            .filter(|entry| self.trusts_fresh_cache() && entry.is_fresh(REF_TTL, now))
        {
            if let Some(commit) = full_commit(&entry.value) {
                return Ok(ResolvedRef {
                    commit,
                    tag: None,
                    from: ResolvedFrom::FreshCache,
                    warnings: Vec::new(),
                });
            }
        }
        let tags_entry = self.cache.get(&tags_key(&repo.key()));
        if let Some(entry) = tags_entry
            .as_ref()
            .filter(|entry| self.trusts_fresh_cache() && entry.is_fresh(TAGS_TTL, now))
        {
            if let Some(tag) = parse_tags(&entry.value)
                .into_iter()
                .find(|tag| tag.name == reference)
            {
                return Ok(ResolvedRef {
                    commit: tag.commit,
                    tag: Some(tag.name),
                    from: ResolvedFrom::FreshCache,
                    warnings: Vec::new(),
                });
            }
        }
        let mut failures = Vec::new();
        if !self.rest_is_down() {
            match self.rest.commit_for_ref(repo, reference) {
                Ok(commit) => {
                    self.put(&key, commit.clone());
                    return Ok(ResolvedRef {
                        commit,
                        tag: None,
                        from: ResolvedFrom::Rest,
                        warnings: Vec::new(),
                    });
                }
                Err(failure) => {
                    self.note_rest_failure(&failure);
                    failures.push(("REST", failure));
                }
            }
        }
        match self.ls_refs(repo) {
            Ok(refs) => match refs.lookup(reference) {
                Some(commit) => {
                    let commit = commit.clone();
                    self.put(&key, commit.clone());
                    return Ok(ResolvedRef {
                        commit,
                        tag: None,
                        from: ResolvedFrom::GitProtocol,
                        warnings: Vec::new(),
                    });
                }
                None => failures.push((
                    "git protocol",
                    SourceFailure::NotFound(format!(
                        "{} advertises no ref {reference}",
                        self.config.git_repo_url(repo)
                    )),
                )),
            },
            Err(failure) => failures.push(("git protocol", failure)),
        }
        let stale = cached
            .and_then(|entry| full_commit(&entry.value).map(|commit| (commit, entry.fetched_at)))
            .or_else(|| {
                let entry = tags_entry?;
                let tag = parse_tags(&entry.value)
                    .into_iter()
                    .find(|tag| tag.name == reference)?;
                Some((tag.commit, entry.fetched_at))
            });
        if let Some((commit, fetched_at)) = stale {
            let warning = format!(
                "GitHub is unreachable for {module}; using {reference} -> {commit} cached {} ago ({})",
                age(now, fetched_at),
                describe(&failures)
            );
            return Ok(ResolvedRef {
                commit,
                tag: None,
                from: ResolvedFrom::StaleCache,
                warnings: vec![warning],
            });
        }
        Err(self.failure(module, repo, reference, &failures))
    }

    fn failure(
        &self,
        module: &str,
        repo: &RepoId,
        reference: &str,
        failures: &[(&str, SourceFailure)],
    ) -> ResolveError {
        Self::failed(module, reference, failures, |tried| {
            ResolveError::UnknownRef {
                module: module.to_owned(),
                repo: repo.clone(),
                reference: reference.to_owned(),
                tried,
            }
        })
    }

    /// The failure of a tag listing: `asked` says what was asked, in words (never a ref name).
    fn tags_failure(
        module: &str,
        repo: &RepoId,
        asked: &str,
        failures: &[(&str, SourceFailure)],
    ) -> ResolveError {
        Self::failed(module, asked, failures, |tried| {
            ResolveError::UnknownRepository {
                module: module.to_owned(),
                repo: repo.clone(),
                asked: asked.to_owned(),
                tried,
            }
        })
    }

    /// `not_found` (given what was tried) when a source answered that the thing does not exist,
    /// else [`ResolveError::Unavailable`]: nothing could be asked.
    fn failed(
        module: &str,
        asked: &str,
        failures: &[(&str, SourceFailure)],
        not_found: impl FnOnce(String) -> ResolveError,
    ) -> ResolveError {
        if let Some(limit) = failures.iter().find_map(|(_, f)| match f {
            SourceFailure::Limit(limit) => Some(limit.clone()),
            _ => None,
        }) {
            return ResolveError::Limit {
                module: module.to_owned(),
                reference: asked.to_owned(),
                source: limit,
            };
        }
        let answered_not_found = failures
            .iter()
            .any(|(_, f)| matches!(f, SourceFailure::NotFound(_)));
        if answered_not_found {
            not_found(describe(failures))
        } else {
            ResolveError::Unavailable {
                module: module.to_owned(),
                reference: asked.to_owned(),
                tried: describe(failures),
            }
        }
    }

    /// The commit `reference` of `repo` resolved to when it was last looked up on this machine, at
    /// any age (no request is made). `None` when it never was.
    pub fn cached_ref(&self, repo: &RepoId, reference: &str) -> Option<String> {
        let entry = self.cache.get(&ref_key(&repo.key(), reference))?;
        full_commit(&entry.value)
    }

    /// The branches of `repo` whose head is `commit` (git protocol ls-refs, once per session).
    pub fn branches_at(&self, repo: &RepoId, commit: &str) -> Result<Vec<String>, SourceFailure> {
        let refs = self.ls_refs(repo)?;
        Ok(refs
            .branches
            .iter()
            .filter(|(_, head)| head.eq_ignore_ascii_case(commit))
            .map(|(name, _)| name.clone())
            .collect())
    }

    /// Lists every tag of `repo` (cache, REST every page, git protocol, stale cache).
    pub fn list_tags(&self, module: &str, repo: &RepoId) -> Result<TagList, ResolveError> {
        let now = (self.clock)();
        let key = tags_key(&repo.key());
        let cached = self.cache.get(&key);
        if let Some(entry) = cached
            .as_ref()
            .filter(|entry| self.trusts_fresh_cache() && entry.is_fresh(TAGS_TTL, now))
        {
            return Ok(TagList {
                tags: parse_tags(&entry.value),
                from: ResolvedFrom::FreshCache,
                warnings: Vec::new(),
            });
        }
        let mut failures = Vec::new();
        if !self.rest_is_down() {
            match self.rest.list_tags(repo) {
                Ok(tags) => {
                    self.put(&key, serde_json::to_string(&tags).unwrap_or_default());
                    return Ok(TagList {
                        tags,
                        from: ResolvedFrom::Rest,
                        warnings: Vec::new(),
                    });
                }
                Err(failure) => {
                    self.note_rest_failure(&failure);
                    failures.push(("REST", failure));
                }
            }
        }
        match self.ls_refs(repo) {
            Ok(refs) => {
                let tags: Vec<RemoteTag> = refs
                    .tags
                    .into_iter()
                    .map(|(name, commit)| RemoteTag { name, commit })
                    .collect();
                self.put(&key, serde_json::to_string(&tags).unwrap_or_default());
                return Ok(TagList {
                    tags,
                    from: ResolvedFrom::GitProtocol,
                    warnings: Vec::new(),
                });
            }
            Err(failure) => failures.push(("git protocol", failure)),
        }
        if let Some(entry) = cached {
            let warning = format!(
                "GitHub is unreachable for {module}; using the tag list of {repo} cached {} ago ({})",
                age(now, entry.fetched_at),
                describe(&failures)
            );
            return Ok(TagList {
                tags: parse_tags(&entry.value),
                from: ResolvedFrom::StaleCache,
                warnings: vec![warning],
            });
        }
        Err(Self::tags_failure(module, repo, "its tags", &failures))
    }

    /// Picks the highest SemVer tag satisfying `constraint` and returns its commit.
    pub fn resolve_version(
        &self,
        module: &str,
        repo: &RepoId,
        constraint: &str,
    ) -> Result<ResolvedRef, ResolveError> {
        let parsed = VersionConstraint::parse(constraint).map_err(|error| {
            ResolveError::InvalidConstraint {
                module: module.to_owned(),
                constraint: constraint.to_owned(),
                reason: error.reason,
            }
        })?;
        let list = self.list_tags(module, repo)?;
        let names: Vec<&str> = list.tags.iter().map(|tag| tag.name.as_str()).collect();
        match parsed
            .select(names.iter().copied())
            .map(|selected| selected.tag)
        {
            Some(chosen) => {
                let tag = list.tags.iter().find(|tag| tag.name == chosen);
                match tag {
                    Some(tag) => Ok(ResolvedRef {
                        commit: tag.commit.clone(),
                        tag: Some(tag.name.clone()),
                        from: list.from,
                        warnings: list.warnings,
                    }),
                    None => Err(ResolveError::NoMatchingVersion {
                        module: module.to_owned(),
                        repo: repo.clone(),
                        constraint: constraint.to_owned(),
                        available: crate::limits::truncate_list(
                            &names,
                            crate::limits::LISTED_IN_MESSAGES,
                        ),
                    }),
                }
            }
            None => {
                let mut semver_tags: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|name| parse_tag(name).is_some())
                    .collect();
                semver_tags.sort_unstable();
                Err(ResolveError::NoMatchingVersion {
                    module: module.to_owned(),
                    repo: repo.clone(),
                    constraint: constraint.to_owned(),
                    available: if semver_tags.is_empty() {
                        "(none)".to_owned()
                    } else {
                        crate::limits::truncate_list(
                            &semver_tags,
                            crate::limits::LISTED_IN_MESSAGES,
                        )
                    },
                })
            }
        }
    }
}

fn parse_tags(json: &str) -> Vec<RemoteTag> {
    serde_json::from_str(json).unwrap_or_default()
}

fn age(now: SystemTime, then: SystemTime) -> String {
    let seconds = now.duration_since(then).map(|d| d.as_secs()).unwrap_or(0);
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}
