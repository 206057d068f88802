//! Substituters: an ordered list of caches asked for a locked tree by its content identity before
//! its upstream (GitHub for a package, the npm registry for an MCP server's tree).
//!
//! A substituter is an OCI repository (`oci://REGISTRY/REPOSITORY`, see [`OciSubstituter`]) that
//! `agentpack store push` filled: each store path is tagged by [`crate::oci::identity_tag`] of its
//! content identity (a package's `content_hash`, an npm tree's `tree_digest`). The list comes from
//! `AGENTPACK_SUBSTITUTERS` and the user's config file (the cli reads both); never from
//! `pack.lock`, which stays portable.
//!
//! [`Substituters::substitute`] asks each in order: the first tree that comes back is extracted
//! (by the OCI client, with the same safe extractor GitHub downloads go through) into a scratch
//! directory next to the caller's, checked by the caller's `verify` (the lock's hash), and only
//! then moved to where the caller publishes it. A miss, an unreachable or refusing substituter and
//! a tree that does not match the lock fall through to the next source with one warning: a miss
//! warns for the first tree a substituter lacks in this command (later misses are debug lines), an
//! unreachable substituter is not asked again in this command, and a tree that does not match is
//! removed, never published. Which source served each tree
//! is a `tracing` debug line (`-v`).
//!
//! Never prints: warnings are collected and handed out by [`Substituters::take_warnings`]
//! (the [`crate::snapshot::SnapshotFetcher`] that holds the list drains them with its own).

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::package_store::OnExisting;
use crate::warnings::WarningList;

use crate::oci::{identity_tag, OciClient, OciError, OciReference, OciRepository, OciTransport};

/// What a substituter sent back, already extracted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// Tree-relative paths of files that are executable (the store records them).
    pub executables: BTreeSet<String>,
    /// What served it, for the debug line (`oci://host/repo@sha256:...`).
    pub served_by: String,
}

/// Why a substituter could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceFailure {
    /// It could not be reached, or refused us: not asked again in this command.
    Unreachable(String),
    /// It answered for this tree with something unusable (a media type we do not read, bytes that
    /// do not match their digest): the next source is tried.
    Refused(String),
}

/// One cache that may hold trees by content identity.
pub trait SubstituteSource: Send + Sync + fmt::Debug {
    /// How messages name it (`oci://ghcr.io/acme/cache`).
    fn describe(&self) -> String;

    /// The tree tagged for `identity`, extracted into `dest` (which does not exist yet);
    /// `Ok(None)` when it has none.
    fn pull(&self, identity: &str, dest: &Path) -> Result<Option<Pulled>, SourceFailure>;
}

/// An OCI repository used as a substituter.
#[derive(Debug)]
pub struct OciSubstituter {
    repository: OciRepository,
    client: Arc<OciClient>,
}

impl OciSubstituter {
    /// `repository` reached through `client`.
    pub fn new(repository: OciRepository, client: Arc<OciClient>) -> OciSubstituter {
        OciSubstituter { repository, client }
    }
}

impl SubstituteSource for OciSubstituter {
    fn describe(&self) -> String {
        self.repository.to_string()
    }

    fn pull(&self, identity: &str, dest: &Path) -> Result<Option<Pulled>, SourceFailure> {
        let tag = identity_tag(identity);
        match self
            .client
            .pull_tree(&self.repository, &OciReference::Tag(tag.clone()), dest)
        {
            Ok(Some(pulled)) => Ok(Some(Pulled {
                executables: pulled.executables.into_iter().collect(),
                served_by: format!("{}@{}", self.repository, pulled.manifest_digest),
            })),
            Ok(None) => Ok(None),
            Err(
                error @ (OciError::Unreachable { .. }
                | OciError::Unauthorized { .. }
                | OciError::Runtime(_)),
            ) => Err(SourceFailure::Unreachable(first_lines(&error.to_string()))),
            Err(error) => Err(SourceFailure::Refused(first_lines(&error.to_string()))),
        }
    }
}

/// The text of an error without its `fix` lines (the warning says what to do itself).
fn first_lines(text: &str) -> String {
    text.lines()
        .take_while(|line| !line.trim_start().starts_with("fix"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why the substituter list could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SubstituterError {
    /// An entry is not an `oci://REGISTRY/REPOSITORY`.
    #[error("substituter {entry:?} (from {origin}) is not an OCI repository: {reason}\n  fix       write oci://REGISTRY/REPOSITORY, e.g. oci://ghcr.io/acme/agentpack-cache")]
    Invalid {
        /// The entry as written.
        entry: String,
        /// Where it was read (`AGENTPACK_SUBSTITUTERS`, a config file).
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// The OCI client could not be built.
    #[error("cannot prepare the substituters: {0}")]
    Client(#[from] OciError),
}

/// One entry of the list, with where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstituterEntry {
    /// `oci://REGISTRY/REPOSITORY` as written.
    pub address: String,
    /// Where it was read (`AGENTPACK_SUBSTITUTERS`, `~/.config/agentpack/config.toml`).
    pub origin: String,
}

/// Splits `AGENTPACK_SUBSTITUTERS` (comma or whitespace separated) into entries.
pub fn split_list(value: &str, origin: &str) -> Vec<SubstituterEntry> {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|part| !part.is_empty())
        .map(|part| SubstituterEntry {
            address: part.to_owned(),
            origin: origin.to_owned(),
        })
        .collect()
}

#[derive(Debug)]
struct Source {
    source: Box<dyn SubstituteSource>,
    down: AtomicBool,
    /// It lacked a tree already in this command (that miss was warned about).
    missed: AtomicBool,
}

/// The ordered substituters of one command.
#[derive(Debug, Default)]
pub struct Substituters {
    sources: Vec<Source>,
    warnings: WarningList,
    /// Identities no substituter served in this command: not asked again.
    unserved: Mutex<BTreeSet<String>>,
}

/// How a tree compares with the identity it was asked for (the caller's check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// It is the tree the lock names.
    Matches,
    /// It is not; what it hashes to.
    Mismatch(String),
}

/// A tree a substituter served, verified and moved to the caller's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substituted {
    /// Tree-relative paths of executable files.
    pub executables: BTreeSet<String>,
    /// What served it.
    pub served_by: String,
}

impl Substituters {
    /// No substituters: every tree comes from its upstream.
    pub fn none() -> Substituters {
        Substituters::default()
    }

    /// The given sources, asked in order.
    pub fn from_sources(sources: Vec<Box<dyn SubstituteSource>>) -> Substituters {
        Substituters {
            sources: sources
                .into_iter()
                .map(|source| Source {
                    source,
                    down: AtomicBool::new(false),
                    missed: AtomicBool::new(false),
                })
                .collect(),
            warnings: WarningList::default(),
            unserved: Mutex::new(BTreeSet::new()),
        }
    }

    /// The OCI repositories of `entries` (duplicates dropped, order kept), reached through one
    /// client over `transport`. No client is built for an empty list.
    pub fn from_entries(
        entries: &[SubstituterEntry],
        transport: OciTransport,
    ) -> Result<Substituters, SubstituterError> {
        let mut repositories: Vec<OciRepository> = Vec::new();
        for entry in entries {
            let repository: OciRepository =
                entry
                    .address
                    .parse()
                    .map_err(|error: OciError| SubstituterError::Invalid {
                        entry: entry.address.clone(),
                        origin: entry.origin.clone(),
                        reason: first_lines(&error.to_string()),
                    })?;
            if !repositories.contains(&repository) {
                repositories.push(repository);
            }
        }
        if repositories.is_empty() {
            return Ok(Substituters::none());
        }
        let client = Arc::new(OciClient::new(transport)?);
        Ok(Substituters::from_sources(
            repositories
                .into_iter()
                .map(|repository| {
                    Box::new(OciSubstituter::new(repository, Arc::clone(&client)))
                        as Box<dyn SubstituteSource>
                })
                .collect(),
        ))
    }

    /// True when there is nothing to ask.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// How each substituter is named, in order.
    pub fn describe(&self) -> Vec<String> {
        self.sources.iter().map(|s| s.source.describe()).collect()
    }

    /// Warnings collected so far, emptied.
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings.take()
    }

    /// Asks each substituter for the tree of `identity` (see the module docs). `what` names it in
    /// messages (the module, or the MCP server); `verify` compares a pulled tree with the lock;
    /// `dest` (which must not exist) receives the verified tree. `None` when no substituter served
    /// a verified tree: the caller goes on to the upstream, and `dest` does not exist.
    pub fn substitute(
        &self,
        what: &str,
        identity: &str,
        dest: &Path,
        verify: &dyn Fn(&Path) -> Result<Verified, String>,
    ) -> Option<Substituted> {
        let unserved = || {
            self.unserved
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if self.sources.is_empty() || unserved().contains(identity) {
            return None;
        }
        let served = self.ask(&Ask {
            what,
            identity,
            dest,
            verify,
        });
        if served.is_none() {
            unserved().insert(identity.to_owned());
        }
        served
    }

    fn ask(&self, ask: &Ask<'_>) -> Option<Substituted> {
        for (index, entry) in self.sources.iter().enumerate() {
            if entry.down.load(Ordering::Relaxed) {
                continue;
            }
            let scratch = scratch_beside(ask.dest, index);
            remove_quietly(&scratch);
            match Self::ask_one(entry, ask, &scratch) {
                Ok(substituted) => {
                    tracing::debug!(
                        what = ask.what,
                        source = substituted.served_by.as_str(),
                        "source: substituter"
                    );
                    return Some(substituted);
                }
                Err(warning) => {
                    remove_quietly(&scratch);
                    if let Some(warning) = warning {
                        self.warnings.push(warning);
                    }
                }
            }
        }
        None
    }

    /// One substituter's answer for `identity`: pulled into `scratch`, verified, moved to `dest`;
    /// or why not, as the warning to give (`None`: a later miss, or a substituter already said
    /// down).
    /// The caller removes `scratch` on failure.
    fn ask_one(
        entry: &Source,
        ask: &Ask<'_>,
        scratch: &Path,
    ) -> Result<Substituted, Option<String>> {
        let Ask {
            what,
            identity,
            dest,
            verify,
        } = *ask;
        let name = entry.source.describe();
        let pulled = match entry.source.pull(identity, scratch) {
            Ok(Some(pulled)) => pulled,
            Ok(None) => {
                tracing::debug!(
                    what,
                    substituter = name.as_str(),
                    identity,
                    "substituter has no copy"
                );
                // One warning per substituter and command: the first tree it lacks.
                if entry.missed.swap(true, Ordering::Relaxed) {
                    return Err(None);
                }
                return Err(Some(format!(
                    "warning: substituter {name} has no copy of {what} (tag {}); using the next source (other trees it lacks in this command are `-v` lines)\n  fix       fill the cache from a machine that has synced the project: `agentpack store push {name}`",
                    identity_tag(identity)
                )));
            }
            Err(SourceFailure::Unreachable(reason)) => {
                // Concurrent asks may all fail: the first to mark it down says so.
                if entry.down.swap(true, Ordering::Relaxed) {
                    return Err(None);
                }
                return Err(Some(format!(
                    "warning: substituter {name} is unavailable ({reason}); not asked again in this command, using the next source\n  fix       check the registry and its credentials (AGENTPACK_OCI_TOKEN, ~/.docker/config.json), or remove it from AGENTPACK_SUBSTITUTERS / the config file"
                )));
            }
            Err(SourceFailure::Refused(reason)) => {
                return Err(Some(format!(
                    "warning: substituter {name} could not serve {what}: {reason}; using the next source\n  fix       the cache holds something else under this tag: push the verified store path again (`agentpack store push`) or drop the tag"
                )));
            }
        };
        match verify(scratch) {
            Ok(Verified::Matches) => {}
            Ok(Verified::Mismatch(actual)) => {
                return Err(Some(format!(
                    "warning: refused {what} from substituter {name}: its tree hashes to {actual}, pack.lock says {identity}; nothing was published from it, using the next source\n  served    {}\n  fix       the cache holds other bytes under this tag: push the verified store path again (`agentpack store push`) or drop the tag",
                    pulled.served_by
                )));
            }
            Err(reason) => {
                return Err(Some(format!(
                    "warning: cannot check {what} from substituter {name}: {reason}; using the next source\n  fix       check that the store's filesystem is writable and has free space"
                )));
            }
        }
        fs_err::rename(scratch, dest).map_err(|error| {
            Some(format!(
                "warning: cannot use {what} from substituter {name}: {error}; using the next source\n  fix       check that the store's filesystem is writable and has free space"
            ))
        })?;
        Ok(Substituted {
            executables: pulled.executables,
            served_by: pulled.served_by,
        })
    }
}

/// One request to the substituters (the arguments of [`Substituters::substitute`]).
#[derive(Clone, Copy)]
struct Ask<'a> {
    /// How messages name the tree (the module, or the MCP server).
    what: &'a str,
    /// The content identity asked for.
    identity: &'a str,
    /// Where the verified tree goes (must not exist).
    dest: &'a Path,
    /// Compares a pulled tree with the lock.
    verify: &'a dyn Fn(&Path) -> Result<Verified, String>,
}

/// A locked package from the substituters of `fetcher`: the verified tree in `tree` and its
/// executable files, or `None` (no substituter, or none served a tree hashing to `expected`).
/// The caller publishes it exactly as it publishes a verified GitHub download.
pub fn package_from_substituters(
    fetcher: &crate::snapshot::SnapshotFetcher,
    store: &dyn crate::package_store::PackageStore,
    module: &str,
    expected: &agentpack_lockfile::validate::ContentHash,
    tree: &Path,
) -> Option<BTreeSet<String>> {
    let substituters = fetcher.substituters();
    if substituters.is_empty() {
        return None;
    }
    let verify = |dir: &Path| -> Result<Verified, String> {
        match store.verify_tree(dir, expected) {
            Ok(crate::package_store::TreeMatch::Matches) => Ok(Verified::Matches),
            Ok(crate::package_store::TreeMatch::Mismatch { actual }) => {
                Ok(Verified::Mismatch(actual.to_string()))
            }
            Err(error) => Err(error.to_string()),
        }
    };
    substituters
        .substitute(module, expected.as_str(), tree, &verify)
        .map(|substituted| substituted.executables)
}

/// `fetch_lock`'s first step: every GitHub or `oci://` package of `lock` with a content hash and
/// an empty slot, asked of the substituters (concurrently) and, when one serves a verified tree,
/// published into its slot exactly as a verified download would be. Returns the modules filled;
/// the rest (and everything when there are no substituters) is left to the upstream fetch that
/// follows. `scratch` is a directory on the store's filesystem.
pub fn fill_from_substituters(
    lock: &agentpack_lockfile::lock::Lockfile,
    fetcher: &crate::snapshot::SnapshotFetcher,
    store: &dyn crate::package_store::PackageStore,
    scratch: &Path,
) -> Result<Vec<String>, crate::resolve::ResolutionError> {
    use rayon::prelude::*;
    if fetcher.substituters().is_empty() {
        return Ok(Vec::new());
    }
    let filled: Vec<Option<String>> = lock
        .packages
        .par_iter()
        .enumerate()
        .map(|(index, package)| {
            let Some(expected) = &package.content_hash else {
                return Ok(None);
            };
            if !(package.is_github() || package.is_oci()) {
                return Ok(None);
            }
            if store.check_slot(&package.cache_key, expected)?
                != crate::package_store::SlotCheck::Missing
            {
                return Ok(None);
            }
            let module = package.module.as_str();
            let tree = scratch.join(format!("substitute-{index}"));
            let Some(executables) =
                package_from_substituters(fetcher, store, module, expected, &tree)
            else {
                return Ok(None);
            };
            let slot = store.publish(
                &package.cache_key,
                module,
                &tree,
                expected,
                OnExisting::Keep,
            )?;
            store.record_executables(&slot, &executables)?;
            Ok(Some(module.to_owned()))
        })
        .collect::<Result<_, crate::resolve::ResolutionError>>()?;
    Ok(filled.into_iter().flatten().collect())
}

/// Where substituter `index` extracts a tree meant for `dest`: beside it, on the same filesystem.
fn scratch_beside(dest: &Path, index: usize) -> PathBuf {
    let name = dest
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tree".to_owned());
    dest.with_file_name(format!("{name}.substitute-{index}"))
}

/// Removes a scratch tree (its directories may be read-only; see [`crate::leftovers`]), ignoring
/// failures: a scratch tree left behind is no error for the command.
fn remove_quietly(path: &Path) {
    let _ = crate::leftovers::remove_tree(path);
}

#[cfg(test)]
mod tests;
