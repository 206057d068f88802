//! Shared helpers of the store's integration tests: fixture trees and stores under a temp dir.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agentpack_store::{LinkMode, Store, StoreOptions};

/// Write `content` at `root/relative`, creating parents.
pub fn write(root: &Path, relative: &str, content: &[u8]) -> PathBuf {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    path
}

/// Make a file executable.
pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A symlink at `root/relative` pointing to `target`.
pub fn symlink(root: &Path, relative: &str, target: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

/// A package-like tree with nested dirs, an exec file, an empty file, an in-package link to a dir,
/// and an empty directory.
pub fn package_tree(root: &Path, variant: &str) {
    write(root, "SKILL.md", format!("# skill {variant}\n").as_bytes());
    write(root, "shared.txt", b"the same in every variant\n");
    let script = write(root, "scripts/run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&script, 0o755);
    write(root, "empty.txt", b"");
    write(root, "engineering/skills/x/SKILL.md", b"x\n");
    symlink(root, ".codex/skills/x", "../../engineering/skills/x");
    std::fs::create_dir_all(root.join("empty-dir")).unwrap();
    write(root, "big.bin", &vec![variant.len() as u8; 300 * 1024]);
}

/// Open a store in `dir/cache` with a link mode, flushing disabled for speed unless asked.
pub fn open_store(dir: &Path, mode: LinkMode) -> Store {
    Store::open(
        &dir.join("cache"),
        StoreOptions {
            link_mode: Some(mode),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// Make every directory under `root` writable (so a temp dir holding a store can be removed).
pub fn unseal(root: &Path) {
    for entry in walkdir_dirs(root) {
        let _ = std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755));
    }
}

fn walkdir_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        out.push(dir.clone());
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                stack.push(entry.path());
            }
        }
    }
    out
}

/// A temp dir that unseals itself before removal.
pub struct TestDir(pub tempfile::TempDir);

impl TestDir {
    pub fn new() -> Self {
        TestDir(tempfile::tempdir().unwrap())
    }
    pub fn in_dir(parent: &Path) -> Self {
        TestDir(tempfile::tempdir_in(parent).unwrap())
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        unseal(self.0.path());
    }
}
