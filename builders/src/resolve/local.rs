//! `path:` and `local:` packages: copying a local directory into a hashed tree and reusing the
//! locked slot when the hash still matches.
//!
//! Must never write into the user's local directory.

use std::path::Path;

use agentpack_lockfile::lock::LockedPackage;
use agentpack_lockfile::module_id::ModuleId;

use crate::local_package;
use crate::normalize::{self, NormalizeContext};
use crate::package_store::SlotCheck;

use super::*;

impl Run<'_, '_> {
    pub(super) fn local_node(
        &mut self,
        module: &str,
        url: String,
        copy: local_package::LocalCopy,
        tree: &Path,
    ) -> Result<Node, ResolutionError> {
        self.warnings.extend(copy.warnings(module));
        let normalized =
            normalize::normalize_package(tree, &NormalizeContext::without_repo(module))?;
        let store = self.env.store;
        let content_hash = store.hash_tree(tree)?;
        let slot = store.verified_or_publish(&copy.cache_key, module, tree, &content_hash)?;
        store.record_executables(
            &slot,
            &normalized.with_copied_executables(&copy.executables),
        )?;
        store.mark_rebuildable(&copy.cache_key)?;
        let entry = LockedPackage {
            module: ModuleId::parse(module).map_err(|e| ResolutionError::Invalid(e.to_string()))?,
            direct: false,
            kind: normalize::package_kind(&slot).to_owned(),
            url,
            owner: String::new(),
            repo: String::new(),
            path: String::new(),
            commit: Self::commit(&copy.dirhash40, module)?,
            cache_key: copy.cache_key,
            content_hash: Some(content_hash),
            name: normalize::package_name(&slot),
        };
        Ok(Node::new(entry, slot))
    }

    pub(super) fn path_package(
        &mut self,
        module: &str,
        dir: &str,
    ) -> Result<Node, ResolutionError> {
        let source = self.env.project_root.join(dir);
        if !source.is_dir() {
            if let Some(node) = self.locked_path_slot(module, dir)? {
                return Ok(node);
            }
        }
        tracing::debug!(module, dir = %source.display(), "source: the path package's directory");
        let tree = self.next_dir("path");
        let copy = local_package::copy_path_package(module, &source, &tree)?;
        self.local_node(module, format!("path:{dir}"), copy, &tree)
    }

    /// A path package whose directory is missing on this machine: the locked entry, when its slot
    /// is filled (and verifies against the lock's hash, when the lock has one). The docs: sync
    /// fails only when the directory is missing and the slot is empty too.
    pub(super) fn locked_path_slot(
        &mut self,
        module: &str,
        dir: &str,
    ) -> Result<Option<Node>, ResolutionError> {
        let Some(old) = self
            .old_entry(module)
            .filter(|e| e.url == format!("path:{dir}"))
            .cloned()
        else {
            return Ok(None);
        };
        let store = self.env.store;
        let slot = match &old.content_hash {
            Some(expected) => match store.check_slot(&old.cache_key, expected)? {
                SlotCheck::Verified(slot) => slot,
                SlotCheck::Missing => return Ok(None),
                SlotCheck::Mismatch {
                    path: cache,
                    actual,
                } => {
                    return Err(ResolutionError::CacheMismatch {
                        module: module.to_owned(),
                        expected: expected.to_string(),
                        actual: actual.to_string(),
                        cache,
                        commit: old.commit.to_string(),
                    })
                }
            },
            None => match store.slot(&old.cache_key)? {
                Some(slot) => slot,
                None => return Ok(None),
            },
        };
        self.warnings.push(format!(
            "{module}: the directory {} does not exist; staging the copy locked in pack.lock ({})",
            self.env.project_root.join(dir).display(),
            slot.display()
        ));
        Ok(Some(Node::new(old, slot)))
    }

    pub(super) fn local_mirror_package(
        &mut self,
        module: &str,
        spec: &str,
    ) -> Result<Node, ResolutionError> {
        let dir = local_package::local_mirror_dir(self.env.agentpack_home, spec);
        if !dir.is_dir() {
            return Err(ResolutionError::UnknownLocal {
                module: module.to_owned(),
                dir,
            });
        }
        tracing::debug!(module, dir = %dir.display(), "source: the local/ mirror");
        let tree = self.next_dir("local");
        let copy =
            local_package::copy_local_mirror_package(module, self.env.agentpack_home, spec, &tree)?;
        self.local_node(module, format!("local:{spec}"), copy, &tree)
    }
}
