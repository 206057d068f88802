//! `env export --with-store` and its import: the store content an environment needs, inside its
//! bundle, so an air-gapped machine can `env import` + `env restore` (and start its npm MCP
//! servers) with no GitHub and no npm registry.
//!
//! Two kinds of item, each a zstd-compressed entry under `store/` listed in `bundle.json` with its
//! size and SHA-256: a locked package's tree (the verified cache slot in the archive format OCI
//! artifacts use, `agentpack_builders::oci::archive`: a deterministic tar+zstd, read back through
//! the safe extractor) and an npm tarball of a locked MCP server tree (as the registry served it). Import trusts neither the bundle nor
//! `bundle.json` for what content is: a package tree must hash to the `content_hash` its module has
//! in the bundle's `pack.lock`, a tarball must match the lock's SRI integrity, all of them before
//! anything is published; then packages are published through the store's package publication
//! (their cache slots point at them) and each npm tree is unpacked and published as
//! `mcp-exec` would after downloading it.
//!
//! Export reads only verified store content (a cold store is an error saying to restore first)
//! and downloads only the npm tarballs the lock pins, checked against their integrity. Nothing here
//! writes the checkout or the definition.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use agentpack_builders::npm::exec_spec::ExecSpec;
use agentpack_builders::npm::integrity;
use agentpack_builders::npm::registry::{tarball_url, RegistryClient};
use agentpack_builders::npm::tree::{applies_on, node_platform, package_name_at};
use agentpack_builders::npm::tree_store::{tree_pointer, unpack_tarball_limited};
use agentpack_builders::oci::archive::{self, Compression};
use agentpack_builders::package_store::{OnExisting, PackageStore, SlotCheck, TreeMatch};
use agentpack_lockfile::Lockfile;
use agentpack_store::Store;
use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};

/// The directory of a bundle that holds store items.
pub const STORE_DIR: &str = "store";
/// The largest compressed store item a bundle may hold.
pub const MAX_ITEM_BYTES: u64 = 256 * 1024 * 1024;
/// The largest a store item may be once decompressed.
const MAX_UNPACKED_BYTES: u64 = 1024 * 1024 * 1024;

/// One store item, as `bundle.json` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreItem {
    /// `store/<file>` in the bundle.
    pub path: String,
    /// Compressed size.
    pub size: u64,
    /// SHA-256 of the compressed bytes.
    pub sha256: String,
    #[serde(flatten)]
    pub content: StoreContent,
}

/// What a store item holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StoreContent {
    /// A locked package's tree (a tar), for the module with this cache key.
    Package {
        module: String,
        cache_key: String,
        /// Regular files executable in the package's source.
        #[serde(default)]
        executables: Vec<String>,
    },
    /// An npm tarball a locked MCP server tree pins, by its SRI integrity.
    NpmTarball {
        package: String,
        version: String,
        integrity: String,
    },
}

/// Whether `name` may be a store entry of a bundle: `store/<file>`, one plain file name.
pub fn is_store_entry(name: &str) -> bool {
    name.strip_prefix("store/").is_some_and(|file| {
        !file.is_empty()
            && file != "."
            && file != ".."
            && file
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

fn zstd_compress(bytes: &[u8]) -> Result<Vec<u8>> {
    zstd::encode_all(bytes, archive::ZSTD_LEVEL).context("cannot compress a store item")
}

fn zstd_decompress(bytes: &[u8], shown: &str) -> Result<Vec<u8>> {
    let decoder = zstd::Decoder::new(bytes)
        .with_context(|| format!("{shown} is not zstd-compressed; nothing was written"))?;
    let mut out = Vec::new();
    decoder
        .take(MAX_UNPACKED_BYTES + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("{shown} cannot be decompressed; nothing was written"))?;
    if out.len() as u64 > MAX_UNPACKED_BYTES {
        bail!("{shown} decompresses to over {MAX_UNPACKED_BYTES} bytes; nothing was written");
    }
    Ok(out)
}

/// The store items of environment `name`'s lock: every locked package from its verified cache
/// slot, and every npm tarball its MCP server trees pin (downloaded, integrity-checked).
pub fn collect(store: &Store, lock: &Lockfile, name: &str) -> Result<Vec<(StoreItem, Vec<u8>)>> {
    let restore = format!("agentpack --env {name} env restore");
    let mut items = Vec::new();
    for (index, package) in lock.packages.iter().enumerate() {
        let module = package.module.as_str();
        let Some(expected) = &package.content_hash else {
            bail!(
                "{module} has no content hash in the lock, so the bundle could not be verified on import; nothing was written\n  fix  run `agentpack --env {name} lock`, then export again"
            );
        };
        let slot = match PackageStore::check_slot(store, &package.cache_key, expected)? {
            SlotCheck::Verified(slot) => slot,
            _ => bail!(
                "the store holds no verified copy of {module}; nothing was written\n  fix  run `{restore}` first, then export again"
            ),
        };
        let executables = store
            .store_path_of(&slot)
            .map(|path| store.source_executables(&path))
            .unwrap_or_default();
        let bytes = archive::tree_tar_zstd(&slot, &executables.iter().cloned().collect())?;
        items.push((
            item(
                format!("{STORE_DIR}/package-{index}.tar.zst"),
                &bytes,
                StoreContent::Package {
                    module: module.to_owned(),
                    cache_key: package.cache_key.as_str().to_owned(),
                    executables,
                },
            ),
            bytes,
        ));
    }
    let client = RegistryClient::with_limits(crate::env::limits()?)
        .context("cannot set up an HTTP client")?;
    let mut seen = BTreeSet::new();
    for record in &lock.mcp_servers {
        let Some(spec) = ExecSpec::from_record(record) else {
            continue;
        };
        for entry in &spec.tree {
            if !seen.insert(entry.integrity.clone()) {
                continue;
            }
            let package = package_name_at(&entry.path).to_owned();
            let url = tarball_url(&spec.registry, &package, &entry.version);
            let bytes = match client.download(&url) {
                Ok(bytes) => bytes,
                // Optional packages of other platforms may not exist for this one.
                Err(_) if entry.optional => continue,
                Err(error) => bail!(
                    "cannot download {package}@{} for the bundle: {error}; nothing was written\n  fix  check that the registry is reachable and export again",
                    entry.version
                ),
            };
            integrity::check(&entry.integrity, &bytes).map_err(|error| {
                anyhow::anyhow!(
                    "{package}@{} from {url} does not match the integrity in pack.lock: {error}; nothing was written",
                    entry.version
                )
            })?;
            let bytes = zstd_compress(&bytes)?;
            items.push((
                item(
                    format!("{STORE_DIR}/npm-{}.tgz.zst", items.len()),
                    &bytes,
                    StoreContent::NpmTarball {
                        package,
                        version: entry.version.clone(),
                        integrity: entry.integrity.clone(),
                    },
                ),
                bytes,
            ));
        }
    }
    Ok(items)
}

fn item(path: String, bytes: &[u8], content: StoreContent) -> StoreItem {
    StoreItem {
        path,
        size: bytes.len() as u64,
        sha256: super::bundle::sha256_hex(bytes),
        content,
    }
}

/// What [`import`] published.
#[derive(Debug, Default)]
pub struct Imported {
    pub packages: usize,
    pub npm_trees: usize,
    pub warnings: Vec<String>,
}

/// Verifies every store item of a bundle against `lock` (package trees by their locked content
/// hash, tarballs by their locked integrity), and only when all verify, publishes them into the
/// store. `payloads` holds the compressed bytes by entry name, already checked against
/// `bundle.json`.
pub fn import(
    store: &Store,
    lock: &Lockfile,
    items: &[StoreItem],
    payloads: &BTreeMap<String, Vec<u8>>,
    bundle: &Path,
) -> Result<Imported> {
    let scratch = PackageStore::scratch(store)?;
    let limits = crate::env::limits()?;
    let mut packages = Vec::new();
    let mut tarballs: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let locked_integrities: BTreeSet<&str> = lock
        .mcp_servers
        .iter()
        .flat_map(|record| record.tree.iter().map(|entry| entry.integrity.as_str()))
        .collect();
    for (index, item) in items.iter().enumerate() {
        let shown = format!("{}!/{}", bundle.display(), item.path);
        let compressed = payloads
            .get(&item.path)
            .with_context(|| format!("{shown} is missing; nothing was written"))?;
        match &item.content {
            StoreContent::Package {
                module,
                cache_key,
                executables,
            } => {
                let Some(package) = lock
                    .packages
                    .iter()
                    .find(|p| p.module.as_str() == module && p.cache_key.as_str() == cache_key)
                else {
                    bail!("{shown} holds {module}, which the bundle's pack.lock does not lock with that cache key; nothing was written");
                };
                let Some(expected) = &package.content_hash else {
                    bail!("{shown}: {module} has no content hash in pack.lock to verify it against; nothing was written");
                };
                let tree = scratch.path().join(index.to_string());
                archive::read_tree(
                    compressed.as_slice(),
                    Compression::Zstd,
                    &tree,
                    &limits,
                    &shown,
                )
                .map_err(|error| {
                    anyhow::anyhow!("{shown} cannot be unpacked: {error}; nothing was written")
                })?;
                if let TreeMatch::Mismatch { actual } =
                    PackageStore::verify_tree(store, &tree, expected)?
                {
                    bail!(
                        "{shown}: the tree of {module} hashes to {actual}, not to its content_hash {expected} in pack.lock (the bundle is damaged or was changed); nothing was written\n  fix  get an intact copy, or re-export it"
                    );
                }
                packages.push((package, tree, executables.clone()));
            }
            StoreContent::NpmTarball {
                package,
                version,
                integrity: declared,
            } => {
                if !locked_integrities.contains(declared.as_str()) {
                    bail!("{shown} holds {package}@{version}, which no MCP server tree in pack.lock pins; nothing was written");
                }
                let bytes = zstd_decompress(compressed, &shown)?;
                integrity::check(declared, &bytes).map_err(|error| {
                    anyhow::anyhow!(
                        "{shown}: {package}@{version} does not match its integrity in pack.lock: {error}; nothing was written\n  fix  get an intact copy, or re-export it"
                    )
                })?;
                tarballs.insert(declared.clone(), bytes);
            }
        }
    }

    // Everything verified: publish.
    let mut imported = Imported::default();
    for (package, tree, executables) in packages {
        let Some(expected) = &package.content_hash else {
            continue;
        };
        let slot = PackageStore::publish(
            store,
            &package.cache_key,
            package.module.as_str(),
            &tree,
            expected,
            OnExisting::Keep,
        )?;
        PackageStore::record_executables(store, &slot, &executables.into_iter().collect())?;
        imported.packages += 1;
    }
    let (os, cpu) = node_platform();
    for record in &lock.mcp_servers {
        let Some(spec) = ExecSpec::from_record(record) else {
            continue;
        };
        let wanted: Vec<_> = spec
            .tree
            .iter()
            .filter(|e| !e.optional || applies_on(&e.to_tree_entry(), os, cpu))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        if let Some(missing) = wanted.iter().find(|e| !tarballs.contains_key(&e.integrity)) {
            imported.warnings.push(format!(
                "the bundle has no tarball of {}@{} for this platform ({os}-{cpu}); the MCP server {} will download its tree when it starts",
                package_name_at(&missing.path),
                missing.version,
                record.name
            ));
            continue;
        }
        let work = store.temp_dir()?;
        for entry in &wanted {
            let Some(bytes) = tarballs.get(&entry.integrity) else {
                continue;
            };
            unpack_tarball_limited(bytes, &work.path().join(&entry.path), &limits).map_err(
                |message| {
                    anyhow::anyhow!(
                        "cannot unpack {}@{}: {message}",
                        package_name_at(&entry.path),
                        entry.version
                    )
                },
            )?;
        }
        let label = format!(
            "npm-tree-{}-{}",
            spec.package.replace('/', "-"),
            spec.version
        );
        let tree = store.publish_tree(work.path(), &label, None)?;
        point_at(&tree_pointer(store, &spec.tree_digest), tree.path())?;
        imported.npm_trees += 1;
    }
    Ok(imported)
}

/// Points the npm-tree pointer at `target`, atomically.
fn point_at(pointer: &Path, target: &Path) -> Result<()> {
    let dir = pointer.parent().unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir)?;
    agentpack_fs::write_symlink(
        target,
        pointer,
        agentpack_fs::TempName::Prefix(".import."),
        agentpack_fs::Durability::None,
    )?;
    Ok(())
}
