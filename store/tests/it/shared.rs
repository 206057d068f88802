//! A store on a network/userspace filesystem (FUSE via `bindfs` stands in for NFS/SMB: skipped with a
//! printed reason where it cannot be mounted) and a group-shared store.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;
use agentpack_test_support::skip;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;

use agentpack_store::{gc, hash_tree, verify, GcOptions, Store, StoreOptions, VerifyOptions};
use common::{package_tree, TestDir};

struct FuseMount {
    mountpoint: PathBuf,
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        common::unseal(&self.mountpoint);
        let _ = Command::new("umount").arg(&self.mountpoint).status();
    }
}

fn bindfs(backing: &std::path::Path, mountpoint: &std::path::Path) -> Result<FuseMount, String> {
    std::fs::create_dir_all(backing).unwrap();
    std::fs::create_dir_all(mountpoint).unwrap();
    match Command::new("bindfs").arg(backing).arg(mountpoint).output() {
        Ok(out) if out.status.success() => Ok(FuseMount {
            mountpoint: mountpoint.to_path_buf(),
        }),
        Ok(out) => Err(format!(
            "bindfs could not mount: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(err) => Err(format!(
            "bindfs is not installed ({err}); apt-get install bindfs"
        )),
    }
}

#[test]
fn a_store_on_fuse_keeps_its_index_on_local_disk() {
    let dir = TestDir::new();
    let mount = match bindfs(&dir.path().join("backing"), &dir.path().join("mnt")) {
        Ok(mount) => mount,
        Err(reason) => {
            skip(reason);
            return;
        }
    };
    let local = dir.path().join("xdg-cache/agentpack");
    let cache = mount.mountpoint.join("cache");
    let store = Store::open(
        &cache,
        StoreOptions {
            local_cache_dir: Some(local.clone()),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    assert!(store.filesystem().remote, "{:?}", store.filesystem());
    assert_eq!(store.filesystem().name, "fuse");
    let location = store
        .index_location()
        .expect("an index on local disk")
        .to_path_buf();
    assert!(
        location.starts_with(local.join("index")),
        "{}",
        location.display()
    );
    store
        .index()
        .expect("opens")
        .put("refs", b"k", b"v")
        .unwrap();
    assert!(
        !store.store_dir().join("index").exists(),
        "no LMDB on the remote filesystem"
    );

    // Without a local directory the remote store does without an index.
    let no_index = Store::open(
        &cache,
        StoreOptions {
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    assert!(no_index.index().is_none());

    // Everything else works on the mount.
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let expected = hash_tree(&src).unwrap();
    let path = store.publish_tree(&src, "demo", Some(&expected)).unwrap();
    store.set_slot("key", &path).unwrap();
    assert_eq!(store.verified_slot("key", &expected).unwrap(), Some(path));
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    gc(&store, GcOptions::default()).unwrap();
    drop(store);
    drop(no_index);
}

#[test]
fn a_group_shared_store_is_setgid_sticky_and_readable() {
    let dir = TestDir::new();
    let root = dir.path().join("cache/store");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o2775)).unwrap();
    let store = Store::open(
        &dir.path().join("cache"),
        StoreOptions {
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    for sub in [
        "",
        "blobs",
        ".tmp",
        "meta",
        "temproots",
        "leases",
        "gcroots",
    ] {
        // Setgid, group-writable and sticky: only an entry's owner may rename or remove it.
        assert_eq!(mode(&store.store_dir().join(sub)), 0o3775, "{sub}");
    }
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let path = store.publish_tree(&src, "demo", None).unwrap();
    assert_eq!(
        mode(&path.path().join("SKILL.md")) & 0o044,
        0o044,
        "group and others can read"
    );
    let shard = std::fs::read_dir(store.store_dir().join("blobs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(mode(&shard), 0o3775, "shards are shared too");
}
