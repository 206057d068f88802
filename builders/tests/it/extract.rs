//! The extraction rules, with hand-crafted (malicious) archives.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agentpack_builders::extract::{
    copy_package_tree, extract_github_tarball, link_stays_inside, ExtractError,
};
use agentpack_test_support::{gzip, RawTar};
use tar::EntryType;

fn extract(
    bytes: Vec<u8>,
) -> (
    tempfile::TempDir,
    Result<agentpack_builders::extract::ExtractReport, ExtractError>,
) {
    let dir = tempfile::tempdir().unwrap();
    let result = extract_github_tarball(&bytes[..], &dir.path().join("out"));
    (dir, result)
}

fn listing(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            let kind = if e.file_type().is_symlink() {
                format!("l:{}", std::fs::read_link(e.path()).unwrap().display())
            } else if e.file_type().is_dir() {
                "d".to_owned()
            } else {
                format!("f:{:o}", e.metadata().unwrap().permissions().mode() & 0o777)
            };
            format!("{rel} {kind}")
        })
        .collect();
    names.sort();
    names
}

#[test]
fn regular_files_are_0644_and_clean_links_are_kept() {
    let archive = RawTar::new()
        .dir("acme-x-1234567/")
        .file_mode("acme-x-1234567/bin/run.sh", "#!/bin/sh\n", 0o755)
        .file("acme-x-1234567/engineering/skills/x/SKILL.md", "skill")
        .symlink(
            "acme-x-1234567/.codex/skills/x",
            "../../engineering/skills/x",
        )
        .symlink("acme-x-1234567/abs", "/etc/passwd")
        .symlink("acme-x-1234567/escape", "../../outside")
        .symlink("acme-x-1234567/dotted", "./bin/run.sh")
        .finish_gz();
    let (dir, result) = extract(archive);
    let report = result.unwrap();
    let out = dir.path().join("out");
    assert_eq!(
        listing(&out),
        vec![
            ".codex d",
            ".codex/skills d",
            ".codex/skills/x l:../../engineering/skills/x",
            "abs f:644",
            "bin d",
            "bin/run.sh f:644",
            "dotted f:644",
            "engineering d",
            "engineering/skills d",
            "engineering/skills/x d",
            "engineering/skills/x/SKILL.md f:644",
            "escape f:644",
        ]
    );
    assert_eq!(std::fs::metadata(out.join("abs")).unwrap().len(), 0);
    assert_eq!(report.links_kept, 1);
    assert_eq!(report.links_emptied, vec!["abs", "escape", "dotted"]);
}

#[test]
fn link_rule() {
    assert!(link_stays_inside("a/b/link", "../c"));
    assert!(link_stays_inside("a/link", "../c/d"));
    assert!(!link_stays_inside("link", "../c"));
    assert!(!link_stays_inside("a/link", "/abs"));
    assert!(!link_stays_inside("a/link", "b//c"));
    assert!(!link_stays_inside("a/link", ""));
}

#[test]
fn dot_dot_and_absolute_paths_are_refused() {
    for name in ["top/../../evil", "/top/evil", "top/a/../../../evil"] {
        let (dir, result) = extract(RawTar::new().file(name, "x").finish_gz());
        assert!(
            matches!(result, Err(ExtractError::UnsafePath { .. })),
            "{name}: {result:?}"
        );
        assert!(!dir.path().join("evil").exists());
    }
}

#[test]
fn nothing_is_written_through_a_link() {
    let outside = tempfile::tempdir().unwrap();
    let archive = RawTar::new()
        .symlink("top/dir", "sub")
        .dir("top/sub")
        .file("top/dir/file", "through")
        .finish_gz();
    let (_dir, result) = extract(archive);
    assert!(
        matches!(result, Err(ExtractError::ThroughLink { .. })),
        "{result:?}"
    );

    // An escaping link is an empty file, so writing below it is refused and nothing lands outside.
    let target = outside.path().display().to_string();
    let archive = RawTar::new()
        .symlink("top/out", &target)
        .file("top/out/pwned", "x")
        .finish_gz();
    let (_dir, result) = extract(archive);
    assert!(result.is_err(), "{result:?}");
    assert!(!outside.path().join("pwned").exists());
}

#[test]
fn hard_links_devices_and_fifos_are_refused() {
    let (_d, result) = extract(
        RawTar::new()
            .file("top/a", "x")
            .hardlink("top/b", "top/a")
            .finish_gz(),
    );
    match result {
        Err(error @ ExtractError::HardLink { .. }) => {
            assert!(error.to_string().contains("top/b"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    for (kind, word) in [
        (EntryType::Char, "character device"),
        (EntryType::Block, "block device"),
        (EntryType::Fifo, "FIFO"),
    ] {
        let (_d, result) = extract(RawTar::new().special("top/dev", kind).finish_gz());
        match result {
            Err(error @ ExtractError::SpecialFile { .. }) => {
                assert!(error.to_string().contains(word), "{error}")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn non_utf8_names_are_refused() {
    let (_d, result) = extract(
        RawTar::new()
            .file(b"top/caf\xe9".as_slice(), "x")
            .finish_gz(),
    );
    assert!(
        matches!(result, Err(ExtractError::NonUtf8Name { .. })),
        "{result:?}"
    );
}

#[test]
fn declared_size_beyond_the_data_is_refused() {
    let bytes =
        RawTar::new()
            .file("top/ok", "fine")
            .truncated_file("top/big", 10_000, b"short".as_slice());
    let (_d, result) = extract(gzip(&bytes));
    assert!(
        matches!(
            result,
            Err(ExtractError::Truncated {
                declared: 10_000,
                ..
            }) | Err(ExtractError::Archive { .. })
        ),
        "{result:?}"
    );
}

#[test]
fn more_than_one_top_level_directory_is_refused() {
    let (_d, result) = extract(
        RawTar::new()
            .file("one/a", "x")
            .file("two/b", "y")
            .finish_gz(),
    );
    assert!(
        matches!(result, Err(ExtractError::NotOneTopLevel { .. })),
        "{result:?}"
    );
    let (_d, result) = extract(b"not a gzip at all".to_vec());
    assert!(
        matches!(result, Err(ExtractError::Archive { .. })),
        "{result:?}"
    );
}

#[test]
fn package_copies_keep_only_links_inside_the_package() {
    let archive = RawTar::new()
        .file("top/shared/doc.md", "shared")
        .file("top/pkg/SKILL.md", "skill")
        .file("top/pkg/ref/a.md", "a")
        .symlink("top/pkg/inside", "ref/a.md")
        .symlink("top/pkg/outside", "../shared/doc.md")
        .finish_gz();
    let (dir, result) = extract(archive);
    result.unwrap();
    let package = dir.path().join("package");
    let report = copy_package_tree(&dir.path().join("out"), "pkg", &package).unwrap();
    assert_eq!(
        listing(&package),
        vec![
            "SKILL.md f:644",
            "inside l:ref/a.md",
            "outside f:644",
            "ref d",
            "ref/a.md f:644"
        ]
    );
    assert_eq!(report.links_emptied, vec!["outside"]);
}

#[test]
fn a_later_entry_of_the_same_name_replaces_the_earlier_one_but_never_a_directory() {
    let archive = RawTar::new()
        .file("top/a", "one")
        .file("top/a", "two")
        .symlink("top/l", "a")
        .file("top/l", "no longer a link")
        .file("top/f", "no longer a file")
        .symlink("top/f", "a")
        .symlink("top/escape", "/etc/passwd")
        .symlink("top/escape", "/etc/shadow")
        .finish_gz();
    let (dir, result) = extract(archive);
    let report = result.unwrap();
    let out = dir.path().join("out");
    assert_eq!(
        listing(&out),
        vec!["a f:644", "escape f:644", "f l:a", "l f:644"]
    );
    assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "two");
    assert_eq!(
        std::fs::read_to_string(out.join("l")).unwrap(),
        "no longer a link"
    );
    assert_eq!(report.links_kept, 2);

    // A file or a link where a directory is: refused, the directory left as it was.
    for second in [
        RawTar::new()
            .dir("top/d")
            .file("top/d/x", "x")
            .file("top/d", "file"),
        RawTar::new()
            .dir("top/d")
            .file("top/d/x", "x")
            .symlink("top/d", "x"),
    ] {
        let (dir, result) = extract(second.finish_gz());
        assert!(
            matches!(result, Err(ExtractError::Conflict { .. })),
            "{result:?}"
        );
        assert!(dir.path().join("out/d/x").is_file());
    }
}
