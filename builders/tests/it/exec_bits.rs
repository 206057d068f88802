//! Execute bits of the source are recorded, never written into the extracted tree (issue 13, Build 1):
//! the tree keeps the docs' hashing rule (`f` records), the report names the executable files.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;

use agentpack_builders::extract::{copy_package_tree_with_executables, extract_github_tarball};
use agentpack_builders::normalize::{normalize_package, NormalizeContext};
use agentpack_test_support::RawTar;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn tar_execute_bits_are_recorded_and_the_files_written_0644() {
    let dir = tempfile::tempdir().unwrap();
    let archive = RawTar::new()
        .dir("top/")
        .file_mode("top/pkg/hooks/run.sh", "#!/bin/sh\n", 0o755)
        .file_mode("top/pkg/only-user-x.sh", "#!/bin/sh\n", 0o744)
        .file("top/pkg/README.md", "r\n")
        .file_mode("top/other/tool.sh", "#!/bin/sh\n", 0o775)
        .finish_gz();
    let snapshot = dir.path().join("snapshot");
    let report = extract_github_tarball(&archive[..], &snapshot).unwrap();
    let expected: BTreeSet<String> = ["other/tool.sh", "pkg/hooks/run.sh", "pkg/only-user-x.sh"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(report.executables, expected);
    assert_eq!(mode(&snapshot.join("pkg/hooks/run.sh")), 0o644);

    // A package copied out of the snapshot keeps only its own, package-relative.
    let package = dir.path().join("package");
    let copied =
        copy_package_tree_with_executables(&snapshot, "pkg", &package, &report.executables)
            .unwrap();
    let expected: BTreeSet<String> = ["hooks/run.sh", "only-user-x.sh"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(copied.executables, expected);
    assert_eq!(mode(&package.join("hooks/run.sh")), 0o644);
}

#[test]
fn a_later_plain_entry_of_the_same_name_is_not_executable() {
    let dir = tempfile::tempdir().unwrap();
    let archive = RawTar::new()
        .dir("top/")
        .file_mode("top/run.sh", "old\n", 0o755)
        .file("top/run.sh", "new\n")
        .finish_gz();
    let report = extract_github_tarball(&archive[..], &dir.path().join("out")).unwrap();
    assert!(report.executables.is_empty(), "{:?}", report.executables);
}

#[test]
fn a_merged_single_plugin_marketplace_keeps_the_execute_bits_of_what_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("package");
    let write = |relative: &str, text: &str| {
        let path = package.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".claude-plugin/marketplace.json",
        r#"{"name": "m", "owner": {"name": "o"}, "plugins": [{"name": "p", "source": "./plugins/p"}]}"#,
    );
    write("plugins/p/.claude-plugin/plugin.json", r#"{"name": "p"}"#);
    write("plugins/p/hooks/run.sh", "#!/bin/sh\n");
    let report = normalize_package(
        &package,
        &NormalizeContext {
            module: "m",
            ..Default::default()
        },
    )
    .unwrap();
    let source: BTreeSet<String> = ["plugins/p/hooks/run.sh".to_owned()].into();
    let all = report.with_copied_executables(&source);
    assert!(all.contains("hooks/run.sh"), "{all:?} {report:?}");
    assert!(all.contains("plugins/p/hooks/run.sh"));
}
