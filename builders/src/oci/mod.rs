//! OCI registries as a cache and a package source: the transport, the artifact format, push and pull.
//!
//! - [`reference`]: `oci://host[:port]/path/to/repo` ([`OciRepository`]), tags and digests
//!   ([`OciReference`]), and [`identity_tag`], the tag a content identity is pushed under;
//! - [`auth`]: [`OciTransport`], credentials (`AGENTPACK_OCI_TOKEN`, `~/.docker/config.json`),
//!   which hosts may be reached over plain HTTP, and the retry policy;
//! - [`archive`]: the one deterministic tar (+zstd) tree format, shared with the offline bundle of
//!   `env export --with-store`, and its safe reader (through [`crate::extract::SafeTreeWriter`]);
//! - [`artifact`]: the media types, [`ArtifactConfig`] and the manifest we push, and which
//!   manifests a pull accepts;
//! - [`client`]: [`OciClient`], a blocking facade over the `oci-client` crate.
//!
//! Credentials are read, never written, and never appear in an error message or a log line.
//! Nothing here prints: results and errors go back to the caller.

pub mod archive;
pub mod artifact;
pub mod auth;
pub mod client;
pub mod reference;

pub use artifact::{ArtifactConfig, ArtifactKind};
pub use auth::OciTransport;
pub use client::{OciClient, PulledTree, PushJob, PushOutcome, TransferSnapshot, Transfers};
pub use reference::{identity_tag, parse_oci_url, OciReference, OciRepository};

use std::path::PathBuf;

/// Why an OCI operation failed. Messages name the registry, repository and reference, never a
/// credential.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// An `oci://` address, tag or digest that cannot be used.
    #[error("{input:?} is not a usable OCI reference: {reason}\n  fix  write oci://REGISTRY/REPOSITORY (a tag as :TAG, a digest as @sha256:HEX)")]
    InvalidReference {
        /// What was given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry could not be reached (after the retries).
    #[error("cannot reach the OCI registry {registry} ({what}): {cause}\n  fix  check the address and the network; a plain-HTTP registry other than 127.0.0.1/localhost must be listed in AGENTPACK_OCI_INSECURE")]
    Unreachable {
        /// host[:port].
        registry: String,
        /// What was being done (`pulling oci://h/r:t`).
        what: String,
        /// The cause.
        cause: String,
    },
    /// The registry asked for credentials we do not have, or refused the ones we sent.
    #[error("the OCI registry {registry} refused access to {repository} ({what}): {reason}\n  fix  {fix}")]
    Unauthorized {
        /// host[:port].
        registry: String,
        /// The repository.
        repository: String,
        /// What was being done.
        what: String,
        /// Whether credentials were sent.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// The registry answered with an error.
    #[error("the OCI registry {registry} failed {what}: {message}")]
    Registry {
        /// host[:port].
        registry: String,
        /// What was being done.
        what: String,
        /// Its answer.
        message: String,
    },
    /// A manifest or layer of a media type we do not read.
    #[error("{reference}: refusing {what} of media type {media_type:?}: agentpack reads its own artifacts and image manifests with one tar, tar+gzip or tar+zstd layer\n  fix  push the package with `agentpack publish`, or as one tar layer holding the skill or plugin directory")]
    UnsupportedMediaType {
        /// `oci://host/repo:tag`.
        reference: String,
        /// `the manifest`, `the layer`, `the config`.
        what: String,
        /// The media type.
        media_type: String,
    },
    /// A manifest whose shape we do not read (no layer, several layers, an index).
    #[error("{reference}: {reason}\n  fix  push the package with `agentpack publish`, or as one tar layer holding the skill or plugin directory")]
    UnsupportedManifest {
        /// `oci://host/repo:tag`.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// Downloaded bytes differ from their digest, or a config blob is not ours.
    #[error("{reference}: {reason}; nothing was written")]
    Corrupt {
        /// `oci://host/repo:tag`.
        reference: String,
        /// What was wrong.
        reason: String,
    },
    /// The pulled layer holds no skill or plugin directory.
    #[error("{reference}: the layer holds no skill or plugin directory (no SKILL.md, plugin manifest or agentpack.toml at its root or in its single top-level directory); nothing was written")]
    NotAPackage {
        /// `oci://host/repo:tag`.
        reference: String,
    },
    /// The layer could not be unpacked by the extraction rules.
    #[error("{reference}: cannot unpack the layer: {source}; nothing was written")]
    Extract {
        /// `oci://host/repo:tag`.
        reference: String,
        /// The cause.
        #[source]
        source: crate::extract::ExtractError,
    },
    /// A tree could not be archived.
    #[error("cannot archive {}: {source}", path.display())]
    Archive {
        /// The tree.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A local file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The destination of a pull already exists.
    #[error("cannot pull into {}: it already exists", path.display())]
    DestinationExists {
        /// The path.
        path: PathBuf,
    },
    /// A limit (download size, entries, extracted bytes) was crossed.
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitExceeded),
    /// The async runtime could not be started.
    #[error("cannot start the OCI client's runtime: {0}")]
    Runtime(std::io::Error),
}
