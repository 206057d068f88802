//! The [`Sweeper`]: removing (or, dry, counting) what GC decided to remove, honouring ownership,
//! counting only what really went, plus the stamp sweep and the "not removed" warnings.
//!
//! Must never remove an entry this user does not own, and never count a removal that failed.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::*;
use crate::error::Result;
use crate::fsutil;
use crate::publish::STAMPS;
use crate::store::Store;

/// Removes (or, dry, counts) what GC decided to remove, honouring ownership: only the owner of an entry
/// (or root) removes it, everything else is listed in `not_removed`, and nothing is counted that did
/// not go.
pub(super) struct Sweeper<'a> {
    pub(super) dry: bool,
    pub(super) report: &'a mut GcReport,
}

impl Sweeper<'_> {
    /// `Some(owner)` when this process may remove `path`; else records why not.
    pub(super) fn permitted(&mut self, kind: &'static str, path: &Path) -> Option<u32> {
        let Some(owner) = fsutil::owner_of(path) else {
            // Gone already (a concurrent removal by its owner): nothing to do.
            return None;
        };
        if fsutil::may_remove(owner) {
            return Some(owner);
        }
        self.report.not_removed.push(NotRemoved {
            kind,
            path: path.to_path_buf(),
            owner: Some(owner),
            reason: format!("it belongs to uid {owner}; only its owner or root may remove it"),
        });
        None
    }

    /// Remove one file (a root, a slot, a blob, metadata); `true` when it went (or, dry, would go).
    pub(super) fn remove_file(&mut self, kind: &'static str, path: &Path) -> bool {
        self.remove_with(
            kind,
            path,
            |path| {
                std::fs::symlink_metadata(path).map_or(0, |meta| fsutil::freed_by_removing(&meta))
            },
            fsutil::remove_file_counting,
        )
    }

    /// Remove a tree (a leftover of `.tmp/`); `true` when it went.
    pub(super) fn remove_tree(&mut self, kind: &'static str, path: &Path) -> bool {
        self.remove_with(
            kind,
            path,
            |path| tree_bytes(path, 0),
            fsutil::remove_tree_counting,
        )
    }

    /// Remove `path` with `remove` (which counts the bytes it frees), or, dry, count what
    /// `would_free` says; a failure is recorded, not returned. `true` when it went (or would go).
    pub(super) fn remove_with(
        &mut self,
        kind: &'static str,
        path: &Path,
        would_free: impl FnOnce(&Path) -> u64,
        remove: impl FnOnce(&Path, &mut u64) -> Result<()>,
    ) -> bool {
        if self.permitted(kind, path).is_none() {
            return false;
        }
        if self.dry {
            self.report.bytes_freed += would_free(path);
            return true;
        }
        let mut freed = 0;
        let result = remove(path, &mut freed);
        self.report.bytes_freed += freed;
        match result {
            Ok(()) => true,
            Err(err) => {
                self.failed(kind, path, &err);
                false
            }
        }
    }

    pub(super) fn failed(&mut self, kind: &'static str, path: &Path, err: &crate::StoreError) {
        self.report.not_removed.push(NotRemoved {
            kind,
            path: path.to_path_buf(),
            owner: fsutil::owner_of(path),
            reason: err.to_string(),
        });
    }
}

/// Drops this user's stamp table lines of blobs that are gone, and removes every per-blob stamp of
/// the earlier layout (`stamps/<uid>/<2hex>/<blob>`) this user can reach whose blob is gone:
/// those of the blobs this GC deleted and any a killed run left, through the sweeper (counted in
/// `bytes_freed` like every removal, a failure reported). `present` names the blob files left in
/// `blobs/` (GC's listing less what it removed): no blob is looked up again. A stamp left behind
/// costs nothing but a file (a new blob of that name has another inode, so the stale stamp only
/// makes its first link re-hash it). Another user's stamps sit in their 0700 directory: theirs (or
/// root's) to collect. Stamp temp files (`.stamp-*`) are left alone.
pub(super) fn sweep_stamps(store: &Store, sweep: &mut Sweeper<'_>, present: &HashSet<String>) {
    // This user's stamp table (`crate::stamps`): rewritten without the blobs that are gone.
    sweep.report.bytes_freed += store.forget_stamps_of_missing_blobs(present);
    let readable = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten();
    for user in readable(&store.dir.join(STAMPS)) {
        for shard in readable(&user.path()) {
            let shard_name = shard.file_name();
            for entry in readable(&shard.path()) {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') {
                    continue;
                }
                // A blob lives in the shard named by its first two characters.
                let kept = name.as_bytes().get(..2) == Some(shard_name.as_encoded_bytes())
                    && present.contains(name.as_ref());
                if !kept {
                    sweep.remove_file("blob stamp", &entry.path());
                }
            }
        }
    }
}

/// One warning per owner of what could not be removed (with the remedy), and one per failure.
pub(super) fn not_removed_warnings(not_removed: &[NotRemoved], dry: bool) -> Vec<String> {
    let me = fsutil::euid();
    let mut by_owner: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for item in not_removed {
        match item.owner {
            Some(owner) if owner != me && item.reason.starts_with("it belongs to uid") => {
                *by_owner.entry(owner).or_insert(0) += 1;
            }
            _ => out.push(format!(
                "warning: could not remove {} {}: {}",
                item.kind,
                item.path.display(),
                item.reason
            )),
        }
    }
    let verb = if dry {
        "would not remove"
    } else {
        "did not remove"
    };
    for (owner, count) in by_owner {
        out.insert(
            0,
            format!(
                "warning: {verb} {count} unused item(s) of uid {owner} (store paths, blobs, roots or leftovers it made): only their owner or root may remove them in a shared store; run `agentpack gc` as that user, or as root (the store's administrator) to collect the whole store"
            ),
        );
    }
    out
}

/// Allocated bytes (what `du` counts) of what removing the tree at `root` gives back: its directories
/// and the inodes whose every link but `extra` is a name in the tree (`nlink <= names + extra`;
/// a symlink shared by several agent trees of a generation is one inode with several names there),
/// each counted once.
pub(super) fn tree_bytes(root: &Path, extra: u64) -> u64 {
    let mut total = 0;
    // Inodes with several links: (names seen in the tree, links, blocks).
    let mut linked: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if let Ok(meta) = entry.metadata() {
            let bytes = meta.blocks() * 512;
            if meta.is_dir() || meta.nlink() == 1 {
                total += bytes;
            } else {
                linked
                    .entry(meta.ino())
                    .or_insert((0, meta.nlink(), bytes))
                    .0 += 1;
            }
        }
    }
    total
        + linked
            .values()
            .filter(|(names, links, _)| *links <= names + extra)
            .map(|(_, _, bytes)| bytes)
            .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocated(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn an_inode_named_only_inside_the_tree_is_counted_once_and_one_named_outside_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("a")).unwrap();
        // A symlink with two names in the tree, its target long enough for a block on ext4.
        let target = "/a/target/long/enough/to/need/a/block/of/its/own/on/ext4/skills/x";
        std::os::unix::fs::symlink(target, tree.join("a/first")).unwrap();
        std::fs::hard_link(tree.join("a/first"), tree.join("second")).unwrap();
        // A file whose other name is outside the tree (a blob): removing the tree frees nothing.
        std::fs::write(dir.path().join("blob"), vec![7u8; 10_000]).unwrap();
        std::fs::hard_link(dir.path().join("blob"), tree.join("a/file")).unwrap();

        let expected =
            allocated(&tree) + allocated(&tree.join("a")) + allocated(&tree.join("second"));
        assert_eq!(tree_bytes(&tree, 0), expected);
        // With the outside name counted as `extra`, the file's blocks are freed too.
        assert_eq!(
            tree_bytes(&tree, 1),
            expected + allocated(&tree.join("a/file"))
        );
    }
}
