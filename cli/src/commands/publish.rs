//! `agentpack publish DIR oci://REGISTRY/REPOSITORY:TAG`: push a skill or plugin directory as an
//! OCI artifact.
//!
//! DIR is read the way a path package is (`agentpack add ./DIR`): copied by the extraction rules
//! (files that look like secrets refused, links leaving the package not followed), normalized, and
//! hashed, so the `content_hash` printed is the one `add` of that directory locks. The artifact
//! (see `agentpack_builders::oci`) is pushed under TAG and under the identity tag of its content
//! hash, so a substituter finds it too. Blobs and tags the registry already has are not sent
//! again. The copy lives in a temporary directory; the store and the project are not touched.

use std::path::PathBuf;
use std::process::ExitCode;

use agentpack_builders::local_package;
use agentpack_builders::normalize::{self, NormalizeContext};
use agentpack_builders::oci::{
    identity_tag, parse_oci_url, ArtifactConfig, ArtifactKind, OciClient, OciReference,
};
use agentpack_lockfile::validate::ContentHash;
use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use crate::context::Context;
use crate::env;
use crate::output;

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The skill or plugin directory (it holds SKILL.md, a plugin manifest or agentpack.toml).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Where to push it: oci://REGISTRY/REPOSITORY:TAG.
    #[arg(value_name = "oci://REGISTRY/REPOSITORY:TAG")]
    pub target: String,
}

#[derive(Debug, Serialize)]
struct PublishReport {
    directory: String,
    repository: String,
    tag: String,
    identity_tag: String,
    kind: &'static str,
    content_hash: String,
    manifest_digest: String,
    uploaded_blobs: usize,
    uploaded_bytes: u64,
    executables: Vec<String>,
    warnings: Vec<String>,
}

pub fn run(ctx: &Context, args: &PublishArgs) -> Result<ExitCode> {
    let (repository, reference) = parse_oci_url(&args.target)?;
    let tag = match reference {
        Some(OciReference::Tag(tag)) => tag,
        Some(OciReference::Digest(digest)) => bail!(
            "cannot publish to {}: a digest names what was pushed, it cannot be pushed to\n  fix  name a tag: {repository}:1.0.0",
            repository.display_with(&OciReference::Digest(digest))
        ),
        None => bail!(
            "{} names no tag to publish under\n  fix  add one: {repository}:1.0.0",
            args.target
        ),
    };
    let dir = ctx.cwd.join(&args.dir);
    if !dir.is_dir() {
        bail!(
            "{} is not a directory\n  fix  pass the skill or plugin directory to publish",
            dir.display()
        );
    }
    if !normalize::is_package_root(&dir) {
        bail!(
            "{} is not a skill or plugin directory: it holds none of {}\n  fix  publish the directory that holds SKILL.md or the plugin manifest",
            dir.display(),
            normalize::PACKAGE_MARKERS.join(", ")
        );
    }
    let module = repository.to_string();
    let work = tempfile::tempdir()?;
    let tree = work.path().join("package");
    let copy = local_package::copy_path_package(&module, &dir, &tree)?;
    let warnings = copy.warnings(&module);
    for warning in &warnings {
        output::warn(warning);
    }
    let normalized = normalize::normalize_package(&tree, &NormalizeContext::without_repo(&module))?;
    let hash = agentpack_store::hash_tree(&tree)?;
    let content_hash = ContentHash::from_digest(*hash.as_bytes()).to_string();
    let executables: Vec<String> = normalized
        .with_copied_executables(&copy.executables)
        .into_iter()
        .collect();
    let identity = identity_tag(&content_hash);
    let config = ArtifactConfig {
        kind: ArtifactKind::Package,
        module: module.clone(),
        commit: None,
        content_identity: content_hash.clone(),
        executables: executables.clone(),
        agentpack_version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let transport = env::oci_transport()?;
    for warning in transport.warnings() {
        output::warn(warning);
    }
    let client = OciClient::new(transport)?;
    let outcome = {
        let _ticker = output::Ticker::start_with_status(
            ctx,
            &format!("publishing to {repository}"),
            Some(crate::oci_progress::transfer_status(&client, None)),
        );
        client.push_tree_tagged(
            &repository,
            &[tag.as_str(), identity.as_str()],
            &tree,
            &config,
        )?
    };
    let report = PublishReport {
        directory: copy.source.display().to_string(),
        repository: repository.to_string(),
        tag: tag.clone(),
        identity_tag: identity,
        kind: normalize::package_kind(&tree),
        content_hash,
        manifest_digest: outcome.manifest_digest.clone(),
        uploaded_blobs: outcome.uploaded_blobs,
        uploaded_bytes: outcome.uploaded_bytes,
        executables,
        warnings,
    };
    if ctx.json {
        output::json(&report)?;
    } else {
        let what = if outcome.already_present() {
            "already published".to_owned()
        } else {
            format!(
                "{} blob{}, {} bytes uploaded",
                outcome.uploaded_blobs,
                if outcome.uploaded_blobs == 1 { "" } else { "s" },
                outcome.uploaded_bytes
            )
        };
        output::stdout(&format!(
            "published {} ({}) as {}\n  manifest      {}\n  content_hash  {}\n  ({what})\n",
            report.directory,
            report.kind,
            repository.display_with(&OciReference::Tag(tag)),
            report.manifest_digest,
            report.content_hash,
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
