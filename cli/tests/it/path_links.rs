//! Symbolic links in a path dependency, through the real `agentpack` binary: the copy follows the
//! extraction rule of a published package (in-package clean relative links kept as links, any other
//! link an empty file), every link that cannot be followed is named in a warning on `add`, `lock` and
//! `sync`, the locked content hash (with its `l` records) verifies on the next sync, and a second sync
//! changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};

use agentpack_test_support::{skill_md, write_in, IsolatedHome};
use sha2::{Digest, Sha256};

/// Runs `agentpack args`, asserts success and returns stderr.
fn ok(home: &IsolatedHome, args: &[&str]) -> String {
    home.ok(args).stderr
}

/// The value of `field` in the `[[packages]]` entry of `module`.
fn lock_field(lock: &str, module: &str, field: &str) -> String {
    let entry = lock
        .split("[[packages]]")
        .find(|entry| entry.contains(&format!("module = \"{module}\"")))
        .unwrap_or_else(|| panic!("no entry for {module} in\n{lock}"));
    let prefix = format!("{field} = \"");
    let line = entry
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {field} in {entry}"));
    line[prefix.len()..line.len() - 1].to_owned()
}

/// `sha256-tree-v1` as the docs spell it out, written independently of the store crate.
fn sha256_tree_v1(root: &Path) -> String {
    fn walk(root: &Path, dir: &Path, records: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let file_type = entry.file_type().unwrap();
            if file_type.is_dir() {
                walk(root, &entry.path(), records);
            } else {
                let relative = entry.path().strip_prefix(root).unwrap().to_owned();
                records.push((relative.to_str().unwrap().to_owned(), entry.path()));
            }
        }
    }
    use std::os::unix::fs::PermissionsExt;
    let mut records = Vec::new();
    walk(root, root, &mut records);
    records.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut digest = Sha256::new();
    for (relative, path) in records {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let (kind, payload) = if meta.file_type().is_symlink() {
            (
                "l",
                std::fs::read_link(&path)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .as_bytes()
                    .to_vec(),
            )
        } else if meta.permissions().mode() & 0o111 != 0 {
            ("x", std::fs::read(&path).unwrap())
        } else {
            ("f", std::fs::read(&path).unwrap())
        };
        digest.update(kind.as_bytes());
        digest.update(b"\0");
        digest.update(relative.as_bytes());
        digest.update(b"\0");
        digest.update(payload.len().to_string().as_bytes());
        digest.update(b"\0");
        digest.update(&payload);
    }
    format!("sha256-tree-v1:{}", hex::encode(digest.finalize()))
}

struct Fixture {
    home: IsolatedHome,
    package: PathBuf,
    outside: PathBuf,
}

/// The reviewer's package: `skills/escape -> /abs/outside`, `skills/loop/self -> ../loop`,
/// `skills/inside -> ../skills/dup`, plus `skills/linked -> ../engineering/linked`, beside the
/// project as `../pkg3`.
fn fixture() -> Fixture {
    let home = IsolatedHome::new();
    let parent = home.project.parent().unwrap().to_path_buf();
    let outside = parent.join("outside");
    write_in(&outside, "SKILL.md", &skill_md("outside"));
    let package = parent.join("pkg3");
    write_in(&package, "skills/dup/SKILL.md", &skill_md("dup"));
    write_in(&package, "skills/loop/SKILL.md", &skill_md("loop"));
    std::os::unix::fs::symlink(&outside, package.join("skills/escape")).unwrap();
    std::os::unix::fs::symlink("../loop", package.join("skills/loop/self")).unwrap();
    std::os::unix::fs::symlink("../skills/dup", package.join("skills/inside")).unwrap();
    // How a package points one directory at another: a skill that lives elsewhere in the package.
    write_in(&package, "engineering/linked/SKILL.md", &skill_md("linked"));
    std::os::unix::fs::symlink("../engineering/linked", package.join("skills/linked")).unwrap();
    Fixture {
        home,
        package,
        outside,
    }
}

fn assert_names_the_links(stderr: &str, fixture: &Fixture) {
    let escape = format!(
        "symbolic link skills/escape -> {} is absolute",
        fixture.outside.display()
    );
    assert!(
        stderr.contains(&escape),
        "no warning names escape:\n{stderr}"
    );
    assert!(
        stderr.contains("symbolic link skills/loop/self -> ../loop loops"),
        "no warning names loop:\n{stderr}"
    );
    for fine in ["skills/inside", "skills/linked"] {
        assert!(
            !stderr.contains(&format!("symbolic link {fine}")),
            "the in-package link {fine} is fine:\n{stderr}"
        );
    }
}

#[test]
fn path_package_links_are_kept_inside_reported_outside_and_verify_on_the_next_sync() {
    let fixture = fixture();
    let home = &fixture.home;
    ok(home, &["init", "--name", "demo"]);

    let stderr = ok(home, &["add", "../pkg3"]);
    assert_names_the_links(&stderr, &fixture);
    assert_eq!(
        stderr.matches("symbolic link skills/escape").count(),
        1,
        "add resolves, then syncs: each warning is printed once:\n{stderr}"
    );
    assert!(
        stderr.contains("pkg3 ("),
        "the warning names the package:\n{stderr}"
    );

    // The store copy: the in-package link kept, the absolute one an empty file, nothing read outside.
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    let cache_key = lock_field(&lock, "pkg3", "cache_key");
    let content_hash = lock_field(&lock, "pkg3", "content_hash");
    let slot = home.agentpack_home.join("cache").join(&cache_key);
    assert_eq!(
        std::fs::read_link(slot.join("skills/inside")).unwrap(),
        Path::new("../skills/dup")
    );
    assert_eq!(
        std::fs::read_link(slot.join("skills/loop/self")).unwrap(),
        Path::new("../loop")
    );
    let escape = std::fs::symlink_metadata(slot.join("skills/escape")).unwrap();
    assert!(escape.is_file() && escape.len() == 0, "{escape:?}");
    assert!(slot.join("skills/dup/SKILL.md").is_file());
    assert!(!slot.join("skills/escape/SKILL.md").exists());

    // The locked hash is the documented digest of that copy, l records included.
    assert_eq!(content_hash, sha256_tree_v1(&slot));

    // A skill reached through an in-package link is staged; nothing from outside is.
    let skills = home
        .staging_root
        .join("modes/default/plugins/agentpack-bundle/skills");
    for name in ["dup", "linked", "loop"] {
        assert!(
            skills.join(name).join("SKILL.md").is_file(),
            "{name} staged in {}",
            skills.display()
        );
    }
    assert!(!skills.join("escape").exists());
    assert!(!skills.join("outside").exists());

    // The next sync verifies the lock and changes nothing, but still names the links.
    let pointer = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    let stderr = ok(home, &["sync"]);
    assert_names_the_links(&stderr, &fixture);
    let stderr = ok(home, &["sync"]);
    assert_names_the_links(&stderr, &fixture);
    assert_eq!(
        std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
        lock,
        "a second sync rewrites nothing"
    );
    assert_eq!(
        std::fs::read_link(home.staging_root.join("modes/default")).unwrap(),
        pointer,
        "a second sync selects the same generation"
    );
    ok(home, &["sync", "--verify-only"]);

    // `lock` says it too; pointing the link inside the package silences it and moves the hash.
    let stderr = ok(home, &["lock"]);
    assert_names_the_links(&stderr, &fixture);
    std::fs::remove_file(fixture.package.join("skills/escape")).unwrap();
    std::os::unix::fs::symlink("loop", fixture.package.join("skills/escape")).unwrap();
    let stderr = ok(home, &["sync"]);
    assert!(
        !stderr.contains("skills/escape"),
        "a fixed link is not reported:\n{stderr}"
    );
    let relocked = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    let new_hash = lock_field(&relocked, "pkg3", "content_hash");
    assert_ne!(new_hash, content_hash, "the link's target is hashed");
    let slot = home
        .agentpack_home
        .join("cache")
        .join(lock_field(&relocked, "pkg3", "cache_key"));
    assert_eq!(new_hash, sha256_tree_v1(&slot));
    assert_eq!(
        std::fs::read_link(slot.join("skills/escape")).unwrap(),
        Path::new("loop")
    );
    let stderr = ok(home, &["sync"]);
    assert!(!stderr.contains("skills/escape"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
        relocked
    );
}

#[test]
fn a_locked_path_package_without_manifest_dependencies_warns_through_fetch() {
    // `sync` of a lock whose manifest lists nothing fetches the lock as it is (fetch_lock, not
    // resolve): the copy's warnings arrive through that path too.
    let fixture = fixture();
    let home = &fixture.home;
    ok(home, &["init", "--name", "demo"]);
    ok(home, &["add", "../pkg3"]);
    let manifest_path = home.project.join("agentpack.toml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    let without: String = manifest
        .lines()
        .filter(|line| !line.contains("pkg3"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(without, manifest, "{manifest}");
    std::fs::write(&manifest_path, without).unwrap();
    let stderr = ok(home, &["sync"]);
    assert_names_the_links(&stderr, &fixture);
}
