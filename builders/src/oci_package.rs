//! `oci://` packages: a skill or plugin directory published to an OCI registry, as our own
//! artifact (`agentpack publish DIR oci://...`) or as an image with one tar, tar+gzip or tar+zstd
//! layer holding the directory.
//!
//! Owns the three steps [`crate::resolve`] and [`crate::fetch`] take for such a package:
//! - [`choose_digest`]: the manifest digest a pin names (`{ tag = "1.2.0" }` is asked of the
//!   registry; `{ digest = "sha256:..." }` is taken as written; `{}` is the tag `latest`). A tag
//!   pin that the old lock already resolved is kept unless the policy updates the module: tags
//!   move in registries, the lock does not move with them until `agentpack update`.
//! - [`materialize`]: the package at that digest in a verified store slot (the slot if it still
//!   matches, else the substituters when the lock knows its content hash, else a pull by digest,
//!   normalized like a GitHub download and checked against the lock's hash before it is
//!   published), as the lock entry it makes;
//! - [`fetch_locked`]: the same for `sync` from a lock entry alone.
//!
//! Pulling itself (media types accepted, digests checked while downloading, the safe extractor)
//! is [`crate::oci::OciClient::pull_tree`]'s; its refusals come back here with the package named.
//! Never prints.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_lockfile::keys::oci_cache_key;
use agentpack_lockfile::lock::LockedPackage;
use agentpack_lockfile::manifest::Pin;
use agentpack_lockfile::module_id::ModuleId;
use agentpack_lockfile::validate::{CacheKey, CommitSha, ContentHash};

use crate::normalize::{self, NormalizeContext};
use crate::oci::{OciError, OciReference, OciRepository};
use crate::package_store::{OnExisting, PackageStore, SlotCheck, TreeMatch};
use crate::resolve::ResolutionError;
use crate::snapshot::SnapshotFetcher;

/// The tag an unpinned `oci://` dependency follows.
pub const DEFAULT_TAG: &str = "latest";

/// A manifest digest and the tag it was resolved from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenDigest {
    /// The tag (`None` for a digest pin).
    pub tag: Option<String>,
    /// `sha256:<64 hex>`.
    pub digest: String,
}

fn oci_error(module: &str, source: OciError) -> ResolutionError {
    ResolutionError::Oci {
        module: module.to_owned(),
        source: Box::new(source),
    }
}

/// The registry and repository of an `oci://` module.
pub fn repository_of(module: &str) -> Result<OciRepository, ResolutionError> {
    let id = ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    let oci = id
        .as_oci()
        .ok_or_else(|| ResolutionError::Invalid(format!("{module} is not an oci:// module")))?;
    format!("oci://{}/{}", oci.registry, oci.repository)
        .parse()
        .map_err(|source| oci_error(module, source))
}

/// The pins on one `oci://` module, reduced to one: a tag or a digest (see the module docs).
/// Two requirements naming different tags or digests conflict; so does a pin kind an OCI
/// package cannot have (a version constraint, a branch, a commit).
pub fn requested(module: &str, pins: &[(&str, &Pin)]) -> Result<Pin, ResolutionError> {
    let mut chosen: Option<Pin> = None;
    for (requester, pin) in pins {
        let pin = match pin {
            Pin::Unpinned => continue,
            Pin::Tag(tag) | Pin::Ref(tag) => Pin::Tag(tag.clone()),
            Pin::Digest(digest) => Pin::Digest(digest.clone()),
            Pin::Version(_) | Pin::Branch(_) | Pin::Commit(_) => {
                return Err(ResolutionError::Invalid(format!(
                    "{requester} asks for {module} by a version, branch or commit; an oci:// package is pinned by {{ tag = \"...\" }} or {{ digest = \"sha256:...\" }}"
                )))
            }
        };
        match &chosen {
            Some(existing) if *existing != pin => {
                let describe = |pin: &Pin| match pin {
                    Pin::Digest(d) => format!("digest {d}"),
                    Pin::Tag(t) => format!("tag {t}"),
                    _ => String::new(),
                };
                return Err(ResolutionError::Conflict {
                    module: module.to_owned(),
                    requirements: pins
                        .iter()
                        .filter(|(_, p)| **p != Pin::Unpinned)
                        .map(|(r, p)| format!("  {r} wants {}", describe(p)))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    fix: format!("pin {module} to one tag or digest in agentpack.toml and align the packages that require it"),
                });
            }
            _ => chosen = Some(pin),
        }
    }
    Ok(chosen.unwrap_or_else(|| Pin::Tag(DEFAULT_TAG.to_owned())))
}

/// The manifest digest `pin` names for `module` (see the module docs): `old` is the module's
/// entry in the old lock, `updating` whether the policy moves it.
pub fn choose_digest(
    fetcher: &SnapshotFetcher,
    module: &str,
    pin: &Pin,
    old: Option<&LockedPackage>,
    updating: bool,
) -> Result<ChosenDigest, ResolutionError> {
    let old_pin = old.and_then(LockedPackage::oci_pin);
    match pin {
        Pin::Digest(digest) => Ok(ChosenDigest {
            tag: None,
            digest: digest.clone(),
        }),
        Pin::Tag(tag) => {
            if let Some(old_pin) = old_pin.filter(|p| !updating && p.tag.as_deref() == Some(tag)) {
                tracing::debug!(
                    module,
                    tag,
                    digest = old_pin.digest.as_str(),
                    "keeping the locked digest of the tag"
                );
                return Ok(ChosenDigest {
                    tag: Some(tag.clone()),
                    digest: old_pin.digest,
                });
            }
            let repository = repository_of(module)?;
            let client = fetcher
                .oci_client()
                .map_err(|source| oci_error(module, source))?;
            let reference = OciReference::Tag(tag.clone());
            match client.resolve(&repository, &reference) {
                Ok(Some(digest)) => {
                    tracing::debug!(module, tag, digest = digest.as_str(), "resolved the tag");
                    Ok(ChosenDigest {
                        tag: Some(tag.clone()),
                        digest,
                    })
                }
                Ok(None) => Err(ResolutionError::Invalid(format!(
                    "{module}: the registry has no tag {tag:?} in {repository}\n  fix       check the tag (`agentpack publish DIR {repository}:{tag}` pushes one), or pin another in agentpack.toml"
                ))),
                Err(source) => Err(oci_error(module, source)),
            }
        }
        _ => Err(ResolutionError::Invalid(format!(
            "{module}: an oci:// package is pinned by a tag or a digest"
        ))),
    }
}

/// An `oci://` package in a verified store slot ([`materialize`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Materialized {
    /// Its lock entry.
    pub entry: LockedPackage,
    /// The verified slot.
    pub slot: PathBuf,
    /// Whether it was pulled (or substituted) in this call, rather than found in the slot.
    pub pulled: bool,
}

/// The package `module` at `chosen` in a verified store slot, its lock entry, and whether it was
/// pulled (see the module docs). `expected` is the old lock's content hash when it pinned the
/// same digest. `tree` is a scratch directory that does not exist yet.
pub fn materialize(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    module: &str,
    chosen: &ChosenDigest,
    expected: Option<&ContentHash>,
    tree: &Path,
) -> Result<Materialized, ResolutionError> {
    let repository = repository_of(module)?;
    let cache_key = oci_cache_key(&repository.registry, &repository.repository, &chosen.digest);
    let commit = LockedPackage::oci_commit(&chosen.digest).ok_or_else(|| {
        ResolutionError::Invalid(format!(
            "{module}: {:?} is not a sha256 manifest digest",
            chosen.digest
        ))
    })?;
    let entry = |slot: &Path, content_hash: ContentHash| {
        locked_entry(
            module,
            &repository,
            chosen,
            (&commit, &cache_key),
            slot,
            content_hash,
        )
    };
    // What the slot held before the pull: `None` when nothing was expected (checked after the pull).
    let mut damaged = None;
    if let Some(expected) = expected {
        match store.check_slot(&cache_key, expected)? {
            SlotCheck::Verified(slot) => {
                tracing::debug!(module, slot = %slot.display(), "source: the verified cache slot");
                return Ok(Materialized {
                    entry: entry(&slot, expected.clone())?,
                    slot,
                    pulled: false,
                });
            }
            SlotCheck::Missing => {
                if let Some(executables) = crate::substitute::package_from_substituters(
                    fetcher, store, module, expected, tree,
                ) {
                    let slot =
                        store.publish(&cache_key, module, tree, expected, OnExisting::Keep)?;
                    store.record_executables(&slot, &executables)?;
                    return Ok(Materialized {
                        entry: entry(&slot, expected.clone())?,
                        slot,
                        pulled: true,
                    });
                }
                damaged = Some(false);
            }
            SlotCheck::Mismatch { path, actual } => {
                tracing::debug!(module, cache = %path.display(), %actual, "restoring a cache slot that does not match the lock from the registry");
                damaged = Some(true);
            }
        }
    }
    let (content_hash, executables) =
        pull_normalized(fetcher, store, module, &repository, chosen, tree)?;
    if let Some(expected) = expected {
        if let TreeMatch::Mismatch { actual } = store.verify_tree(tree, expected)? {
            return Err(ResolutionError::FetchedMismatch {
                module: module.to_owned(),
                expected: expected.to_string(),
                actual: actual.to_string(),
                commit: chosen.digest.clone(),
            });
        }
    }
    let content_hash = expected.cloned().unwrap_or(content_hash);
    let slot = match damaged {
        Some(false) => store.publish(&cache_key, module, tree, &content_hash, OnExisting::Keep)?,
        Some(true) => store.publish(&cache_key, module, tree, &content_hash, OnExisting::Repair)?,
        None => store.verified_or_publish(&cache_key, module, tree, &content_hash)?,
    };
    store.record_executables(&slot, &executables)?;
    Ok(Materialized {
        entry: entry(&slot, content_hash)?,
        slot,
        pulled: true,
    })
}

/// The lock entry of the `oci://` package `module` pulled by `chosen` into `slot`.
fn locked_entry(
    module: &str,
    repository: &OciRepository,
    chosen: &ChosenDigest,
    (commit, cache_key): (&CommitSha, &CacheKey),
    slot: &Path,
    content_hash: ContentHash,
) -> Result<LockedPackage, ResolutionError> {
    Ok(LockedPackage {
        module: ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?,
        direct: false,
        kind: normalize::package_kind(slot).to_owned(),
        url: LockedPackage::oci_url(
            &repository.registry,
            &repository.repository,
            chosen.tag.as_deref(),
            &chosen.digest,
        ),
        owner: String::new(),
        repo: String::new(),
        path: String::new(),
        commit: commit.clone(),
        cache_key: cache_key.clone(),
        content_hash: Some(content_hash),
        name: normalize::package_name(slot),
    })
}

/// Pulls the package by digest into `tree`, normalizes it like a download and hashes it.
fn pull_normalized(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    module: &str,
    repository: &OciRepository,
    chosen: &ChosenDigest,
    tree: &Path,
) -> Result<(ContentHash, BTreeSet<String>), ResolutionError> {
    let client = fetcher
        .oci_client()
        .map_err(|source| oci_error(module, source))?;
    let reference = OciReference::Digest(chosen.digest.clone());
    tracing::debug!(module, source = %repository.display_with(&reference), "source: the OCI registry");
    let pulled = match client.pull_tree(repository, &reference, tree) {
        Ok(Some(pulled)) => pulled,
        Ok(None) => {
            return Err(ResolutionError::Invalid(format!(
                "{module}: the registry has no manifest {} in {repository}\n  fix       the digest was deleted from the registry: pin a tag that exists (`agentpack update {module}` after editing the pin)",
                chosen.digest
            )))
        }
        Err(source) => return Err(oci_error(module, source)),
    };
    let executables: BTreeSet<String> = pulled.executables.into_iter().collect();
    let normalized = normalize::normalize_package(tree, &NormalizeContext::without_repo(module))?;
    Ok((
        store.hash_tree(tree)?,
        normalized.with_copied_executables(&executables),
    ))
}

/// `sync`: the locked `oci://` package in a verified slot, pulled by its digest when the slot is
/// empty or changed. Returns the slot and whether it was pulled (or substituted) in this run.
pub fn fetch_locked(
    fetcher: &SnapshotFetcher,
    store: &dyn PackageStore,
    package: &LockedPackage,
    tree: &Path,
) -> Result<(PathBuf, bool), ResolutionError> {
    let module = package.module.as_str();
    let (Some(pin), Some(expected)) = (package.oci_pin(), package.content_hash.as_ref()) else {
        return Err(ResolutionError::Invalid(format!(
            "{module}: the pack.lock entry pins no manifest digest or content hash\n  fix       run `agentpack lock`"
        )));
    };
    let chosen = ChosenDigest {
        tag: pin.tag,
        digest: pin.digest,
    };
    // One slot check: the one `materialize` makes (the lock's cache key is the one it derives).
    let materialized = materialize(fetcher, store, module, &chosen, Some(expected), tree)?;
    Ok((materialized.slot, materialized.pulled))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    #[test]
    fn pins_reduce_to_one_tag_or_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let tag = Pin::Tag("1.2.0".into());
        assert_eq!(
            requested("oci://r/x", &[]).unwrap(),
            Pin::Tag("latest".into())
        );
        assert_eq!(
            requested(
                "oci://r/x",
                &[("agentpack.toml", &tag), ("p", &Pin::Unpinned)]
            )
            .unwrap(),
            tag
        );
        let by_digest = Pin::Digest(digest.clone());
        assert_eq!(
            requested("oci://r/x", &[("a", &by_digest)]).unwrap(),
            by_digest
        );
        let error = requested("oci://r/x", &[("agentpack.toml", &tag), ("p", &by_digest)])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("agentpack.toml wants tag 1.2.0") && error.contains("p wants digest"),
            "{error}"
        );
        let error = requested("oci://r/x", &[("p", &Pin::Branch("main".into()))])
            .unwrap_err()
            .to_string();
        assert!(error.contains("by a version, branch or commit"), "{error}");
    }
}
