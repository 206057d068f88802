//! The small file helpers every suite repeated: write a file with its parents, an executable
//! script, a copied tree, a skill's `SKILL.md`, a fixture plugin, and where the workspace's example
//! packages are, a digest of trees to show a command changed nothing in them, and a sealed store
//! tree made writable again so a test can edit or remove it.
//!
//! Test-only: they panic on failure (a failed setup is a failed test).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// Writes `text` at `path`, creating the parent directories.
pub fn write<T: AsRef<[u8]> + ?Sized>(path: &Path, text: &T) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, text.as_ref()).unwrap();
}

/// Writes `text` at `root/relative`, creating the parent directories; returns the path.
pub fn write_in<T: AsRef<[u8]> + ?Sized>(root: &Path, relative: &str, text: &T) -> PathBuf {
    let path = root.join(relative);
    write(&path, text);
    path
}

/// Writes `text` at `path` (parents created) with mode 0755.
pub fn write_executable<T: AsRef<[u8]> + ?Sized>(path: &Path, text: &T) {
    write(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The `SKILL.md` of a skill called `name`: frontmatter with its name and a description, one line
/// of body.
pub fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: the {name} skill\n---\nUse {name}.\n")
}

/// The workspace's `examples/` directory (the example packages the docs use).
///
/// Found from the `CARGO_MANIFEST_DIR` cargo sets when it runs a test (the crate under test):
/// the `examples/` of the workspace root above it, falling back to this crate's own directory at
/// build time: one target directory may serve several checkouts (CI keeps it outside the clone), and a test
/// built in one must read the examples of the checkout it runs in.
pub fn examples_dir() -> PathBuf {
    let at_run_time = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    at_run_time
        .iter()
        .flat_map(|crate_dir| crate_dir.ancestors())
        // The workspace root (it holds `Cargo.lock`), never a crate's own cargo `examples/`.
        .find(|dir| dir.join("Cargo.lock").is_file() && dir.join("examples").is_dir())
        .map(|root| root.join("examples"))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"))
}

/// Copies the directory tree `from` to `to` (created): directories and regular files, with the
/// files' permissions (`std::fs::copy`).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The smallest fixture plugin, in `root`: `.claude-plugin/plugin.json` naming it `demo` 1.0.0, and
/// one skill `demo-skill` (`skills/demo-skill/SKILL.md`) with `description` and the body
/// `Say DEMO.`.
pub fn demo_plugin(root: &Path, description: &str) {
    write(
        &root.join(".claude-plugin/plugin.json"),
        r#"{"name": "demo", "version": "1.0.0"}"#,
    );
    write(
        &root.join("skills/demo-skill/SKILL.md"),
        &format!("---\nname: demo-skill\ndescription: {description}\n---\nSay DEMO.\n"),
    );
}

/// A digest of every entry under `roots`: relative path, type, permission bits, file bytes and
/// symlink targets (links are not followed). Modification times are left out; access times too.
pub fn tree_digest(roots: &[&Path]) -> String {
    let mut digest = Sha256::new();
    for root in roots {
        digest.update(format!("root {}\n", root.display()));
        let mut pending = vec![root.to_path_buf()];
        let mut lines = Vec::new();
        while let Some(path) = pending.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                lines.push(format!("absent {}", path.display()));
                continue;
            };
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                lines.push(format!("l {relative} {mode:o} -> {}", target.display()));
            } else if meta.is_dir() {
                lines.push(format!("d {relative} {mode:o}"));
                for entry in std::fs::read_dir(&path).unwrap() {
                    pending.push(entry.unwrap().path());
                }
            } else {
                let bytes = std::fs::read(&path).unwrap();
                lines.push(format!(
                    "f {relative} {mode:o} {:x}",
                    Sha256::digest(&bytes)
                ));
            }
        }
        lines.sort();
        for line in lines {
            digest.update(line.as_bytes());
            digest.update(b"\n");
        }
    }
    format!("{:x}", digest.finalize())
}

/// Makes the tree at `root` writable by its owner again (directories 0755, files gain the owner's
/// write bit and keep the rest: a file may be a hard link of something else, such as the binary
/// under test; links are left alone and not followed): store paths are sealed read-only, and a
/// test that edits or removes one, or the temporary directory holding it, needs this first.
/// Entries it cannot reach are skipped.
pub fn make_writable(root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = if meta.is_dir() {
            0o755
        } else {
            meta.permissions().mode() | 0o200
        };
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|entry| entry.path()));
            }
        }
    }
}
