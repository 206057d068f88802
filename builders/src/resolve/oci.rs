//! Pinning `oci://` packages: a tag to a manifest digest, and the OCI node of the graph.
//!
//! Must never follow a tag the lock already pins to a digest unless the policy updates it.

use agentpack_lockfile::manifest::Pin;

use super::*;

impl Run<'_, '_> {
    /// The manifest digest the requirements on an `oci://` module name ([`crate::oci_package`]).
    pub(super) fn oci_digest(
        &mut self,
        module: &str,
        requirements: &[Requirement],
    ) -> Result<crate::oci_package::ChosenDigest, ResolutionError> {
        let pins: Vec<(&str, &Pin)> = requirements
            .iter()
            .map(|r| (r.requester.as_str(), &r.pin))
            .collect();
        let pin = crate::oci_package::requested(module, &pins)?;
        crate::oci_package::choose_digest(
            self.env.fetcher,
            module,
            &pin,
            self.old_entry(module),
            self.policy.updates(module),
        )
    }

    /// An `oci://` package at `chosen`, in a verified slot.
    pub(super) fn oci_node(
        &mut self,
        module: &str,
        chosen: &crate::oci_package::ChosenDigest,
    ) -> Result<Node, ResolutionError> {
        let expected = self
            .old_entry(module)
            .filter(|e| e.oci_pin().is_some_and(|p| p.digest == chosen.digest))
            .and_then(|e| e.content_hash.clone());
        let tree = self.next_dir("oci");
        let materialized = crate::oci_package::materialize(
            self.env.fetcher,
            self.env.store,
            module,
            chosen,
            expected.as_ref(),
            &tree,
        );
        self.warnings.extend(self.env.fetcher.take_warnings());
        let materialized = materialized?;
        Ok(Node::new(materialized.entry, materialized.slot))
    }
}
