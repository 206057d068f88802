//! [`ResolutionError`]: every way resolution can fail, with the requester and the fix in its text.
//!
//! Owns: the error enum and its conversions from resolver, fetch and normalize errors. Must never
//! decide anything about pins; it only describes failures.

use std::path::PathBuf;

use crate::github::resolver::ResolveError;
use crate::local_package::LocalPackageError;
use crate::normalize::NormalizeError;
use crate::package_store::StoreAccessError;
use crate::snapshot::FetchError;

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
    /// An `oci://` package could not be resolved or pulled (the registry's answer, a media type
    /// we do not read, bytes that do not match their digest): the message names the package, the
    /// cause is the `source` (printed once, on its own line).
    #[error("cannot fetch {module}")]
    Oci {
        /// The module.
        module: String,
        /// What the OCI client said.
        source: Box<crate::oci::OciError>,
    },
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
    #[error("cannot prepare {path}: {cause}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
}

/// A [`ResolutionError::CacheMismatch`] with a `restore` line (why no verified source restored it)
/// before its remedy.
pub(super) fn unrestored_message(mismatch: &ResolutionError, why: &str) -> String {
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
