//! agentpack-builders: everything that produces a store path.
//!
//! Resolve and fetch (GitHub, path and `local/` packages):
//! - [`github`]: refs -> commits against GitHub or anything speaking its calls (REST, the git protocol
//!   through gix, the metadata cache, stale fallback with a warning);
//! - [`snapshot`]: a repository at a commit, downloaded once however many packages it holds;
//! - [`extract`]: the documented extraction rules (0644 files, in-package links, nothing unsafe);
//! - [`normalize`] and [`marketplace`]: package roots, plugin manifest stubs, `mcp.json`, marketplace
//!   merges and catalog entries (`--plugin`, inline language-server entries);
//! - [`local_package`]: path dependencies and the `local/` mirror (`dirhash40`);
//! - [`resolve`]: manifest + old lock + update policy -> new lock (transitive, conflicts, pins kept);
//! - [`fetch`]: every locked package into a verified store slot (`--repair`);
//! - [`plugin_add`]: `add <marketplace> --plugin <name>` -> module id and pin;
//! - [`session`] and [`package_store`]: one command's GitHub session and the seam to the store;
//! - [`limits`]: timeouts and size caps of every download and extraction; [`leftovers`]: work
//!   directories of dead processes in the store's `.tmp`, removed by the next sync; [`error_text`]:
//!   an error and its causes as one line, for logs and lists of tried sources; [`warnings`]: the
//!   warnings concurrent workers collect, each once.
//!
//! Staging: [`generation`] (the generation builder).
//!
//! The pipeline every project command composes: [`project`] (`ProjectSession`: resolve, plan,
//! build, select).
//!
//! Libraries never print: every warning is returned to the caller.

pub mod contract;
pub mod error_text;
pub mod extract;
pub mod fetch;
pub mod generation;
pub mod github;
pub mod leftovers;
pub mod limits;
pub mod local_package;
pub mod marketplace;
pub mod mcp_lock;
pub mod normalize;
pub mod npm;
pub mod oci;
pub mod oci_package;
pub mod package_store;
pub mod plugin_add;
pub mod project;
pub mod resolve;
pub mod session;
pub mod sharing;
pub mod snapshot;
pub mod substitute;
pub mod substitute_npm;
pub mod warnings;
