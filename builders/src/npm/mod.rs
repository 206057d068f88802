//! npm for MCP servers: reading a server's npm runner and spec, resolving dist-tags and versions
//! against a registry, locking an npx server's dependency tree with npm, and the npm-tree store
//! path `agentpack mcp-exec` starts a tree-locked server from.
//!
//! Nothing here runs a package script: npm is only asked for a package-lock
//! (`--ignore-scripts`), and trees are unpacked by agentpack itself. Nothing here reads the
//! environment or prints.
//!
//! | need | call |
//! | --- | --- |
//! | what does a server run? | [`spec::classify`] |
//! | which registry? | [`registry::registry_for`] |
//! | resolve a tag / version | [`registry::RegistryClient::resolve`] |
//! | lock the tree | [`tree::lock_tree`], [`tree::tree_digest`] |
//! | the mcp-exec spec | [`exec_spec::ExecSpec`] |
//! | start: ready the tree | [`tree_store::ensure_tree`], [`tree_store::bin_script`] |
//! | ... tarballs from substituters first | [`prepare_exec_substituted`], [`crate::substitute_npm`] |

// Errors carry the paths, packages and digests a message needs; they are returned once per
// command on a cold path, so their size does not matter.
#![allow(clippy::result_large_err)]

pub mod exec_spec;
pub mod integrity;
pub mod registry;
pub mod spec;
pub mod tree;
pub mod tree_store;

use std::path::PathBuf;

use agentpack_store::Store;

pub use exec_spec::{ExecSpec, ExecSpecError};
pub use registry::{RegistryClient, RegistryError, PUBLIC_REGISTRY};
pub use tree_store::{ReadyTree, TreeStoreError};

/// What `mcp-exec` runs: `node <script> <args...>`.
#[derive(Debug, Clone)]
pub struct ExecPlan {
    /// The package's executable inside the npm-tree store path.
    pub script: PathBuf,
    /// The tree.
    pub ready: ReadyTree,
}

/// Why `mcp-exec` cannot start a server.
#[derive(Debug, thiserror::Error)]
pub enum McpExecError {
    /// The spec cannot be used.
    #[error(transparent)]
    Spec(#[from] ExecSpecError),
    /// The tree could not be made ready.
    #[error(transparent)]
    Tree(#[from] TreeStoreError),
    /// The HTTP client could not be built.
    #[error("cannot set up an HTTP client")]
    Client(#[from] reqwest::Error),
    /// The executable is missing from the unpacked package.
    #[error("{package}@{version} has no executable `{bin}` ({})\n  fix  run `agentpack lock --update` to record the package again", script.display())]
    NoBin {
        /// Package.
        package: String,
        /// Version.
        version: String,
        /// The bin path in the package.
        bin: String,
        /// Where it was looked for.
        script: PathBuf,
    },
}

/// Reads a spec file and makes its tree ready, with the default limits and no substituters;
/// returns what to run with `node`.
pub fn prepare_exec(store: &Store, spec_path: &std::path::Path) -> Result<ExecPlan, McpExecError> {
    prepare_exec_substituted(
        store,
        spec_path,
        &crate::limits::Limits::default(),
        &crate::substitute::Substituters::none(),
    )
}

/// [`prepare_exec`] downloading within `limits`, asking `substituters` for the tree's tarballs first
/// (see [`crate::substitute_npm`]); their warnings are in `ready.warnings`.
pub fn prepare_exec_substituted(
    store: &Store,
    spec_path: &std::path::Path,
    limits: &crate::limits::Limits,
    substituters: &crate::substitute::Substituters,
) -> Result<ExecPlan, McpExecError> {
    let spec = ExecSpec::load(spec_path)?;
    let client = RegistryClient::with_limits(*limits)?;
    let ready = tree_store::ensure_tree(store, &spec, &client, substituters)?;
    let script = tree_store::bin_script(&ready.tree, &spec);
    if !script.is_file() {
        return Err(McpExecError::NoBin {
            package: spec.package,
            version: spec.version,
            bin: spec.bin,
            script,
        });
    }
    Ok(ExecPlan { script, ready })
}
