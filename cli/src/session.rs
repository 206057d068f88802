//! Opening what a command works with: the store under `$AGENTPACK_HOME/cache` (read-write, or
//! read-only for preflight and probe) and, when a command may talk to GitHub, a session configured
//! from the environment.
//!
//! Every process opens its store once, here, and passes the handle on (through its
//! `ProjectSession` when a project is involved).

use std::path::PathBuf;
use std::sync::Arc;

use agentpack_builders::github::GitHubConfig;
use agentpack_builders::oci::OciTransport;
use agentpack_builders::session::{GitHubSession, SessionError};
use agentpack_builders::substitute::Substituters;
use agentpack_store::{LinkMode, Store, StoreOptions};
use anyhow::{bail, Context as _, Result};

use crate::context::Home;
use crate::env::{self, EnvVars};
use crate::output;
use crate::user_config;

/// Opens (creating if needed) the store of `home`.
pub fn open_store(home: &Home) -> Result<Arc<Store>> {
    let cache = home.root.join("cache");
    let store = Store::open(&cache, store_options()?)
        .with_context(|| format!("cannot open the store under {}", cache.display()))?;
    Ok(Arc::new(store))
}

/// Opens the store of `home` for reading only (`Store::open_read_only`): creates nothing, and a
/// store nobody made yet reads as empty.
pub fn open_store_read_only(home: &Home) -> Result<Arc<Store>> {
    let cache = home.root.join("cache");
    let store = Store::open_read_only(&cache, store_options()?)
        .with_context(|| format!("cannot read the store under {}", cache.display()))?;
    Ok(Arc::new(store))
}

/// The store options the environment asks for.
fn store_options() -> Result<StoreOptions> {
    let link_mode = match env::var(EnvVars::AGENTPACK_LINK_MODE) {
        None => None,
        Some(value) => Some(value.parse::<LinkMode>().map_err(|_| {
            anyhow::anyhow!(
                "{}={value:?} is not a link mode\n  fix  use auto, reflink, hardlink or copy",
                EnvVars::AGENTPACK_LINK_MODE
            )
        })?),
    };
    let local_cache_dir = env::var(EnvVars::XDG_CACHE_HOME)
        .map(PathBuf::from)
        .or_else(|| env::var(EnvVars::HOME).map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("agentpack"));
    Ok(StoreOptions {
        link_mode,
        host_id: env::var(EnvVars::AGENTPACK_HOST_ID),
        local_cache_dir,
        full_verify: env::flag(EnvVars::AGENTPACK_FULL_VERIFY),
        ..StoreOptions::default()
    })
}

/// Prints and clears the store's accumulated warnings.
pub fn flush_store_warnings(store: &Store) {
    for warning in store.take_warnings() {
        output::warn(&warning);
    }
}

/// The substituters of `AGENTPACK_SUBSTITUTERS` and the user's config file over `transport`,
/// asked in order before GitHub or the npm registry; the transport's warnings are said when there
/// is any substituter to use it.
pub fn substituters(transport: &OciTransport) -> Result<Substituters> {
    let substituters =
        Substituters::from_entries(&user_config::substituter_entries()?, transport.clone())?;
    if !substituters.is_empty() {
        for warning in transport.warnings() {
            output::warn(warning);
        }
        tracing::debug!(substituters = ?substituters.describe(), "substituters, asked in order before the origin");
    }
    Ok(substituters)
}

/// A GitHub session from `AGENTPACK_GITHUB_API_URL`, `AGENTPACK_GITHUB_URL`, `GITHUB_TOKEN`, `GH_TOKEN`,
/// with the substituters of `AGENTPACK_SUBSTITUTERS` and the user's config file, and the OCI
/// transport (`AGENTPACK_OCI_TOKEN`, `AGENTPACK_OCI_INSECURE`, `~/.docker/config.json`).
pub fn github(store: &Arc<Store>) -> Result<GitHubSession> {
    let mut config = GitHubConfig::from_values(
        env::var(EnvVars::AGENTPACK_GITHUB_API_URL),
        env::var(EnvVars::AGENTPACK_GITHUB_URL),
        env::var(EnvVars::GITHUB_TOKEN),
        env::var(EnvVars::GH_TOKEN),
    );
    config.limits = env::limits()?;
    let transport = env::oci_transport()?;
    let substituters = substituters(&transport)?;
    match GitHubSession::new(store, config) {
        Ok(session) => Ok(session.with_oci(transport, Arc::new(substituters))),
        // The store's scratch space: every command that fetches or copies packages needs it.
        Err(SessionError::Store(err)) => {
            bail!("cannot make a working directory in the store: {err}")
        }
        Err(err) => bail!("cannot prepare downloads from GitHub: {err}"),
    }
}
