//! What this user remembers of the packages other users published and this user verified: for
//! each store path, a digest of the inodes of its tree (every entry's path, type, inode number,
//! size, mtime and ctime) taken right before its content was re-hashed.
//!
//! A later handle of the same user whose walk of the tree gives the same digest uses the package
//! without reading its bytes again: a write moves the file's ctime, a replaced or renamed entry
//! changes its inode or its directory's ctime, so any change since the check costs one re-hash.
//! The table is `stamps/<uid>/trees`, one line `<store path name> <digest>` per verification,
//! appended in one write; the last line of a name wins, lines of paths gc removed are left (they
//! cost a line and match nothing). Never decides what is intact (`publish::package` does) and never
//! writes anything but the table.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::names::StorePathName;

/// The file name of a user's tree table inside `stamps/<uid>/`.
const TREE_TABLE: &str = "trees";

/// The digest of the inodes of the tree at `root` (links not followed); `None` when it cannot be
/// walked (then nothing is remembered and the tree is re-hashed).
pub(crate) fn tree_stamp(root: &Path) -> Option<String> {
    let mut hasher = blake3::Hasher::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = entry.ok()?;
        let meta = entry.metadata().ok()?;
        let relative = entry.path().strip_prefix(root).ok()?;
        hasher.update(relative.as_os_str().as_encoded_bytes());
        let kind = if meta.is_dir() {
            'd'
        } else if meta.file_type().is_symlink() {
            'l'
        } else {
            'f'
        };
        let line = format!(
            "\0{kind} {} {} {} {} {} {} {}\n",
            meta.ino(),
            meta.size(),
            meta.mode(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        hasher.update(line.as_bytes());
    }
    Some(hasher.finalize().to_hex().to_string())
}

/// This handle's view of the user's tree table: read on first use.
#[derive(Debug, Default)]
pub(crate) struct TreeStamps(Mutex<Option<Loaded>>);

#[derive(Debug)]
struct Loaded {
    table: PathBuf,
    stamps: HashMap<String, String>,
}

impl TreeStamps {
    /// Whether this user verified store path `name` when its tree looked like `stamp`.
    pub(crate) fn matches(&self, user_dir: &Path, name: &StorePathName, stamp: &str) -> bool {
        let Ok(mut state) = self.0.lock() else {
            return false;
        };
        let loaded = state.get_or_insert_with(|| load(user_dir.join(TREE_TABLE)));
        loaded
            .stamps
            .get(name.as_str())
            .is_some_and(|known| known == stamp)
    }

    /// Remembers that store path `name` was verified when its tree looked like `stamp`. Best
    /// effort: a line that cannot be written only costs the next handle a re-hash. `user_dir`
    /// must exist (`Store::ensure_user_stamps_dir` makes it with the right modes).
    pub(crate) fn record(&self, user_dir: &Path, name: &StorePathName, stamp: String) {
        let Ok(mut state) = self.0.lock() else {
            return;
        };
        let loaded = state.get_or_insert_with(|| load(user_dir.join(TREE_TABLE)));
        let line = format!("{} {stamp}\n", name.as_str());
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&loaded.table)
            .and_then(|mut file| file.write_all(line.as_bytes()))
            .is_ok();
        if appended {
            loaded.stamps.insert(name.as_str().to_string(), stamp);
        }
    }
}

fn load(table: PathBuf) -> Loaded {
    let mut stamps = HashMap::new();
    // A table this user does not own is not theirs to trust (as for the blob stamp table).
    let text = std::fs::read_to_string(&table)
        .ok()
        .filter(|_| crate::fsutil::owner_of(&table) == Some(crate::fsutil::euid()));
    if let Some(text) = text {
        for line in text.lines() {
            if let Some((name, stamp)) = line.split_once(' ') {
                stamps.insert(name.to_string(), stamp.to_string());
            }
        }
    }
    Loaded { table, stamps }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_stamp_changes_with_an_edit_a_replacement_or_a_new_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tree");
        std::fs::create_dir_all(root.join("skills/a")).unwrap();
        std::fs::write(root.join("skills/a/SKILL.md"), "one").unwrap();
        let first = tree_stamp(&root).unwrap();
        assert_eq!(
            tree_stamp(&root).unwrap(),
            first,
            "a walk alone changes nothing"
        );

        std::fs::write(root.join("skills/a/SKILL.md"), "two").unwrap();
        let edited = tree_stamp(&root).unwrap();
        assert_ne!(edited, first, "an edit in place");

        std::fs::remove_file(root.join("skills/a/SKILL.md")).unwrap();
        std::fs::write(root.join("skills/a/SKILL.md"), "two").unwrap();
        assert_ne!(tree_stamp(&root).unwrap(), edited, "a replaced file");

        let replaced = tree_stamp(&root).unwrap();
        std::fs::write(root.join("skills/a/extra.md"), "x").unwrap();
        assert_ne!(tree_stamp(&root).unwrap(), replaced, "a new file");
    }

    #[test]
    fn a_recorded_stamp_is_found_by_the_next_handle_and_the_last_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let user_dir = dir.path().join("stamps/1000");
        std::fs::create_dir_all(&user_dir).unwrap();
        let name = StorePathName::from_inputs_for(b"a package", "pkg", 1000);
        let first = TreeStamps::default();
        assert!(!first.matches(&user_dir, &name, "s1"));
        first.record(&user_dir, &name, "s1".into());
        assert!(first.matches(&user_dir, &name, "s1"));

        let next = TreeStamps::default();
        assert!(next.matches(&user_dir, &name, "s1"), "read from the table");
        next.record(&user_dir, &name, "s2".into());
        let third = TreeStamps::default();
        assert!(third.matches(&user_dir, &name, "s2"));
        assert!(!third.matches(&user_dir, &name, "s1"));
        let mode = std::fs::metadata(user_dir.join(TREE_TABLE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
