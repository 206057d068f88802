//! Path dependencies and the local/ mirror: regular files only, git-ignored files left out, dirhash40.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use agentpack_builders::local_package::{
    copy_local_mirror_package, copy_path_package, dirhash40, LocalPackageError,
};
use agentpack_lockfile::keys::{local_cache_key, path_cache_key};
use sha2::{Digest, Sha256};

fn write(root: &std::path::Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn path_packages_copy_regular_files_without_ignored_ones() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("rules");
    write(&src, "a.txt", "A");
    write(&src, "a/b", "B");
    write(&src, ".gitignore", "secret.env\nbuild/\n");
    write(&src, "secret.env", "TOKEN=1");
    write(&src, "build/out.bin", "x");
    write(&src, ".git/HEAD", "ref: refs/heads/main");
    write(&src, "run.sh", "#!/bin/sh");
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();

    let out = dir.path().join("out");
    let copy = copy_path_package("rules", &src, &out).unwrap();
    let mut names: Vec<String> = walkdir::WalkDir::new(&out)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_type().is_dir())
        .map(|e| e.path().strip_prefix(&out).unwrap().display().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec![".gitignore", "a.txt", "a/b", "run.sh"]);
    assert_eq!(
        std::fs::metadata(out.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );

    // dirhash40 by hand: sorted bytewise, `a.txt` before `a/b`.
    let mut hasher = Sha256::new();
    for (path, bytes) in [
        (".gitignore", "secret.env\nbuild/\n"),
        ("a.txt", "A"),
        ("a/b", "B"),
        ("run.sh", "#!/bin/sh"),
    ] {
        hasher.update(path.as_bytes());
        hasher.update(b"\0");
        hasher.update(bytes.as_bytes());
    }
    let expected = hex::encode(hasher.finalize())[..40].to_owned();
    assert_eq!(copy.dirhash40, expected);
    assert_eq!(dirhash40("rules", &src).unwrap(), expected);
    let canonical = std::fs::canonicalize(&src).unwrap();
    assert_eq!(copy.cache_key, path_cache_key(&canonical, &expected));

    // An edit changes the hash.
    write(&src, "a.txt", "A2");
    assert_ne!(dirhash40("rules", &src).unwrap(), expected);
}

#[test]
fn missing_directories_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let error = copy_path_package(
        "local-rules",
        &dir.path().join("nope"),
        &dir.path().join("out"),
    )
    .unwrap_err();
    assert!(matches!(error, LocalPackageError::Missing { .. }));
    assert!(
        error.to_string().contains("local-rules") && error.to_string().contains("nope"),
        "{error}"
    );
}

#[test]
fn the_local_mirror_is_keyed_by_spec() {
    let home = tempfile::tempdir().unwrap();
    write(home.path(), "local/acme/skills/canvas/SKILL.md", "skill");
    let out = home.path().join("out");
    let copy = copy_local_mirror_package(
        "github.com/acme/skills/canvas",
        home.path(),
        "acme/skills/canvas",
        &out,
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("SKILL.md")).unwrap(),
        "skill"
    );
    assert_eq!(
        copy.cache_key,
        local_cache_key("acme/skills/canvas", &copy.dirhash40)
    );
}
