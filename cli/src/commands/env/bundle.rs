//! `env export` and `env import`: an environment as a portable bundle.
//!
//! A bundle is an uncompressed tar of regular files at its top level: `bundle.json` first (the
//! format name, a schema version, and the size and SHA-256 of every other file), then
//! `agentpack.toml`, the unchanged `pack.lock` and the optional `contract.json`. Nothing else goes
//! in: no bindings, caches, receipts, logs, auth or history.
//!
//! Export refuses (naming the item and the fix, writing nothing) what [`agentpack_builders::sharing`] finds,
//! symlinked definition files, and an output file that exists. Import accepts only those regular
//! files, each at most 4 MiB, once; it refuses links, devices, directories, traversal, unknown
//! names, an unknown schema, digest mismatches and invalid definitions, validates in a private
//! temporary directory, and publishes only when complete, to a destination that does not exist.
//!
//! `--with-store` adds the store content the environment needs under `store/` (see
//! [`super::offline`]); `bundle.json` then lists it as `store`, and import verifies it against the
//! lock before publishing it into the store and the definition into the environments directory.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::definition::{self, DefinitionFiles, CONTRACT_FILE, MAX_FILE_BYTES};
use super::offline::{self, StoreItem};
use crate::context::{Context, Home, LOCK_FILE, MANIFEST_FILE};
use crate::env::{self, EnvVars};
use crate::output;
use agentpack_builders::sharing;

/// The bundle's own description.
pub const BUNDLE_JSON: &str = "bundle.json";
/// `bundle.json`'s `format`.
pub const FORMAT: &str = "agentpack-environment-bundle";
/// The one schema version this binary writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The largest bundle file read (four files at the limit, with their headers).
const MAX_BUNDLE_BYTES: u64 = 4 * MAX_FILE_BYTES + 64 * 1024;
/// The largest bundle with store content (`--with-store`) read.
const MAX_STORE_BUNDLE_BYTES: u64 = 4 * super::offline::MAX_ITEM_BYTES;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The bundle to write (must not exist).
    pub file: PathBuf,
    /// The environment to export.
    #[arg(long, value_name = "NAME")]
    pub from: String,
    /// Also pack the store content the environment needs (its locked packages and the npm
    /// tarballs of its MCP server trees, zstd-compressed), for machines with no network.
    #[arg(long)]
    pub with_store: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle to read.
    pub file: PathBuf,
    /// The name of the new environment (must not exist).
    #[arg(long, value_name = "NAME")]
    pub name: String,
}

/// `bundle.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleDescription {
    format: String,
    schema_version: u32,
    files: Vec<BundledFile>,
    /// `--with-store`: the store items under `store/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    store: Vec<StoreItem>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundledFile {
    path: String,
    size: u64,
    sha256: String,
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The tar bytes of a bundle of `files` and the store items `store` (with their bytes).
fn render(files: &DefinitionFiles, store: &[(StoreItem, Vec<u8>)]) -> Result<Vec<u8>> {
    let description = BundleDescription {
        format: FORMAT.to_owned(),
        schema_version: SCHEMA_VERSION,
        files: files
            .named()
            .into_iter()
            .map(|(path, bytes)| BundledFile {
                path: path.to_owned(),
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            })
            .collect(),
        store: store.iter().map(|(item, _)| item.clone()).collect(),
    };
    let mut description = serde_json::to_vec_pretty(&description)?;
    description.push(b'\n');
    let mut builder = tar::Builder::new(Vec::new());
    let mut append = |name: &str, bytes: &[u8]| -> Result<()> {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        builder.append_data(&mut header, name, bytes)?;
        Ok(())
    };
    append(BUNDLE_JSON, &description)?;
    for (name, bytes) in files.named() {
        append(name, bytes)?;
    }
    for (item, bytes) in store {
        append(&item.path, bytes)?;
    }
    Ok(builder.into_inner()?)
}

pub fn run_export(ctx: &Context, environments: &Path, args: &ExportArgs) -> Result<ExitCode> {
    let output_path = ctx.cwd.join(&args.file);
    if fs_err::symlink_metadata(&output_path).is_ok() {
        bail!(
            "{} already exists; export never overwrites a file\n  fix  pick another file name, or remove it first",
            output_path.display()
        );
    }
    let environment = super::existing_environment(environments, &args.from)?;
    let files = DefinitionFiles::read(&environment)
        .map_err(|err| err.context(format!("cannot export environment `{}`", args.from)))?;
    if files.lock.is_none() {
        bail!(
            "environment `{}` has no {LOCK_FILE}: a bundle carries the lock unchanged\n  fix  run `agentpack --env {} lock`, then export again",
            args.from,
            args.from
        );
    }
    let (manifest, lock) = definition::validate_dir(&environment)?;
    let lock = lock.unwrap_or_default();
    let home = Home::from_env()?;
    let mut private_dirs = vec![home.root.clone()];
    if let Some(home) = env::var(EnvVars::HOME) {
        private_dirs.push(PathBuf::from(home));
    }
    let found = sharing::findings(&manifest, &lock, &private_dirs);
    if !found.is_empty() {
        let mut message = format!(
            "cannot export environment `{}`: {} item(s) of {} cannot be shared; nothing was written",
            args.from,
            found.len(),
            environment.join(MANIFEST_FILE).display()
        );
        for finding in &found {
            message.push_str(&format!(
                "\n  {}: {}\n    fix  {}",
                finding.item, finding.problem, finding.fix
            ));
        }
        bail!(message);
    }
    let store_items = if args.with_store {
        let store = crate::session::open_store(&home)?;
        let items = offline::collect(&store, &lock, &args.from)?;
        crate::session::flush_store_warnings(&store);
        items
    } else {
        Vec::new()
    };
    let bytes = render(&files, &store_items)?;
    // 0600 and flushed, as the temp file it is made from always was; never replaces a file.
    let options = agentpack_fs::WriteOptions::private_file()
        .durability(agentpack_fs::Durability::File)
        .temp(agentpack_fs::TempName::Prefix(".agentpack-bundle-"));
    agentpack_fs::write_new_file(&output_path, &bytes, &options).with_context(|| {
        format!(
            "cannot write {} (does it exist now?)",
            output_path.display()
        )
    })?;
    if ctx.says() {
        let mut names: Vec<String> = files
            .named()
            .into_iter()
            .map(|(name, _)| name.to_owned())
            .collect();
        if !store_items.is_empty() {
            names.push(format!("{} store item(s)", store_items.len()));
        }
        output::info(&format!(
            "Exported environment `{}` to {} ({}, {BUNDLE_JSON}); review it before sharing: the check cannot find every secret a string may hold",
            args.from,
            output_path.display(),
            names.join(", ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The documented files a bundle may hold.
const BUNDLE_FILES: &[&str] = &[BUNDLE_JSON, MANIFEST_FILE, LOCK_FILE, CONTRACT_FILE];

/// Reads the entries of a bundle: only the documented regular files, each once and at most
/// [`MAX_FILE_BYTES`].
fn read_entries(bundle: &Path, bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>> {
    let shown = bundle.display();
    let mut archive = tar::Archive::new(bytes);
    let mut files = BTreeMap::new();
    let entries = archive
        .entries()
        .with_context(|| format!("{shown} is not a bundle (not a tar archive)"))?;
    for entry in entries {
        let mut entry =
            entry.with_context(|| format!("{shown} is not a bundle (a damaged tar archive)"))?;
        let raw_name = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw_name).into_owned();
        if name.starts_with('/')
            || name.split(['/', '\\']).any(|part| part == "..")
            || (name.contains('/') && !offline::is_store_entry(&name))
        {
            bail!(
                "{shown}: the entry `{name}` is a path, not a file name (path traversal is refused); nothing was written\n  fix  re-export it with `agentpack env export`"
            );
        }
        let kind = entry.header().entry_type();
        let what = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => None,
            tar::EntryType::Symlink | tar::EntryType::Link => Some("a link"),
            tar::EntryType::Char | tar::EntryType::Block => Some("a device"),
            tar::EntryType::Fifo => Some("a FIFO"),
            tar::EntryType::Directory => Some("a directory"),
            _ => Some("not a regular file"),
        };
        if let Some(what) = what {
            bail!("{shown}: the entry `{name}` is {what}; a bundle holds only regular files; nothing was written");
        }
        let store_entry = offline::is_store_entry(&name);
        if !BUNDLE_FILES.contains(&name.as_str()) && !store_entry {
            bail!(
                "{shown}: unexpected entry `{name}`; a bundle holds only {}; nothing was written",
                BUNDLE_FILES.join(", ")
            );
        }
        if files.contains_key(&name) {
            bail!("{shown}: the entry `{name}` appears twice; nothing was written");
        }
        let (limit, limit_text) = if store_entry {
            (offline::MAX_ITEM_BYTES, "256 MiB")
        } else {
            (MAX_FILE_BYTES, "4 MiB")
        };
        let declared = entry.header().size().unwrap_or(u64::MAX);
        if declared > limit {
            bail!(
                "{shown}: `{name}` is {declared} bytes, over the {limit}-byte ({limit_text}) limit; nothing was written"
            );
        }
        let mut content = Vec::new();
        (&mut entry)
            .take(limit + 1)
            .read_to_end(&mut content)
            .with_context(|| format!("{shown}: cannot read `{name}`"))?;
        if content.len() as u64 > limit {
            bail!("{shown}: `{name}` is over the {limit}-byte ({limit_text}) limit; nothing was written");
        }
        files.insert(name, content);
    }
    Ok(files)
}

/// What a bundle holds, checked against its `bundle.json`.
struct VerifiedBundle {
    files: DefinitionFiles,
    /// `--with-store` items (not yet verified against the lock: see [`offline::import`]).
    store: Vec<StoreItem>,
    /// Their compressed bytes, by entry name.
    payloads: BTreeMap<String, Vec<u8>>,
}

/// Checks that the bundle `shown` holds `path`, listed in `bundle.json` with `size` and `sha256`,
/// with those bytes.
fn check_listed(
    shown: &std::path::Display<'_>,
    entries: &BTreeMap<String, Vec<u8>>,
    path: &str,
    size: u64,
    sha256: &str,
) -> Result<()> {
    let Some(bytes) = entries.get(path) else {
        bail!("{shown}: {BUNDLE_JSON} lists `{path}`, which the bundle does not hold; nothing was written");
    };
    if bytes.len() as u64 != size || sha256_hex(bytes) != sha256.to_ascii_lowercase() {
        bail!(
            "{shown}: `{path}` does not match its SHA-256 in {BUNDLE_JSON} (the bundle is damaged or was changed); nothing was written\n  fix  get an intact copy, or re-export it"
        );
    }
    Ok(())
}

/// Checks the entries against `bundle.json` and returns the definition they hold.
fn verified_definition(
    bundle: &Path,
    mut entries: BTreeMap<String, Vec<u8>>,
) -> Result<VerifiedBundle> {
    let shown = bundle.display();
    let Some(description) = entries.remove(BUNDLE_JSON) else {
        bail!(
            "{shown} has no {BUNDLE_JSON}: it is not a bundle, or an older agentpack wrote it; nothing was written\n  fix  re-export it with `agentpack env export`"
        );
    };
    let value: serde_json::Value = serde_json::from_slice(&description)
        .with_context(|| format!("{shown}: {BUNDLE_JSON} is not valid JSON"))?;
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    if value.get("format").and_then(serde_json::Value::as_str) != Some(FORMAT) {
        bail!("{shown}: {BUNDLE_JSON} does not describe an agentpack environment bundle; nothing was written");
    }
    if version != Some(u64::from(SCHEMA_VERSION)) {
        bail!(
            "{shown}: unsupported bundle schema version {} (this agentpack reads {SCHEMA_VERSION}); nothing was written\n  fix  import it with the agentpack that exported it, or re-export it with this one",
            version.map_or_else(|| "(none)".to_owned(), |v| v.to_string())
        );
    }
    let description: BundleDescription = serde_json::from_value(value).with_context(|| {
        format!("{shown}: {BUNDLE_JSON} does not match schema version {SCHEMA_VERSION}")
    })?;
    let mut listed = std::collections::BTreeSet::new();
    for file in &description.files {
        if !listed.insert(file.path.as_str()) {
            bail!(
                "{shown}: {BUNDLE_JSON} lists `{}` twice; nothing was written",
                file.path
            );
        }
        check_listed(&shown, &entries, &file.path, file.size, &file.sha256)?;
    }
    let mut payloads = BTreeMap::new();
    for item in &description.store {
        if !offline::is_store_entry(&item.path) || !listed.insert(item.path.as_str()) {
            bail!(
                "{shown}: {BUNDLE_JSON} lists the store item `{}` twice, or not under store/; nothing was written",
                item.path
            );
        }
        check_listed(&shown, &entries, &item.path, item.size, &item.sha256)?;
    }
    if let Some(unlisted) = entries.keys().find(|name| !listed.contains(name.as_str())) {
        bail!("{shown}: `{unlisted}` is not listed in {BUNDLE_JSON}; nothing was written");
    }
    for item in &description.store {
        if let Some(bytes) = entries.remove(&item.path) {
            payloads.insert(item.path.clone(), bytes);
        }
    }
    let manifest = entries
        .remove(MANIFEST_FILE)
        .with_context(|| format!("{shown} holds no {MANIFEST_FILE}; nothing was written"))?;
    let lock = entries
        .remove(LOCK_FILE)
        .with_context(|| format!("{shown} holds no {LOCK_FILE}; nothing was written"))?;
    let contract = entries.remove(CONTRACT_FILE);
    // Messages name the bundle, not the private directory the files are checked in later.
    let text = |name: &str, bytes: &[u8]| -> Result<String> {
        String::from_utf8(bytes.to_vec())
            .with_context(|| format!("{shown}: `{name}` is not UTF-8; nothing was written"))
    };
    let in_bundle = |name: &str| PathBuf::from(format!("{}!/{name}", bundle.display()));
    agentpack_lockfile::Manifest::parse(
        &text(MANIFEST_FILE, &manifest)?,
        &in_bundle(MANIFEST_FILE),
    )
    .map_err(|err| {
        anyhow::Error::new(err).context("the bundle's manifest is invalid; nothing was written")
    })?;
    agentpack_lockfile::Lockfile::parse(&text(LOCK_FILE, &lock)?, &in_bundle(LOCK_FILE)).map_err(
        |err| anyhow::Error::new(err).context("the bundle's lock is invalid; nothing was written"),
    )?;
    if let Some(contract) = &contract {
        definition::check_contract(contract, &in_bundle(CONTRACT_FILE))
            .context("the bundle's contract is invalid; nothing was written")?;
    }
    Ok(VerifiedBundle {
        files: DefinitionFiles {
            manifest,
            lock: Some(lock),
            contract,
        },
        store: description.store,
        payloads,
    })
}

pub fn run_import(
    ctx: &Context,
    home: &Home,
    environments: &Path,
    args: &ImportArgs,
) -> Result<ExitCode> {
    let destination = super::environment_path(environments, &args.name)?;
    definition::destination_state(&destination, false)?;
    let bundle = ctx.cwd.join(&args.file);
    let meta = fs_err::metadata(&bundle)?;
    if !meta.is_file() {
        bail!("{} is not a file", bundle.display());
    }
    if meta.len() > MAX_STORE_BUNDLE_BYTES {
        bail!(
            "{} is {} bytes, larger than any bundle can be ({MAX_STORE_BUNDLE_BYTES}); nothing was written",
            bundle.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::new();
    fs_err::File::open(&bundle)?
        .take(MAX_STORE_BUNDLE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    let entries = read_entries(&bundle, &bytes)?;
    let verified = verified_definition(&bundle, entries)?;
    let files = verified.files;
    if verified.store.is_empty() && meta.len() > MAX_BUNDLE_BYTES {
        bail!(
            "{} is {} bytes, larger than a bundle without store content can be ({MAX_BUNDLE_BYTES}); nothing was written",
            bundle.display(),
            meta.len()
        );
    }
    home.ensure()?;
    if !verified.store.is_empty() {
        // Validated in a private directory first: the lock the items are verified against is
        // the one that gets published.
        let text = String::from_utf8_lossy(files.lock.as_deref().unwrap_or_default()).into_owned();
        let lock = agentpack_lockfile::Lockfile::parse(&text, &bundle)?;
        let store = crate::session::open_store(home)?;
        let imported =
            offline::import(&store, &lock, &verified.store, &verified.payloads, &bundle)?;
        crate::session::flush_store_warnings(&store);
        for warning in &imported.warnings {
            output::warn(warning);
        }
        if ctx.says() {
            output::info(&format!(
                "Verified and published {} package(s) and {} npm tree(s) from {} into the store",
                imported.packages,
                imported.npm_trees,
                bundle.display()
            ));
        }
    }
    definition::publish(environments, &destination, &files, false)?;
    if ctx.says() {
        output::info(&format!(
            "Imported environment `{}` at {}; SHA-256 proves the files arrived intact, not who wrote them: review it before launching",
            args.name,
            destination.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
