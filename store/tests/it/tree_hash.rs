//! `sha256-tree-v1` against the docs' Python reference (extended to record links to directories), and
//! the legacy verification rule.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;
use agentpack_test_support::skip;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use agentpack_store::{hash_tree, matches_tree_hash, Match, StoreError, TreeHash};
use common::{chmod, package_tree, symlink, write, TestDir};

/// The docs' reference implementation; the only changes: links to directories are recorded (os.walk
/// lists them under directory names) and paths/targets are encoded with os.fsencode (the same bytes as
/// `.encode()` for UTF-8 names, and defined for the others).
const REFERENCE: &str = r#"
import hashlib, os, stat, sys

def sha256_tree_v1(root):
    records = []
    for directory, dirnames, names in os.walk(root):
        links_to_dirs = [d for d in dirnames if os.path.islink(os.path.join(directory, d))]
        for name in names + links_to_dirs:
            path = os.path.join(directory, name)
            records.append((os.fsencode(os.path.relpath(path, root).replace(os.sep, "/")), path))
    digest = hashlib.sha256()
    for relative, path in sorted(records):
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            kind, payload = b"l", os.fsencode(os.readlink(path))
        elif stat.S_ISREG(mode):
            kind = b"x" if mode & 0o111 else b"f"
            payload = open(path, "rb").read()
        else:
            raise ValueError(f"unsupported file type: {path}")
        digest.update(kind + b"\0" + relative + b"\0" + str(len(payload)).encode() + b"\0" + payload)
    return "sha256-tree-v1:" + digest.hexdigest()

for root in sys.argv[1:]:
    print(sha256_tree_v1(root))
"#;

fn python_hashes(roots: &[&Path]) -> Option<Vec<String>> {
    let output = Command::new("python3")
        .arg("-c")
        .arg(REFERENCE)
        .args(roots)
        .output()
        .ok()?;
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

fn fixtures(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut roots = Vec::new();
    let mut next = |name: &str| {
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        roots.push(root.clone());
        root
    };
    // 1. A package: nested dirs, exec file, empty file, in-package link to a directory, empty dir.
    package_tree(&next("package"), "a");
    // 2. Bytewise sort: `a.txt` < `a/b` because '.' (0x2e) < '/' (0x2f); uppercase before lowercase.
    let root = next("sorting");
    for name in ["a.txt", "a/b", "a-b", "B", "a b", "\u{e9}.md", "a0", "Z/z"] {
        write(&root, name, name.as_bytes());
    }
    // 3. Links of every kind (never followed): absolute, dangling, to a file, to a directory, outside.
    let root = next("links");
    write(&root, "dir/file", b"f");
    symlink(&root, "abs", "/etc/passwd");
    symlink(&root, "dangling", "nowhere/at/all");
    symlink(&root, "to-file", "dir/file");
    symlink(&root, "to-dir", "dir");
    symlink(&root, "dir/up", "../../outside");
    // 4. Empty root and a root holding only empty directories.
    next("empty");
    let root = next("only-dirs");
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    // 5. Execute bits: any x bit makes an `x` record; other bits don't matter.
    let root = next("modes");
    for (name, mode) in [
        ("u", 0o744),
        ("g", 0o614),
        ("o", 0o601),
        ("plain", 0o600),
        ("ro", 0o400),
    ] {
        let path = write(&root, name, name.as_bytes());
        chmod(&path, mode);
    }
    // 6. Sizes: a streamed large file and many small files (parallel batches).
    let root = next("sizes");
    write(
        &root,
        "large.bin",
        &(0..2_500_000u32)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>(),
    );
    for i in 0..300 {
        write(
            &root,
            &format!("many/{i:03}.txt"),
            format!("file {i}\n").repeat(i % 7).as_bytes(),
        );
    }
    // 7. A name that is not UTF-8.
    let root = next("non-utf8");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(root.join(name), b"latin-1").unwrap();
    roots
}

#[test]
fn rust_and_python_reference_agree_on_every_fixture() {
    let dir = TestDir::new();
    let roots = fixtures(dir.path());
    let refs: Vec<&Path> = roots.iter().map(|r| r.as_path()).collect();
    let Some(expected) = python_hashes(&refs) else {
        skip("python3 is not available (install it: the reference hash is a Python script)");
        return;
    };
    assert_eq!(expected.len(), roots.len());
    for (root, expected) in roots.iter().zip(expected) {
        let actual = hash_tree(root).unwrap();
        assert_eq!(actual.to_string(), expected, "fixture {}", root.display());
        assert_eq!(matches_tree_hash(root, &actual).unwrap(), Match::Exact);
    }
}

#[test]
fn empty_tree_is_the_digest_of_nothing() {
    let dir = TestDir::new();
    assert_eq!(
        hash_tree(dir.path()).unwrap().to_string(),
        "sha256-tree-v1:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn what_changes_the_hash_and_what_does_not() {
    let dir = TestDir::new();
    let root = dir.path().join("t");
    package_tree(&root, "a");
    let base = hash_tree(&root).unwrap();
    // Timestamps, other permission bits and empty directories don't count.
    chmod(&root.join("SKILL.md"), 0o600);
    std::fs::create_dir_all(root.join("another/empty")).unwrap();
    assert_eq!(hash_tree(&root).unwrap(), base);
    // Moving the tree doesn't count.
    let moved = dir.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    assert_eq!(hash_tree(&moved).unwrap(), base);
    // A byte, an exec bit, a file swapped for a link do.
    write(&moved, "SKILL.md", b"# skill b\n");
    let edited = hash_tree(&moved).unwrap();
    assert_ne!(edited, base);
    chmod(&moved.join("SKILL.md"), 0o700);
    assert_ne!(hash_tree(&moved).unwrap(), edited);
    std::fs::remove_file(moved.join("shared.txt")).unwrap();
    symlink(&moved, "shared.txt", "SKILL.md");
    assert_ne!(hash_tree(&moved).unwrap(), edited);
}

#[test]
fn other_file_types_are_an_error() {
    let dir = TestDir::new();
    write(dir.path(), "ok", b"ok");
    nix::unistd::mkfifo(
        &dir.path().join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    match hash_tree(dir.path()) {
        Err(StoreError::UnsupportedFileType { path }) => assert!(path.ends_with("pipe")),
        other => panic!("expected an unsupported file type error, got {other:?}"),
    }
    assert!(
        hash_tree(&dir.path().join("ok")).is_err(),
        "the root must be a directory"
    );
}

#[test]
fn legacy_rule_accepts_in_package_links_hashed_as_empty_files() {
    let dir = TestDir::new();
    let current = dir.path().join("current");
    let legacy = dir.path().join("legacy");
    for root in [&current, &legacy] {
        write(root, "engineering/skills/x/SKILL.md", b"x\n");
        write(root, "README.md", b"readme\n");
    }
    symlink(&current, ".codex/skills/x", "../../engineering/skills/x");
    // 0.4.8 and earlier recorded the link as an empty regular file.
    write(&legacy, ".codex/skills/x", b"");
    let legacy_hash = hash_tree(&legacy).unwrap();
    let current_hash = hash_tree(&current).unwrap();
    assert_ne!(legacy_hash, current_hash);
    assert_eq!(
        matches_tree_hash(&current, &current_hash).unwrap(),
        Match::Exact
    );
    assert_eq!(
        matches_tree_hash(&current, &legacy_hash).unwrap(),
        Match::Legacy
    );
    // A link leaving the package is not in-package: the legacy rule does not apply to it.
    let outside = dir.path().join("outside");
    let outside_legacy = dir.path().join("outside-legacy");
    write(&outside, "a", b"a");
    write(&outside_legacy, "a", b"a");
    symlink(&outside, "escape", "../../etc");
    write(&outside_legacy, "escape", b"");
    let wrong = hash_tree(&outside_legacy).unwrap();
    assert_eq!(
        matches_tree_hash(&outside, &wrong).unwrap(),
        Match::Mismatch {
            actual: hash_tree(&outside).unwrap()
        }
    );
}

#[test]
fn tree_hash_text_round_trips_and_serializes() {
    let text = format!("sha256-tree-v1:{}", "0123456789abcdef".repeat(4));
    let hash: TreeHash = text.parse().unwrap();
    assert_eq!(serde_json::to_string(&hash).unwrap(), format!("\"{text}\""));
    assert!(TreeHash::try_from("sha256-tree-v1:XYZ").is_err());
}
