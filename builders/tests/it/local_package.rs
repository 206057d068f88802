//! Path dependencies and the local/ mirror: copied by the extraction rules (in-package links kept,
//! other links emptied and reported), git-ignored files left out, dirhash40 over regular files.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use agentpack_builders::local_package::{
    copy_local_mirror_package, copy_path_package, dirhash40, LinkIssue, LocalPackageError,
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
    assert_eq!(names, vec![".gitignore", "a.txt", "a/b", "link", "run.sh"]);
    assert_eq!(
        std::fs::read_link(out.join("link")).unwrap(),
        std::path::Path::new("a.txt")
    );
    assert_eq!(copy.links, 1);
    assert!(copy.skipped_links.is_empty(), "{:?}", copy.skipped_links);
    assert_eq!(
        std::fs::metadata(out.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );

    // dirhash40 by hand: regular files only (the link is not a record), sorted bytewise, `a.txt`
    // before `a/b`.
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

fn listing(root: &std::path::Path) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let relative = e.path().strip_prefix(root).unwrap().display().to_string();
            let what = if e.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(e.path()).unwrap().display())
            } else {
                format!("{} bytes", e.metadata().unwrap().len())
            };
            (relative, what)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn links_follow_the_extraction_rule_and_every_unfollowable_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    write(&outside, "secret.md", "not yours");
    let src = dir.path().join("pkg");
    write(&src, "skills/dup/SKILL.md", "---\nname: dup\n---\n");
    write(&src, "skills/loop/SKILL.md", "---\nname: loop\n---\n");
    write(&src, "engineering/skills/x/SKILL.md", "---\nname: x\n---\n");
    std::fs::create_dir_all(src.join(".codex/skills")).unwrap();
    let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, src.join(at)).unwrap();
    link(outside.to_str().unwrap(), "skills/escape");
    link("../loop", "skills/loop/self");
    link("../skills/dup", "skills/inside");
    link("../../outside", "skills/climb");
    link("./dup", "skills/dotted");
    link("../nothing", "skills/dangling");
    link("ping", "skills/pong");
    link("pong", "skills/ping");
    link("../../engineering/skills/x", ".codex/skills/x");
    use std::os::unix::ffi::OsStrExt;
    std::os::unix::fs::symlink(
        std::ffi::OsStr::from_bytes(b"dup\xff"),
        src.join("skills/binary"),
    )
    .unwrap();

    let out = dir.path().join("out");
    let copy = copy_path_package("github.com/acme/pkg", &src, &out).unwrap();

    // In-package clean relative links stay links, exactly as extraction keeps them; the others are
    // empty files, and nothing outside the package is read.
    assert_eq!(
        listing(&out),
        vec![
            (
                ".codex/skills/x".into(),
                "-> ../../engineering/skills/x".into()
            ),
            ("engineering/skills/x/SKILL.md".into(), "16 bytes".into()),
            ("skills/binary".into(), "0 bytes".into()),
            ("skills/climb".into(), "0 bytes".into()),
            ("skills/dangling".into(), "-> ../nothing".into()),
            ("skills/dotted".into(), "0 bytes".into()),
            ("skills/dup/SKILL.md".into(), "18 bytes".into()),
            ("skills/escape".into(), "0 bytes".into()),
            ("skills/inside".into(), "-> ../skills/dup".into()),
            ("skills/loop/SKILL.md".into(), "19 bytes".into()),
            ("skills/loop/self".into(), "-> ../loop".into()),
            ("skills/ping".into(), "-> pong".into()),
            ("skills/pong".into(), "-> ping".into()),
        ]
    );
    assert_eq!(copy.files, 3);
    assert_eq!(copy.links, 6);

    let reported: Vec<(&str, LinkIssue)> = copy
        .skipped_links
        .iter()
        .map(|l| (l.path.as_str(), l.issue))
        .collect();
    assert_eq!(
        reported,
        vec![
            ("skills/binary", LinkIssue::NonUtf8Target),
            ("skills/climb", LinkIssue::LeavesPackage),
            ("skills/dangling", LinkIssue::Dangling),
            ("skills/dotted", LinkIssue::NotClean),
            ("skills/escape", LinkIssue::Absolute),
            ("skills/loop/self", LinkIssue::Loops),
            ("skills/ping", LinkIssue::Loops),
            ("skills/pong", LinkIssue::Loops),
        ]
    );
    let warnings = copy.warnings("github.com/acme/pkg");
    assert_eq!(warnings.len(), 8);
    assert!(
        warnings[0].contains(
            "symbolic link skills/binary -> dup\u{fffd} has a target that is not valid UTF-8"
        ),
        "{}",
        warnings[0]
    );
    let escape = &warnings[4];
    assert!(
        escape.starts_with("github.com/acme/pkg (")
            && escape.contains(&format!(
                "symbolic link skills/escape -> {} is absolute",
                outside.display()
            ))
            && escape.contains("empty file"),
        "{escape}"
    );
    assert!(
        warnings[5].contains("skills/loop/self -> ../loop loops; kept as a link"),
        "{}",
        warnings[5]
    );

    // The same tree the package extracts to once published as a GitHub tarball (which refuses a
    // link target that is not UTF-8 outright, so that one is left out of the comparison).
    std::fs::remove_file(src.join("skills/binary")).unwrap();
    std::fs::remove_file(out.join("skills/binary")).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    builder.follow_symlinks(false);
    builder.append_dir_all("acme-pkg-abc123", &src).unwrap();
    let tarball = builder.into_inner().unwrap().finish().unwrap();
    let extracted = dir.path().join("extracted");
    agentpack_builders::extract::extract_github_tarball(tarball.as_slice(), &extracted).unwrap();
    assert_eq!(listing(&extracted), listing(&out));

    // The source was never written to.
    assert!(src.join("skills/escape").is_symlink());
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.md")).unwrap(),
        "not yours"
    );
}
