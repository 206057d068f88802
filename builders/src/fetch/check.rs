//! `sync --verify-only`: every locked package's slot compared with the lock, the problems listed.
//!
//! It never fetches, repairs or writes anything.

use std::path::PathBuf;

use agentpack_lockfile::lock::Lockfile;
use agentpack_lockfile::validate::ContentHash;
use rayon::prelude::*;

use crate::package_store::{PackageStore, SlotCheck};
use crate::resolve::ResolutionError;

/// A package `sync --verify-only` found wrong in the store (nothing was fetched to find it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotProblem {
    /// The slot is empty or the store path it named was deleted.
    Missing {
        /// The module.
        module: String,
        /// The lock's cache key.
        cache_key: String,
    },
    /// The slot's tree no longer hashes to the lock's content hash.
    Mismatch {
        /// The module.
        module: String,
        /// The slot.
        cache: PathBuf,
        /// The lock's hash.
        expected: ContentHash,
        /// What the slot holds.
        actual: ContentHash,
    },
}

impl std::fmt::Display for SlotProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotProblem::Missing { module, cache_key } => write!(
                f,
                "missing   {module}: no store path for cache key {cache_key} (deleted?)"
            ),
            SlotProblem::Mismatch {
                module,
                cache,
                expected,
                actual,
            } => write!(
                f,
                "damaged   {module}: {} holds {actual}, pack.lock says {expected}",
                cache.display()
            ),
        }
    }
}

/// What [`check_lock`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOutcome {
    /// Packages whose store path is missing or does not match the lock.
    pub problems: Vec<SlotProblem>,
    /// Modules without a content hash whose slot is filled (present, unverified).
    pub unverified: Vec<String>,
}

/// Checks every package of `lock` against the store without fetching, copying or publishing
/// anything (`sync --verify-only`): each slot is re-hashed against the lock's content hash, and a
/// slot whose store path is gone is reported, never filled again. Path and `local/` packages are
/// checked like any other: the lock's hash against their store copy.
pub fn check_lock(
    lock: &Lockfile,
    store: &dyn PackageStore,
) -> Result<CheckOutcome, ResolutionError> {
    lock.check_integrity()
        .map_err(|e| ResolutionError::Invalid(e.to_string()))?;
    let checked: Vec<Result<(Option<SlotProblem>, bool), ResolutionError>> = lock
        .packages
        .par_iter()
        .map(|package| {
            let module = package.module.as_str().to_owned();
            let missing = || SlotProblem::Missing {
                module: module.clone(),
                cache_key: package.cache_key.as_str().to_owned(),
            };
            let Some(expected) = &package.content_hash else {
                return Ok(match store.slot(&package.cache_key)? {
                    Some(_) => (None, true),
                    None => (Some(missing()), false),
                });
            };
            Ok(match store.check_slot(&package.cache_key, expected)? {
                SlotCheck::Verified(_) => (None, false),
                SlotCheck::Missing => (Some(missing()), false),
                SlotCheck::Mismatch { path, actual } => (
                    Some(SlotProblem::Mismatch {
                        module: module.clone(),
                        cache: path,
                        expected: expected.clone(),
                        actual,
                    }),
                    false,
                ),
            })
        })
        .collect();
    let mut outcome = CheckOutcome::default();
    for (package, result) in lock.packages.iter().zip(checked) {
        let (problem, unverified) = result?;
        outcome.problems.extend(problem);
        if unverified {
            outcome.unverified.push(package.module.as_str().to_owned());
        }
    }
    Ok(outcome)
}
