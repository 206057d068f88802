//! Tag lists and SemVer constraints: listing a repository's tags (cache, REST, git protocol, stale
//! cache) and picking the highest tag a constraint accepts.
//!
//! Must never pick a tag the constraint does not accept.

use super::*;
use crate::github::metadata_cache::{tags_key, TAGS_TTL};
use crate::github::rest::RemoteTag;
use crate::github::{RepoId, SourceFailure};
use agentpack_lockfile::version::{parse_tag, VersionConstraint};

pub(super) fn parse_tags(json: &str) -> Vec<RemoteTag> {
    serde_json::from_str(json).unwrap_or_default()
}

impl Resolver {
    /// The failure of a tag listing: `asked` says what was asked, in words (never a ref name).
    pub(super) fn tags_failure(
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

    /// Lists every tag of `repo` (cache, REST every page, git protocol, stale cache).
    pub fn list_tags(&self, module: &str, repo: &RepoId) -> Result<TagList, ResolveError> {
        let now = (self.clock)();
        let key = tags_key(&repo.key());
        let cached = self.cache.get(&key);
        if let Some(entry) = cached
            .as_ref()
            .filter(|entry| self.trusts_fresh_cache() && entry.is_fresh(TAGS_TTL, now))
        {
            return Ok(TagList::found(
                parse_tags(&entry.value),
                ResolvedFrom::FreshCache,
            ));
        }
        let mut failures = Vec::new();
        if let Some(tags) = self.try_rest(|rest| rest.list_tags(repo), &mut failures) {
            self.put(&key, serde_json::to_string(&tags).unwrap_or_default());
            return Ok(TagList::found(tags, ResolvedFrom::Rest));
        }
        match self.ls_refs(repo) {
            Ok(refs) => {
                let tags: Vec<RemoteTag> = refs
                    .tags
                    .into_iter()
                    .map(|(name, commit)| RemoteTag { name, commit })
                    .collect();
                self.put(&key, serde_json::to_string(&tags).unwrap_or_default());
                return Ok(TagList::found(tags, ResolvedFrom::GitProtocol));
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
