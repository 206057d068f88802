//! [`ResolveError`]: why a ref could not be resolved, naming the sources that were tried.
//!
//! Must never hold a credential in its text.

use crate::github::{RepoId, SourceFailure};

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
    #[error("cannot resolve {module} ({reference}): {cause}")]
    Limit {
        /// The module.
        module: String,
        /// What was asked.
        reference: String,
        /// The limit crossed.
        cause: crate::limits::LimitExceeded,
    },
}
