//! One contract suite run under every link mode and on every filesystem we can get: ext4 (the test
//! dir), tmpfs (`/dev/shm`, a second device for cross-device fallbacks) and XFS with reflinks (a
//! loop-mounted image; skipped with a printed reason where `mount` is not permitted).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;
use agentpack_test_support::skip;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_store::{
    gc, hash_tree, info, verify, GcOptions, LinkMethod, LinkMode, PlannedFile, Source, Store,
    StorePathName, VerifyOptions,
};
use common::{open_store, package_tree, TestDir};

/// What the suite expects of the mode on this filesystem.
fn contract_suite(store: &Store, scratch: &Path, internal: LinkMethod, expected: LinkMethod) {
    let src = scratch.join("src");
    package_tree(&src, "suite");
    let expected_hash = hash_tree(&src).unwrap();
    let package = store
        .publish_tree(&src, "demo", Some(&expected_hash))
        .unwrap();
    assert_eq!(hash_tree(package.path()).unwrap(), expected_hash);
    // Read-only store path: dirs 0555, files 0444 / 0555.
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(package.path()), 0o555);
    assert_eq!(mode(&package.path().join("SKILL.md")), 0o444);
    assert_eq!(mode(&package.path().join("scripts/run.sh")), 0o555);
    // Store files share an inode with their blob only in hard-link mode.
    let nlink = std::fs::metadata(package.path().join("SKILL.md"))
        .unwrap()
        .nlink();
    match internal {
        LinkMethod::Hardlink => assert!(nlink >= 2, "hard-linked from its blob"),
        _ => assert_eq!(nlink, 1, "a separate inode"),
    }
    // Empty files are never linked.
    assert_eq!(
        std::fs::metadata(package.path().join("empty.txt"))
            .unwrap()
            .nlink(),
        1
    );

    // A generation from blobs, bytes, symlinks and files of the package.
    let name = StorePathName::from_inputs(format!("{expected:?}").as_bytes(), "generation");
    let skill = package.path().join("SKILL.md");
    let blob = store.import_bytes(b"generated\n", false).unwrap().unwrap();
    let plan = vec![
        PlannedFile::new(
            "claude/skills/demo/SKILL.md",
            Source::ExistingFile(skill.clone()),
            false,
        ),
        PlannedFile::new(
            "claude/settings.json",
            Source::Bytes(b"{}\n".to_vec()),
            false,
        ),
        PlannedFile::new("codex/AGENTS.md", Source::Blob(blob), false),
        PlannedFile::new("codex/run", Source::Blob(blob), true),
        PlannedFile::new(
            "codex/skills",
            Source::Symlink("../claude/skills".into()),
            false,
        ),
        PlannedFile::new("empty", Source::Bytes(Vec::new()), false),
    ];
    let generation = store
        .publish_files(&name, &plan, std::slice::from_ref(&package))
        .unwrap();
    assert_eq!(
        std::fs::read(generation.path().join("codex/skills/demo/SKILL.md")).unwrap(),
        b"# skill suite\n"
    );
    assert_eq!(mode(&generation.path().join("codex/run")), 0o555);
    assert_eq!(mode(&generation.path().join("codex/AGENTS.md")), 0o444);

    // Materialize into the scratch dir (maybe another device).
    let dest = scratch.join("staged");
    let report = store.materialize(&package, &dest).unwrap();
    assert_eq!(
        hash_tree(&dest).unwrap(),
        expected_hash,
        "materialized tree hashes the same"
    );
    assert_eq!(report.method(), Some(expected), "{report:?}");
    assert_eq!(report.empty_files, 1);
    assert_eq!(report.symlinks, 1);
    let pairs = vec![(skill.clone(), scratch.join("pairs/a/SKILL.md"))];
    let report = store.link_files(&pairs).unwrap();
    assert_eq!(report.files(), 1);
    assert_eq!(
        std::fs::read(scratch.join("pairs/a/SKILL.md")).unwrap(),
        b"# skill suite\n"
    );

    let checked = verify(store, VerifyOptions::default()).unwrap();
    assert!(checked.is_clean(), "{checked:?}");
    // Nothing roots these paths but this handle's temp roots: GC keeps them.
    let report = gc(store, GcOptions::default()).unwrap();
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    let summary = info(store).unwrap();
    assert_eq!(summary.store_paths, 2);
    if internal == LinkMethod::Hardlink {
        assert!(summary.dedup_ratio > 1.0, "{summary:?}");
    }
}

/// Run the suite with the store under `store_parent` and materializations under `scratch_parent`;
/// `internal` is the method inside the store, `expected` the one materialization uses.
fn run(
    mode: LinkMode,
    store_parent: &Path,
    scratch_parent: &Path,
    internal: LinkMethod,
    expected: LinkMethod,
) {
    let dir = TestDir::in_dir(store_parent);
    let scratch = TestDir::in_dir(scratch_parent);
    let store = open_store(dir.path(), mode);
    contract_suite(&store, scratch.path(), internal, expected);
}

fn ext4_supports_reflink(dir: &Path) -> bool {
    let a = dir.join("probe-a");
    std::fs::write(&a, b"probe").unwrap();
    let ok = reflink_copy_probe(&a, &dir.join("probe-b"));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(dir.join("probe-b"));
    ok
}

fn reflink_copy_probe(a: &Path, b: &Path) -> bool {
    // `cp --reflink=always` answers the same question as FICLONE without another dependency.
    Command::new("cp")
        .arg("--reflink=always")
        .arg(a)
        .arg(b)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn auto_internal() -> LinkMethod {
    let probe = TestDir::new();
    if ext4_supports_reflink(probe.path()) {
        LinkMethod::Reflink
    } else {
        LinkMethod::Hardlink
    }
}

#[test]
fn hardlink_mode_on_the_test_filesystem() {
    let tmp = std::env::temp_dir();
    run(
        LinkMode::Hardlink,
        &tmp,
        &tmp,
        LinkMethod::Hardlink,
        LinkMethod::Hardlink,
    );
}

#[test]
fn copy_mode_on_the_test_filesystem() {
    let tmp = std::env::temp_dir();
    run(
        LinkMode::Copy,
        &tmp,
        &tmp,
        LinkMethod::Copy,
        LinkMethod::Copy,
    );
}

#[test]
fn auto_mode_picks_the_best_method() {
    let tmp = std::env::temp_dir();
    let probe = TestDir::in_dir(&tmp);
    let expected = if ext4_supports_reflink(probe.path()) {
        LinkMethod::Reflink
    } else {
        LinkMethod::Hardlink
    };
    run(LinkMode::Auto, &tmp, &tmp, expected, expected);
}

#[test]
fn reflink_mode_falls_back_to_copy_where_unsupported_and_warns() {
    let tmp = std::env::temp_dir();
    let probe = TestDir::in_dir(&tmp);
    if ext4_supports_reflink(probe.path()) {
        run(
            LinkMode::Reflink,
            &tmp,
            &tmp,
            LinkMethod::Reflink,
            LinkMethod::Reflink,
        );
        return;
    }
    let dir = TestDir::in_dir(&tmp);
    let store = open_store(dir.path(), LinkMode::Reflink);
    let src = dir.path().join("src");
    common::write(&src, "a.txt", b"a");
    let package = store.publish_tree(&src, "a", None).unwrap();
    let report = store
        .materialize(&package, &dir.path().join("out"))
        .unwrap();
    assert_eq!(report.method(), Some(LinkMethod::Copy));
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("AGENTPACK_LINK_MODE")),
        "{report:?}"
    );
}

#[test]
fn cross_device_materialization_falls_back() {
    let shm = PathBuf::from("/dev/shm");
    let same_device = std::fs::metadata(&shm)
        .map(|m| m.dev() == std::fs::metadata(std::env::temp_dir()).unwrap().dev())
        .unwrap_or(true);
    if same_device {
        skip("/dev/shm is missing or on the same device as the temp dir");
        return;
    }
    // Hard links cannot cross devices: auto and hardlink modes copy (tmpfs has no reflinks either).
    run(
        LinkMode::Auto,
        &std::env::temp_dir(),
        &shm,
        auto_internal(),
        LinkMethod::Copy,
    );
    run(
        LinkMode::Hardlink,
        &std::env::temp_dir(),
        &shm,
        LinkMethod::Hardlink,
        LinkMethod::Copy,
    );
    // The whole store on tmpfs works too.
    run(
        LinkMode::Auto,
        &shm,
        &shm,
        LinkMethod::Hardlink,
        LinkMethod::Hardlink,
    );
}

/// A loop-mounted XFS image with reflinks, unmounted on drop.
struct XfsMount {
    _image_dir: TestDir,
    mountpoint: PathBuf,
}

impl XfsMount {
    fn new() -> Result<XfsMount, String> {
        let image_dir = TestDir::new();
        let image = image_dir.path().join("xfs.img");
        let mountpoint = image_dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).map_err(|e| e.to_string())?;
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        file.set_len(320 * 1024 * 1024).map_err(|e| e.to_string())?;
        let mkfs = Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&image)
            .output();
        match mkfs {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                return Err(format!(
                    "mkfs.xfs failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
            Err(err) => return Err(format!("mkfs.xfs is not available ({err})")),
        }
        let mount = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mountpoint)
            .output();
        match mount {
            Ok(out) if out.status.success() => Ok(XfsMount {
                _image_dir: image_dir,
                mountpoint,
            }),
            Ok(out) => Err(format!(
                "mount is not permitted here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(err) => Err(format!("mount is not available ({err})")),
        }
    }
}

impl Drop for XfsMount {
    fn drop(&mut self) {
        common::unseal(&self.mountpoint);
        let _ = Command::new("umount").arg(&self.mountpoint).status();
    }
}

#[test]
fn reflinks_on_xfs() {
    let mount = match XfsMount::new() {
        Ok(mount) => mount,
        Err(reason) => {
            skip(reason);
            return;
        }
    };
    let xfs = mount.mountpoint.clone();
    run(
        LinkMode::Auto,
        &xfs,
        &xfs,
        LinkMethod::Reflink,
        LinkMethod::Reflink,
    );
    run(
        LinkMode::Reflink,
        &xfs,
        &xfs,
        LinkMethod::Reflink,
        LinkMethod::Reflink,
    );
    run(
        LinkMode::Hardlink,
        &xfs,
        &xfs,
        LinkMethod::Hardlink,
        LinkMethod::Hardlink,
    );
    run(
        LinkMode::Copy,
        &xfs,
        &xfs,
        LinkMethod::Copy,
        LinkMethod::Copy,
    );
    // Across devices (XFS store, ext4 destination), reflink and hard link are impossible.
    run(
        LinkMode::Auto,
        &xfs,
        &std::env::temp_dir(),
        LinkMethod::Reflink,
        LinkMethod::Copy,
    );
}

#[test]
fn too_many_links_starts_a_new_blob() {
    // ext4 allows 65,000 links per inode; fill a blob up to the limit and publish more links to it.
    let dir = TestDir::new();
    let kind = agentpack_store::filesystem_kind(dir.path()).unwrap();
    if kind.name != "ext4" {
        skip(format!(
            "the test dir is on {}, not ext4 (whose link limit the test fills)",
            kind.name
        ));
        return;
    }
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let blob = store
        .import_bytes(b"popular content\n", false)
        .unwrap()
        .unwrap();
    let blob_file = store
        .store_dir()
        .join("blobs")
        .join(&blob.to_string()[..2])
        .join(blob.to_string());
    let filler = dir.path().join("filler");
    std::fs::create_dir(&filler).unwrap();
    let mut count = std::fs::metadata(&blob_file).unwrap().nlink();
    while count < 65_000 {
        match std::fs::hard_link(&blob_file, filler.join(count.to_string())) {
            Ok(()) => count += 1,
            Err(err) if err.raw_os_error() == Some(libc::EMLINK) => break,
            Err(err) => panic!("{err}"),
        }
    }
    let old_inode = std::fs::metadata(&blob_file).unwrap().ino();
    let name = StorePathName::from_inputs(b"emlink", "generation");
    let plan: Vec<PlannedFile> = (0..3)
        .map(|i| PlannedFile::new(format!("f{i}"), Source::Blob(blob), false))
        .collect();
    let path = store.publish_files(&name, &plan, &[]).unwrap();
    for i in 0..3 {
        assert_eq!(
            std::fs::read(path.path().join(format!("f{i}"))).unwrap(),
            b"popular content\n"
        );
    }
    let new_inode = std::fs::metadata(&blob_file).unwrap().ino();
    assert_ne!(
        old_inode, new_inode,
        "the blob name now points at a fresh inode"
    );
    // The new blob is one of the fresh files, and links made after it share it.
    let shares: Vec<bool> = (0..3)
        .map(|i| {
            std::fs::metadata(path.path().join(format!("f{i}")))
                .unwrap()
                .ino()
                == new_inode
        })
        .collect();
    assert!(shares.iter().any(|s| *s), "{shares:?}");
    std::fs::remove_dir_all(&filler).unwrap();
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}
