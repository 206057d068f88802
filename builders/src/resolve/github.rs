//! Pinning GitHub packages: turning a requirement into a commit (keep the locked pin, follow a
//! moved tag, pick the best tag for a constraint) and materializing that commit as a verified,
//! normalized, hashed tree.
//!
//! Owns: ref resolution through the GitHub session, tag selection, the keep-or-follow rule and the
//! GitHub node of the graph. Must never move a locked pin the policy does not allow to move.

use std::collections::BTreeSet;

use agentpack_lockfile::keys::github_cache_key;
use agentpack_lockfile::manifest::Pin;
use agentpack_lockfile::validate::CommitSha;
use agentpack_lockfile::version::VersionConstraint;

use crate::github::resolver::{RefRequest, ResolveError, ResolvedFrom};
use crate::github::RepoId;
use crate::package_store::{OnExisting, SlotCheck, TreeMatch};

use super::*;

impl Run<'_, '_> {
    pub(super) fn resolve_request(
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
    pub(super) fn tags(
        &mut self,
        module: &str,
        repo: &RepoId,
    ) -> Result<Vec<(String, String)>, ResolutionError> {
        let list = self.env.fetcher.resolver().list_tags(module, repo)?;
        self.warnings.extend(list.warnings);
        Ok(list.tags.into_iter().map(|t| (t.name, t.commit)).collect())
    }

    /// Commits of the tags satisfying `constraint`, highest version first.
    pub(super) fn satisfying(
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
    pub(super) fn keep_or_follow(
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
            match self.tags(module, repo) {
                Ok(tags) => {
                    if let Some((_, commit)) = tags.iter().find(|(tag, _)| tag == name) {
                        return Self::commit(commit, module);
                    }
                }
                // GitHub cannot be asked and no tag list is cached: whether the name is a tag is
                // not known here; the checks below keep `old` when GitHub cannot be asked.
                Err(ResolutionError::Ref(error))
                    if !matches!(
                        *error,
                        ResolveError::UnknownRef { .. } | ResolveError::UnknownRepository { .. }
                    ) => {}
                Err(error) => return Err(error),
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

    pub(super) fn choose_commit(
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
                Pin::Digest(digest) => {
                    return Err(ResolutionError::Invalid(format!(
                        "{} asks for {module} by the digest {digest}; a GitHub package is pinned by a version, tag, branch or commit",
                        requirement.requester
                    )))
                }
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

    pub(super) fn github_package(
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
        let github = GithubPackage {
            fetcher: self.env.fetcher,
            module,
            repo: &repo,
            commit: commit.as_str(),
            path: &path,
        };
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
                return Ok(Node::new(unhashed.clone(), slot));
            }
        }
        if let Some(expected) = &expected {
            // Filled by this command's fill, the store having checked it against this hash.
            if let Some(slot) = self.filled.checked_slot(&cache_key, expected) {
                tracing::debug!(module, slot = %slot.display(), "source: the cache slot this command filled (checked when published)");
                let slot = slot.to_path_buf();
                let content_hash = Some(expected.clone());
                return self.node(module, &repo, &path, commit, cache_key, content_hash, slot);
            }
            let cached = match store.check_slot(&cache_key, expected)? {
                SlotCheck::Verified(slot) => {
                    tracing::debug!(module, slot = %slot.display(), "source: the verified cache slot");
                    Some(slot)
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
                    let restored = crate::fetch::restore_damaged(github, store, damaged, &tree);
                    self.warnings.extend(self.env.fetcher.take_warnings());
                    let (slot, warning) = restored?;
                    self.warnings.push(warning);
                    Some(slot)
                }
                SlotCheck::Missing => {
                    let tree = self.next_dir("substitute");
                    if let Some(executables) = crate::substitute::package_from_substituters(
                        self.env.fetcher,
                        store,
                        module,
                        expected,
                        &tree,
                    ) {
                        self.warnings.extend(self.env.fetcher.take_warnings());
                        let slot =
                            store.publish(&cache_key, module, &tree, expected, OnExisting::Keep)?;
                        store.record_executables(&slot, &executables)?;
                        Some(slot)
                    } else {
                        None
                    }
                }
            };
            if let Some(slot) = cached {
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
        }
        tracing::debug!(
            module,
            commit = commit.as_str(),
            "source: GitHub (no verified cache slot)"
        );
        let tree = self.next_dir("github");
        let downloaded = download_normalized(github, store, &tree)?;
        self.warnings.extend(downloaded.warnings(module));
        // A kept repo snapshot that was changed, or a download that could not be kept.
        self.warnings.extend(self.env.fetcher.take_warnings());
        if let Some(expected) = &expected {
            downloaded.check_matches(store, &tree, expected, module, commit.as_str())?;
        }
        let first_hash = expected.is_none();
        let content_hash = expected.unwrap_or_else(|| downloaded.content_hash.clone());
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
            None => store.publish(&cache_key, module, &tree, &content_hash, OnExisting::Keep)?,
        };
        store.record_executables(&published, &downloaded.fetched.executables)?;
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
}
