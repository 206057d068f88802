//! The format of a kept repo snapshot: its input-addressed store path name and the `snapshot.json`
//! record beside its archive.
//!
//! Pure names and data: it never touches the store or the network.

use std::collections::BTreeSet;

use agentpack_store::StorePathName;

use crate::github::RepoId;

/// The file in a repo snapshot store path that describes it.
pub const SNAPSHOT_RECORD: &str = "snapshot.json";
/// The archive in a repo snapshot store path that holds the repository tree (tar+zstd), for a
/// snapshot fetched over the git protocol.
pub const SNAPSHOT_ARCHIVE: &str = "tree.tar.zst";
/// The archive in a repo snapshot store path that holds the repository tree for a snapshot
/// downloaded as a tarball: the tarball itself, as GitHub sent it (kept by a rename, never
/// re-packed), extracted on use by the rules of a fresh download.
pub const SNAPSHOT_TARBALL: &str = "tree.tar.gz";
/// 3: the record names the archive by its BLAKE3 only (2 also carried the tree's `sha256-tree-v1`,
/// a second pass over every file of the repository when it was kept; 1 kept the tree as files under
/// `tree/`, sharing blobs with packages). Part of the store path name: older records are not read.
pub(super) const SNAPSHOT_RECORD_VERSION: u32 = 3;

/// What `snapshot.json` records about a kept snapshot.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct SnapshotRecord {
    pub(super) version: u32,
    /// `owner/repo`, lowercase.
    pub(super) repo: String,
    /// The full commit, lowercase.
    pub(super) commit: String,
    /// `tarball` or `git`.
    pub(super) via: String,
    /// The archive's file name: [`SNAPSHOT_TARBALL`] or [`SNAPSHOT_ARCHIVE`].
    pub(super) archive: String,
    /// The BLAKE3 (hex) of the archive, checked while it is extracted before every use: the
    /// extraction is deterministic, so matching bytes make the recorded tree without a re-hash.
    pub(super) archive_blake3: String,
    /// Links emptied by extraction (repository-relative; of a tarball, the extraction on use
    /// reports them again, for the whole tree).
    pub(super) links_emptied: Vec<String>,
    /// Files that were executable in the repository (the tree holds them 0444; of a tarball, the
    /// extraction on use reports them again).
    pub(super) executables: BTreeSet<String>,
    /// Regular files written, links kept.
    pub(super) files: usize,
    pub(super) links_kept: usize,
}

/// The store path name of the snapshot of `repo` at `commit` (input-addressed: repository + commit).
pub fn snapshot_name(repo: &RepoId, commit: &str) -> StorePathName {
    let inputs = format!(
        "agentpack repo snapshot v{SNAPSHOT_RECORD_VERSION}\0github.com/{}\0{}",
        repo.key(),
        commit.to_ascii_lowercase()
    );
    StorePathName::from_inputs(
        inputs.as_bytes(),
        &format!(
            "snapshot-{}-{}",
            repo.owner.to_ascii_lowercase(),
            repo.repo.to_ascii_lowercase()
        ),
    )
}
