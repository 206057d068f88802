//! `agentpack.toml` and `pack.lock`: models, strict parsing, validation, byte-stable writing,
//! format-preserving edits, module IDs, `add` specs, key formulas and version selection.
//!
//! This crate is pure: no network, no store, no printing. The only I/O is reading the two files
//! and the atomic, write-if-changed lock writer. Errors carry the file path and say what to do.
//!
//! # Main entry points
//!
//! | need | call |
//! | --- | --- |
//! | read the manifest | [`Manifest::load`] / [`Manifest::parse`] |
//! | edit the manifest keeping comments | [`ManifestDocument::parse`], `set_dependency`, `remove_dependency`, `create_mode`, `mode_enable`, ..., then `to_string()` |
//! | `init` text | [`render_init_manifest`] and [`Lockfile::new`] |
//! | read / validate the lock | [`Lockfile::load`] / [`Lockfile::parse`] (runs every integrity check) |
//! | write the lock | [`Lockfile::save`] (atomic; skipped when bytes are equal) or [`Lockfile::to_toml_string`] |
//! | parse an `add` spec | [`parse_spec`] -> [`PackageSpec`] |
//! | classify a pin / pick a tag | [`classify_ref`], [`VersionConstraint::select`] |
//! | keys | [`keys::github_cache_key`], [`keys::path_cache_key`], [`keys::local_cache_key`], [`keys::dirhash40_from_entries`], [`keys::project_hash`], [`keys::mode_dir_component`], [`keys::mcp_definition_digest`] |
//! | digests | [`ContentHash`], [`CacheKey`], [`CommitSha`] |
//! | does a mode stage X? | [`Mode::selects`] with a [`SelectionTarget`] |
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use agentpack_lockfile::{
//!     keys, parse_spec, render_init_manifest, CommitSha, Dependency, LockedPackage, Lockfile,
//!     Manifest, ManifestDocument, PackageSpec, Pin,
//! };
//!
//! // init
//! let text = render_init_manifest("my-project", "0.0.1");
//!
//! // add anthropics/skills/skills/canvas-design
//! let PackageSpec::Github(spec) = parse_spec("anthropics/skills/skills/canvas-design")? else {
//!     unreachable!()
//! };
//! let mut doc = ManifestDocument::parse(&text, Path::new("agentpack.toml"))?;
//! doc.set_dependency(&spec.module, &Dependency::Remote(Pin::Unpinned))?;
//! let manifest: Manifest = doc.to_manifest()?;
//! assert_eq!(manifest.dependencies.len(), 1);
//!
//! // lock it
//! let commit = CommitSha::parse("8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d")?;
//! let mut lock = Lockfile::new(&manifest.name, &manifest.version);
//! lock.packages.push(LockedPackage {
//!     module: spec.module.clone(),
//!     direct: true,
//!     kind: "skill".into(),
//!     url: LockedPackage::github_url(&spec.owner, &spec.repo, &commit, &spec.path),
//!     owner: spec.owner.clone(),
//!     repo: spec.repo.clone(),
//!     path: spec.path.clone(),
//!     cache_key: keys::github_cache_key(&spec.owner, &spec.repo, &spec.path, &commit),
//!     commit,
//!     content_hash: None,
//!     name: None,
//! });
//! let bytes = lock.to_toml_string();
//! assert_eq!(Lockfile::parse(&bytes, Path::new("pack.lock"))?, lock);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod atomic;
pub mod edit;
pub mod keys;
pub mod lock;
pub mod manifest;
pub mod module_id;
pub mod selector;
pub mod spec;
pub mod validate;
pub mod version;

pub use atomic::{
    read_regular_file, read_regular_to_string, write_atomic, write_if_changed, WriteError,
};
pub use edit::{render_init_manifest, EditError, ManifestDocument};
pub use lock::{
    LockConfig, LockError, LockMeta, LockedPackage, Lockfile, McpRecord, McpStatus, OciPin,
    TreeEntry, LOCK_FILE,
};
pub use manifest::{
    Base, Dependency, Manifest, ManifestError, McpOAuth, McpServer, Mode, Pin, DEFAULT_MODE,
    MANIFEST_FILE,
};
pub use module_id::{GithubModule, ModuleId, ModuleIdError, OciModule};
pub use selector::{SelectionTarget, Selector, SelectorError};
pub use spec::{parse_spec, GithubSpec, OciSpec, PackageSpec, SpecError};
pub use validate::{CacheKey, CommitSha, ContentHash, DigestError, IntegrityError};
pub use version::{classify_ref, parse_tag, RefKind, SelectedTag, VersionConstraint, VersionError};
