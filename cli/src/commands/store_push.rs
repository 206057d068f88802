//! `agentpack store push oci://REGISTRY/REPOSITORY [--project | --all]`: fill a team cache.
//!
//! Pushes store paths as OCI artifacts (see `agentpack_builders::oci`), each tagged by
//! `identity_tag` of its content identity, which is what substituters ask for:
//! - `--project` (the default): the closure the project's `pack.lock` needs, every package with a
//!   `content_hash` from its verified cache slot, and every npm MCP server tree (`tree_digest`) as
//!   the tarballs its lock records pin (`agentpack_builders::substitute_npm`: downloaded from the
//!   tree's registry and checked against their integrities; the unpacked tree is never pushed, it
//!   depends on the platform and nothing in the lock could verify it);
//! - `--all`: every package slot in the store, and the npm tree of every mcp-exec spec it holds;
//! - `--generations` (with either): also the project's current generation of every mode, as
//!   `application/vnd.agentpack.generation.v1` tagged by `generation:<store path name>`.
//!
//! An identity tag the repository already has is not pushed again (one HEAD, nothing uploaded);
//! the blobs of a new artifact are also asked for first. Path and `local/` packages are never
//! pushed (they are copies of directories on this machine, rebuilt from them), nor packages
//! without a content hash (nothing could verify them on the way back). A locked package whose slot
//! is not in the store is reported as missing and makes the command fail after pushing the rest.
//! Output: one line per item (`pushed` / `present` / `missing` / `skipped`), or with `--json`
//! the same items in the automation envelope.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use agentpack_builders::limits::Limits;
use agentpack_builders::npm::exec_spec::{ExecSpec, EXEC_SPEC_FILE};
use agentpack_builders::npm::registry::RegistryClient;
use agentpack_builders::oci::{
    identity_tag, ArtifactConfig, ArtifactKind, OciClient, OciReference, OciRepository, PushJob,
};
use agentpack_builders::package_store::{PackageStore, SlotCheck};
use agentpack_builders::substitute_npm::write_tarball_dir;
use agentpack_lockfile::validate::ContentHash;
use agentpack_store::{Store, StoreTempDir};
use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::context::Context;
use crate::env;
use crate::output;
use crate::project::Project;
use crate::session;

#[derive(Debug, Args)]
pub struct StorePushArgs {
    /// The OCI repository to push to: oci://REGISTRY/REPOSITORY.
    #[arg(value_name = "oci://REGISTRY/REPOSITORY")]
    pub repository: String,
    /// Push what the project's pack.lock needs (the default).
    #[arg(long, conflicts_with = "all")]
    pub project: bool,
    /// Push every package and npm tree in the store.
    #[arg(long)]
    pub all: bool,
    /// Also push the project's current generation of every mode (its staging pointers' targets).
    #[arg(long)]
    pub generations: bool,
}

/// One store path to push.
struct Item {
    kind: ArtifactKind,
    module: String,
    commit: Option<String>,
    identity: String,
    tree: Option<PathBuf>,
    executables: Vec<String>,
    note: Option<String>,
    /// Locked but not (verified) in the store: reported, and the command fails.
    missing: bool,
    /// An npm tree: its spec; its artifact (the tree's tarballs) is made by [`prepare_npm_items`].
    npm: Option<ExecSpec>,
    /// The repository already has the identity tag: its manifest digest (nothing is pushed).
    present: Option<String>,
    /// The artifact could not be made: why (the command fails after pushing the rest).
    failed: Option<String>,
}

impl Item {
    /// An item of `kind` with no tree, executables or note yet.
    fn new(kind: ArtifactKind, module: String, commit: Option<String>, identity: String) -> Item {
        Item {
            kind,
            module,
            commit,
            identity,
            tree: None,
            executables: Vec::new(),
            note: None,
            missing: false,
            npm: None,
            present: None,
            failed: None,
        }
    }
}

#[derive(Debug, Serialize)]
struct ItemReport {
    kind: &'static str,
    module: String,
    content_identity: String,
    tag: String,
    /// `pushed`, `present`, `missing`, `skipped` or `failed`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest_digest: Option<String>,
    uploaded_blobs: usize,
    uploaded_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Debug, Serialize)]
struct PushReport {
    repository: String,
    pushed: usize,
    present: usize,
    missing: usize,
    skipped: usize,
    uploaded_bytes: u64,
    items: Vec<ItemReport>,
}

fn kind_name(kind: ArtifactKind) -> &'static str {
    match kind {
        ArtifactKind::Package => "package",
        ArtifactKind::NpmTree => "npm-tree",
        ArtifactKind::Generation => "generation",
    }
}

/// The current generation of every mode of the project (`<staging root>/modes/<mode>` pointers).
fn generation_items(ctx: &Context, store: &Store) -> Result<Vec<Item>> {
    let project = Project::discover(ctx)?;
    let modes = project.staging_root.join("modes");
    let mut items = Vec::new();
    let Ok(entries) = fs_err::read_dir(&modes) else {
        return Ok(items);
    };
    let mut pointers: Vec<(String, PathBuf)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().to_str()?.to_owned();
            (!name.starts_with('.')).then(|| (name, entry.path()))
        })
        .collect();
    pointers.sort();
    let mut seen = BTreeSet::new();
    for (mode, pointer) in pointers {
        let Some(path) = store.store_path_of(&pointer) else {
            continue;
        };
        let name = path.name().as_str().to_owned();
        if !seen.insert(name.clone()) {
            continue;
        }
        let tree = path.path().to_path_buf();
        let mut executables: BTreeSet<String> =
            store.source_executables(&path).into_iter().collect();
        executables.extend(agentpack_builders::oci::archive::executables_on_disk(
            &tree,
        )?);
        items.push(Item {
            tree: Some(tree),
            executables: executables.into_iter().collect(),
            ..Item::new(
                ArtifactKind::Generation,
                format!("generation of mode {mode}"),
                None,
                format!("generation:{name}"),
            )
        });
    }
    Ok(items)
}

fn executables_of(store: &Store, tree: &std::path::Path) -> Vec<String> {
    store
        .store_path_of(tree)
        .map(|path| store.source_executables(&path))
        .unwrap_or_default()
}

/// The items of the project's lock.
fn project_items(ctx: &Context, store: &Store) -> Result<Vec<Item>> {
    let project = Project::discover(ctx)?;
    let manifest = project.load_manifest()?;
    let lock = project.load_lock(&manifest)?;
    let mut items = Vec::new();
    for package in &lock.packages {
        let mut item = Item::new(
            ArtifactKind::Package,
            package.module.as_str().to_owned(),
            Some(package.commit.as_str().to_owned()),
            package
                .content_hash
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        );
        if package.url.starts_with("path:") || package.url.starts_with("local:") {
            item.note = Some("a copy of a directory on this machine; not pushed".to_owned());
            items.push(item);
            continue;
        }
        let Some(expected) = &package.content_hash else {
            item.note = Some(
                "no content hash in pack.lock, so nothing could verify it; run `agentpack lock`"
                    .to_owned(),
            );
            items.push(item);
            continue;
        };
        match PackageStore::check_slot(store, &package.cache_key, expected)? {
            SlotCheck::Verified(slot) => {
                item.executables = executables_of(store, &slot);
                item.tree = Some(slot);
            }
            SlotCheck::Missing => {
                item.note = Some("not in the store; run `agentpack sync` first".to_owned());
                item.missing = true;
            }
            SlotCheck::Mismatch { path, actual } => {
                item.note = Some(format!(
                    "its cache slot {} hashes to {actual}, not to the lock's hash; run `agentpack sync --repair` first",
                    path.display()
                ));
                item.missing = true;
            }
        }
        items.push(item);
    }
    let mut seen = BTreeSet::new();
    for record in &lock.mcp_servers {
        let Some(spec) = ExecSpec::from_record(record) else {
            continue;
        };
        if !seen.insert(spec.tree_digest.clone()) {
            continue;
        }
        items.push(npm_item(spec));
    }
    Ok(items)
}

/// The item of an npm MCP server tree: its artifact is made from the tarballs its records pin.
fn npm_item(spec: ExecSpec) -> Item {
    let item = Item::new(
        ArtifactKind::NpmTree,
        format!("{}@{}", spec.package, spec.version),
        None,
        spec.tree_digest.clone(),
    );
    Item {
        npm: Some(spec),
        ..item
    }
}

/// Every mcp-exec spec published in the store (`<store path>/mcp-exec.json`), sorted by tree digest.
fn exec_specs_in_store(store: &Store) -> Result<Vec<ExecSpec>> {
    let mut specs = Vec::new();
    let Ok(entries) = fs_err::read_dir(store.store_dir()) else {
        return Ok(specs);
    };
    for entry in entries.flatten() {
        let file = entry.path().join(EXEC_SPEC_FILE);
        if !entry.file_name().to_string_lossy().contains("mcp-exec-") || !file.is_file() {
            continue;
        }
        if let Ok(spec) = ExecSpec::load(&file) {
            specs.push(spec);
        }
    }
    specs.sort_by(|a, b| a.tree_digest.cmp(&b.tree_digest));
    Ok(specs)
}

/// Makes the artifact of every npm tree item the repository does not have yet: the tree's
/// tarballs, downloaded from its registry and checked against the lock's integrities, in a store
/// work directory (returned: it must outlive the push). A tree whose identity tag exists is
/// `present` and nothing is downloaded.
fn prepare_npm_items(
    store: &Store,
    client: &OciClient,
    repository: &OciRepository,
    items: &mut [Item],
    limits: Limits,
) -> Result<Vec<StoreTempDir>> {
    let mut dirs = Vec::new();
    if !items.iter().any(|item| item.npm.is_some()) {
        return Ok(dirs);
    }
    let npm = RegistryClient::with_limits(limits)?;
    for item in items.iter_mut() {
        let Some(spec) = &item.npm else {
            continue;
        };
        let tag = OciReference::tag(&identity_tag(&item.identity))?;
        if let Some(digest) = client.resolve(repository, &tag)? {
            item.present = Some(digest);
            continue;
        }
        let dir = store.temp_dir()?;
        match write_tarball_dir(spec, &npm, dir.path()) {
            Ok(written) => {
                if !written.skipped_optional.is_empty() {
                    item.note = Some(format!(
                        "optional packages the registry has no tarball for were left out: {}",
                        written.skipped_optional.join(", ")
                    ));
                }
                item.tree = Some(dir.path().to_path_buf());
                dirs.push(dir);
            }
            Err(error) => item.failed = Some(error.to_string()),
        }
    }
    Ok(dirs)
}

/// Every package slot and npm tree in the store.
fn store_items(store: &Store) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut seen = BTreeSet::new();
    for (_key, name) in store.slots()? {
        let Some(path) = store.get(&name) else {
            continue;
        };
        let Some(hash) = store.meta(&path).ok().and_then(|meta| meta.tree_hash) else {
            continue;
        };
        let identity = ContentHash::from_digest(*hash.as_bytes()).to_string();
        if !seen.insert(identity.clone()) {
            continue;
        }
        items.push(Item {
            executables: store.source_executables(&path),
            tree: Some(path.path().to_path_buf()),
            ..Item::new(
                ArtifactKind::Package,
                name.label().to_owned(),
                None,
                identity,
            )
        });
    }
    // npm trees by the mcp-exec specs the store holds (each names its tree's records).
    let mut trees = BTreeSet::new();
    for spec in exec_specs_in_store(store)? {
        if trees.insert(spec.tree_digest.clone()) {
            items.push(npm_item(spec));
        }
    }
    Ok(items)
}

/// `store push`, on the store `agentpack store` opened.
pub fn run(ctx: &Context, store: &Store, args: &StorePushArgs) -> Result<ExitCode> {
    let repository: OciRepository = args.repository.parse()?;
    let mut items = if args.all {
        store_items(store)?
    } else {
        project_items(ctx, store)?
    };
    if args.generations {
        items.extend(generation_items(ctx, store)?);
    }
    let transport = env::oci_transport()?;
    for warning in transport.warnings() {
        output::warn(warning);
    }
    let limits = transport.limits;
    let client = OciClient::new(transport)?;
    let _npm_dirs = {
        let _ticker =
            output::Ticker::start(ctx, "downloading the npm tarballs of the MCP server trees");
        prepare_npm_items(store, &client, &repository, &mut items, limits)?
    };
    let version = env!("CARGO_PKG_VERSION").to_owned();
    let mut report = PushReport {
        repository: repository.to_string(),
        pushed: 0,
        present: 0,
        missing: 0,
        skipped: 0,
        uploaded_bytes: 0,
        items: Vec::new(),
    };
    // Every tree that is there is pushed in one batch (several at a time); a failure of one item
    // stops the command after the batch, naming it.
    let jobs: Vec<PushJob> = items
        .iter()
        .filter_map(|item| {
            let tree = item.tree.clone()?;
            Some(PushJob {
                tags: vec![identity_tag(&item.identity)],
                tree,
                config: ArtifactConfig {
                    kind: item.kind,
                    module: item.module.clone(),
                    commit: item.commit.clone(),
                    content_identity: item.identity.clone(),
                    executables: item.executables.clone(),
                    agentpack_version: version.clone(),
                },
                keep_existing: true,
            })
        })
        .collect();
    let outcomes = {
        let _ticker = output::Ticker::start_with_status(
            ctx,
            &format!("pushing {} store paths to {repository}", jobs.len()),
            Some(crate::oci_progress::transfer_status(
                &client,
                Some(jobs.len()),
            )),
        );
        client.push_trees(&repository, &jobs)?
    };
    let mut outcomes = outcomes.into_iter();
    let mut failures = Vec::new();
    for item in items {
        let tag = if item.identity.is_empty() {
            String::new()
        } else {
            identity_tag(&item.identity)
        };
        let mut line = ItemReport {
            kind: kind_name(item.kind),
            module: item.module.clone(),
            content_identity: item.identity.clone(),
            tag: tag.clone(),
            status: "skipped",
            manifest_digest: None,
            uploaded_blobs: 0,
            uploaded_bytes: 0,
            note: item.note.clone(),
        };
        match &item.tree {
            None if item.present.is_some() => {
                line.status = "present";
                line.manifest_digest.clone_from(&item.present);
                report.present += 1;
            }
            None if item.failed.is_some() => {
                line.status = "failed";
                line.note.clone_from(&item.failed);
                failures.push(format!(
                    "{}: {}",
                    item.module,
                    item.failed.as_deref().unwrap_or_default()
                ));
            }
            None if item.missing => {
                line.status = "missing";
                report.missing += 1;
            }
            None => report.skipped += 1,
            Some(_) => match outcomes.next() {
                Some(Ok(outcome)) => {
                    line.status = if outcome.already_present() {
                        report.present += 1;
                        "present"
                    } else {
                        report.pushed += 1;
                        "pushed"
                    };
                    line.manifest_digest = Some(outcome.manifest_digest);
                    line.uploaded_blobs = outcome.uploaded_blobs;
                    line.uploaded_bytes = outcome.uploaded_bytes;
                    report.uploaded_bytes += outcome.uploaded_bytes;
                }
                Some(Err(error)) => {
                    line.status = "failed";
                    line.note = Some(error.to_string());
                    failures.push(format!("{}: {error}", item.module));
                }
                None => {
                    line.status = "failed";
                    failures.push(format!("{}: not pushed", item.module));
                }
            },
        }
        if !ctx.json {
            let detail = match (line.status, &line.note) {
                ("pushed", _) => format!(
                    " ({} blob{}, {} bytes)",
                    line.uploaded_blobs,
                    if line.uploaded_blobs == 1 { "" } else { "s" },
                    line.uploaded_bytes
                ),
                (_, Some(note)) => format!(": {note}"),
                _ => String::new(),
            };
            let shown = if tag.is_empty() {
                String::new()
            } else {
                format!(
                    " {}",
                    repository.display_with(&OciReference::Tag(tag.clone()))
                )
            };
            output::stdout(&format!(
                "{:<8}{}{shown}{detail}\n",
                line.status, line.module
            ))?;
        }
        report.items.push(line);
    }
    session::flush_store_warnings(store);
    if ctx.json {
        output::json(&report)?;
    } else {
        output::stdout(&format!(
            "{} pushed, {} already present, {} missing, {} skipped ({} bytes uploaded to {})\n",
            report.pushed,
            report.present,
            report.missing,
            report.skipped,
            report.uploaded_bytes,
            report.repository
        ))?;
    }
    if let Some(first) = failures.first() {
        anyhow::bail!(
            "{} of the store paths could not be pushed to {repository}; the first: {first}",
            failures.len()
        );
    }
    if report.missing > 0 {
        output::warn(&format!(
            "{} locked item(s) are not in the store and were not pushed\n  fix  run `agentpack sync`, then push again",
            report.missing
        ));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
