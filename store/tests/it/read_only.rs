//! [`Store::open_read_only`]: opens what is there and creates nothing, reads a missing store as an
//! empty one, refuses every write, and inspects slots without registering a root.

use agentpack_store::{SlotInspection, SlotState, Store, StoreError, StoreOptions, TreeHash};
use agentpack_test_support::tree_digest;

use crate::common::{open_store, package_tree, unseal};

fn read_only(cache: &std::path::Path) -> Store {
    Store::open_read_only(cache, StoreOptions::default()).unwrap()
}

#[test]
fn a_missing_store_opens_empty_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("home/cache");
    let store = read_only(&cache);
    assert!(store.is_read_only());
    assert!(!store.exists());
    assert_eq!(store.slot_state("k").unwrap(), SlotState::Missing);
    assert_eq!(
        store.inspect_slot("k", None).unwrap(),
        SlotInspection::Unusable(SlotState::Missing)
    );
    assert!(store.index().is_none());
    assert!(
        !dir.path().join("home").exists(),
        "open_read_only created something"
    );

    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let error = Store::open_read_only(&file, StoreOptions::default()).unwrap_err();
    assert!(error.to_string().contains("not a directory"), "{error}");
}

#[test]
fn a_read_only_handle_reads_slots_writes_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("src");
    package_tree(&source, "a");
    let writer = open_store(dir.path(), agentpack_store::LinkMode::Copy);
    let hash = agentpack_store::hash_tree(&source).unwrap();
    let published = writer.publish_tree(&source, "pkg", Some(&hash)).unwrap();
    writer.set_slot("good", &published).unwrap();
    writer.set_slot("changed", &published).unwrap();
    drop(writer);

    let cache = dir.path().join("cache");
    let before = tree_digest(&[dir.path()]);
    let store = read_only(&cache);
    assert!(store.exists());
    match store.inspect_slot("good", Some(&hash)).unwrap() {
        SlotInspection::Usable { path, verified } => {
            assert!(verified);
            assert_eq!(path, published);
        }
        other => panic!("{other:?}"),
    }
    let other: TreeHash = agentpack_store::hash_tree(&dir.path().join("src/scripts")).unwrap();
    assert!(matches!(
        store.inspect_slot("changed", Some(&other)).unwrap(),
        SlotInspection::Mismatch { .. }
    ));
    // An unverified read registers no temp root (that is a write).
    assert!(store.slot("good").unwrap().is_some());

    let refused = [
        store.publish_tree(&source, "pkg", None).map(|_| ()),
        store.set_slot("new", &published),
        store.remove_slot("good"),
        store.mark_slot_rebuildable("good"),
        store.temp_dir().map(|_| ()),
        store.add_indirect_root(&dir.path().join("pointer")),
        store.remove_generation_history("h/default"),
        agentpack_store::gc(&store, agentpack_store::GcOptions::default()).map(|_| ()),
        agentpack_store::verify(&store, agentpack_store::VerifyOptions { repair: true })
            .map(|_| ()),
    ];
    for result in refused {
        assert!(
            matches!(result, Err(StoreError::ReadOnly { .. })),
            "{result:?}"
        );
    }
    drop(store);
    assert_eq!(
        tree_digest(&[dir.path()]),
        before,
        "the read-only handle wrote"
    );
    unseal(dir.path());
}
