//! Ref resolution: a branch, tag, commit or SemVer constraint of one repository -> one commit.
//!
//! The order is the ADDENDUM's: a full 40-hex commit as is; a fresh cached ref (15 min) or tag list
//! (1 h); the REST API; the git protocol (ls-refs); last, a stale cached value with a warning.
//! Warnings are returned in the result, never printed. Once REST has been unavailable (after its
//! retries) in this session, later lookups go straight to the git protocol instead of waiting again.
//!
//! Layout: `request` (requests and answers), `error` ([`ResolveError`]), `tags` (tag lists and
//! constraints); this module holds the [`Resolver`] and ref resolution.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::git_protocol::{self, RemoteRefs};
use super::metadata_cache::{ref_key, tags_key, CachedEntry, MetadataCache, REF_TTL, TAGS_TTL};
use super::rest::RestClient;
use super::{full_commit, GitHubConfig, RepoId, SourceFailure};
use agentpack_lockfile::version::VersionConstraint;

mod error;
mod request;
mod tags;

pub use error::ResolveError;
pub use request::{RefRequest, ResolvedFrom, ResolvedRef, TagList};
use tags::parse_tags;

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

    /// Asks REST with `call` unless REST is down this session; a failure is noted and pushed on
    /// `failures` (`None` then, to try the next source).
    fn try_rest<T>(
        &self,
        call: impl FnOnce(&RestClient) -> Result<T, SourceFailure>,
        failures: &mut Vec<(&'static str, SourceFailure)>,
    ) -> Option<T> {
        if self.rest_is_down() {
            return None;
        }
        match call(&self.rest) {
            Ok(answer) => Some(answer),
            Err(failure) => {
                self.note_rest_failure(&failure);
                failures.push(("REST", failure));
                None
            }
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
            return Ok(ResolvedRef::found(commit, ResolvedFrom::Commit));
        }
        let now = (self.clock)();
        let key = ref_key(&repo.key(), reference);
        let cached = self.cache.get(&key);
        if let Some(entry) = cached
            .as_ref()
            .filter(|entry| self.trusts_fresh_cache() && entry.is_fresh(REF_TTL, now))
        {
            if let Some(commit) = full_commit(&entry.value) {
                return Ok(ResolvedRef::found(commit, ResolvedFrom::FreshCache));
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
        if let Some(commit) =
            self.try_rest(|rest| rest.commit_for_ref(repo, reference), &mut failures)
        {
            self.put(&key, commit.clone());
            return Ok(ResolvedRef::found(commit, ResolvedFrom::Rest));
        }
        match self.ls_refs(repo) {
            Ok(refs) => match refs.lookup(reference) {
                Some(commit) => {
                    let commit = commit.clone();
                    self.put(&key, commit.clone());
                    return Ok(ResolvedRef::found(commit, ResolvedFrom::GitProtocol));
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
                cause: limit,
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
