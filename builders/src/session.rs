//! One command's GitHub session: the resolver, its metadata cache in the store's index, and the
//! snapshot fetcher with its scratch space on the store's filesystem, keeping every repository it
//! downloads as a repo snapshot in the store (see [`crate::snapshot`]).
//!
//! The cli builds one per command that resolves or fetches (`lock`, `add`, `remove`, `update`, `sync`)
//! and passes [`GitHubSession::fetcher`] to [`crate::resolve::resolve`], [`crate::fetch::fetch_lock`]
//! and [`crate::plugin_add::resolve_plugin`]. Dropping it removes the scratch space.

use std::sync::Arc;

use agentpack_store::Store;

use crate::github::resolver::{ResolveError, Resolver};
use crate::github::GitHubConfig;
use crate::package_store::{PackageStore, ScratchDir, StoreAccessError, StoreMetadataCache};
use crate::snapshot::{FetchError, SnapshotFetcher};

/// Why a session could not start.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] Box<ResolveError>),
    /// The store's scratch space could not be made.
    #[error(transparent)]
    Store(#[from] StoreAccessError),
    /// The fetcher's scratch space could not be made.
    #[error(transparent)]
    Fetch(#[from] Box<FetchError>),
}

/// A resolver and a fetcher for one command.
#[derive(Debug)]
pub struct GitHubSession {
    /// Downloads once per (repo, commit) while the store keeps the snapshot; holds the resolver.
    pub fetcher: SnapshotFetcher,
    _scratch: ScratchDir,
}

impl GitHubSession {
    /// A session over `store` (its index caches ref and tag lookups) talking to `config`.
    pub fn new(store: &Arc<Store>, config: GitHubConfig) -> Result<GitHubSession, SessionError> {
        let cache = Arc::new(StoreMetadataCache::new(Arc::clone(store)));
        let resolver = Arc::new(Resolver::new(config, cache).map_err(Box::new)?);
        let scratch = PackageStore::scratch(store.as_ref())?;
        let fetcher = SnapshotFetcher::new(resolver, scratch.path())
            .map_err(Box::new)?
            .with_store(Arc::clone(store));
        Ok(GitHubSession {
            fetcher,
            _scratch: scratch,
        })
    }

    /// Asks `substituters` before GitHub for every locked package, and reaches `oci://` packages
    /// over `transport` (see [`crate::substitute`] and [`crate::oci_package`]).
    pub fn with_oci(
        mut self,
        transport: crate::oci::OciTransport,
        substituters: Arc<crate::substitute::Substituters>,
    ) -> GitHubSession {
        self.fetcher = self
            .fetcher
            .with_oci_transport(transport)
            .with_substituters(substituters);
        self
    }

    /// The resolver.
    pub fn resolver(&self) -> &Arc<Resolver> {
        self.fetcher.resolver()
    }
}
