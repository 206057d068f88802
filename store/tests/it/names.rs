//! Properties of the names and digests the store hands out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use agentpack_store::{sanitize_label, BlobId, StorePathName, TreeHash};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_label_gives_a_parseable_store_path_name(label in ".{0,200}", inputs in proptest::collection::vec(any::<u8>(), 0..64)) {
        let name = StorePathName::from_inputs(&inputs, &label);
        let parsed: StorePathName = name.as_str().parse().unwrap();
        prop_assert_eq!(&parsed, &name);
        prop_assert_eq!(name.label(), sanitize_label(&label));
        prop_assert!(!name.as_str().contains('/'));
    }

    #[test]
    fn tree_hashes_and_blob_ids_round_trip(bytes in any::<[u8; 32]>()) {
        let hash = TreeHash::from_bytes(bytes);
        prop_assert_eq!(hash.to_string().parse::<TreeHash>().unwrap(), hash);
        let id = BlobId::of(&bytes);
        prop_assert_eq!(id.to_string().parse::<BlobId>().unwrap(), id);
    }
}
