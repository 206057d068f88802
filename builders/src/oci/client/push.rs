//! [`OciClient::push_tree`] and friends: packing a tree, asking the registry what it already has
//! (HEAD), uploading only the missing blobs concurrently, then writing the tags.
//!
//! Must never send credentials to a registry they are not for, or re-upload a blob the registry
//! has.

use std::collections::BTreeSet;
use std::path::Path;

use futures_util::StreamExt as _;
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;

use super::*;
use crate::oci::archive;
use crate::oci::artifact::{
    self, ArtifactConfig, Descriptor, CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE,
};
use crate::oci::reference::{OciReference, OciRepository};
use crate::oci::OciError;

/// What [`OciClient::push_tree`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOutcome {
    /// The manifest's digest (`sha256:...`), the same for the same tree and config.
    pub manifest_digest: String,
    /// Blobs (layer, config) uploaded.
    pub uploaded_blobs: usize,
    /// Blobs the registry already had.
    pub skipped_blobs: usize,
    /// Bytes of the uploaded blobs.
    pub uploaded_bytes: u64,
    /// Tags written (a tag already naming this manifest is not written again).
    pub manifests_pushed: usize,
}

impl PushOutcome {
    /// Nothing was uploaded: the registry had every blob and every tag.
    pub fn already_present(&self) -> bool {
        self.uploaded_blobs == 0 && self.manifests_pushed == 0
    }
}

/// One tree for [`OciClient::push_trees`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushJob {
    /// Tags to point at the artifact (at least one); the first names it in messages.
    pub tags: Vec<String>,
    /// The tree.
    pub tree: std::path::PathBuf,
    /// Its config.
    pub config: ArtifactConfig,
    /// When the first tag already names a manifest, keep it and push nothing (`store push`:
    /// an identity tag is content-addressed, whatever agentpack version pushed it).
    pub keep_existing: bool,
}

impl OciClient {
    /// Pushes `tree` as our artifact under `tag` (see [`OciClient::push_tree_tagged`]).
    pub fn push_tree(
        &self,
        repo: &OciRepository,
        tag: &str,
        tree: &Path,
        config: &ArtifactConfig,
    ) -> Result<PushOutcome, OciError> {
        self.push_tree_tagged(repo, &[tag], tree, config)
    }

    /// Pushes `tree` (its deterministic tar+zstd layer, `config.executables` written 0755) with
    /// `config` as our artifact, and points every tag of `tags` at it. Blobs the repository has
    /// and tags already naming this manifest are not sent again.
    pub fn push_tree_tagged(
        &self,
        repo: &OciRepository,
        tags: &[&str],
        tree: &Path,
        config: &ArtifactConfig,
    ) -> Result<PushOutcome, OciError> {
        let job = PushJob {
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            tree: tree.to_path_buf(),
            config: config.clone(),
            keep_existing: false,
        };
        let mut results = self.push_trees(repo, std::slice::from_ref(&job))?;
        results.pop().unwrap_or_else(|| {
            Err(OciError::InvalidReference {
                input: repo.to_string(),
                reason: "no tag to push under".to_owned(),
            })
        })
    }

    /// Pushes several trees to `repo`, [`OciTransport::concurrency`] at a time; one result per
    /// job, in order. The outer error is a failure before any job started (the registry refuses
    /// pushes, or cannot be reached).
    pub fn push_trees(
        &self,
        repo: &OciRepository,
        jobs: &[PushJob],
    ) -> Result<Vec<Result<PushOutcome, OciError>>, OciError> {
        let Some(first) = jobs.iter().find_map(|job| job.tags.first()) else {
            return Ok(jobs
                .iter()
                .map(|_| {
                    Err(OciError::InvalidReference {
                        input: repo.to_string(),
                        reason: "no tag to push under".to_owned(),
                    })
                })
                .collect());
        };
        let base = repo.client_reference(&OciReference::tag(first)?);
        let client = self.client_for(&repo.registry);
        let auth = self.auth(&repo.registry);
        let what = format!("pushing to {repo}");
        self.runtime.block_on(async {
            client
                .store_auth_if_needed(base.resolve_registry(), &auth)
                .await;
            // Ask for a push token up front, so a registry refusing pushes says so once.
            if let Err(error) = self
                .retry(|| client.auth(&base, &auth, RegistryOperation::Push))
                .await
            {
                return Err(self.map_error(repo, &what, error));
            }
            let results = futures_util::stream::iter(jobs.iter())
                .map(|job| async {
                    let result = self.push_job(&client, &auth, repo, job).await;
                    self.transfers.artifact_done();
                    result
                })
                .buffered(self.transport.concurrency.max(1))
                .collect::<Vec<_>>()
                .await;
            Ok(results)
        })
    }

    /// Uploads one blob (one monolithic PUT), streamed in chunks so that [`Transfers`] counts its
    /// bytes as the connection takes them; a failed attempt takes its count back.
    async fn push_blob_counted(
        &self,
        client: &oci_client::Client,
        base: &oci_client::Reference,
        bytes: bytes::Bytes,
        digest: &str,
    ) -> Result<String, oci_client::errors::OciDistributionError> {
        const CHUNK: usize = 64 * 1024;
        let size = bytes.len() as u64;
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&sent);
        let transfers = std::sync::Arc::clone(&self.transfers);
        let chunks: Vec<bytes::Bytes> = (0..bytes.len())
            .step_by(CHUNK)
            .map(|start| bytes.slice(start..(start + CHUNK).min(bytes.len())))
            .collect();
        let stream = futures_util::stream::iter(chunks).map(move |chunk| {
            let length = chunk.len() as u64;
            counted.fetch_add(length, std::sync::atomic::Ordering::Relaxed);
            transfers.uploaded(length);
            Ok(chunk)
        });
        let result = client
            .push_blob_stream(base, stream, digest, Some(size))
            .await;
        if result.is_err() {
            self.transfers
                .take_back_upload(sent.load(std::sync::atomic::Ordering::Relaxed));
        }
        result
    }

    async fn push_job(
        &self,
        client: &oci_client::Client,
        auth: &RegistryAuth,
        repo: &OciRepository,
        job: &PushJob,
    ) -> Result<PushOutcome, OciError> {
        let Some(first) = job.tags.first() else {
            return Err(OciError::InvalidReference {
                input: repo.to_string(),
                reason: "no tag to push under".to_owned(),
            });
        };
        let tag_refs: Vec<OciReference> = job
            .tags
            .iter()
            .map(|tag| OciReference::tag(tag))
            .collect::<Result<_, _>>()?;
        let what = format!("pushing {}", repo.display_with(&tag_refs[0]));
        let fail = |error| self.map_error(repo, &what, error);
        let base = repo.client_reference(&tag_refs[0]);
        if job.keep_existing {
            match self
                .retry(|| client.fetch_manifest_digest(&base, auth))
                .await
            {
                Ok(digest) => {
                    return Ok(PushOutcome {
                        manifest_digest: digest,
                        uploaded_blobs: 0,
                        skipped_blobs: 0,
                        uploaded_bytes: 0,
                        manifests_pushed: 0,
                    })
                }
                Err(error) if is_not_found(&error) => {}
                Err(error) => return Err(fail(error)),
            }
        }
        let executables: BTreeSet<String> = job.config.executables.iter().cloned().collect();
        let layer_bytes = archive::tree_tar_zstd(&job.tree, &executables)?;
        let mut config = job.config.clone();
        config.executables = executables.into_iter().collect();
        let config_bytes = config.to_bytes();
        let layer = Descriptor::of(LAYER_MEDIA_TYPE, &layer_bytes);
        let config_descriptor = Descriptor::of(CONFIG_MEDIA_TYPE, &config_bytes);
        let manifest = artifact::manifest_bytes(&config, &config_descriptor, &layer);
        let manifest_digest = artifact::sha256_digest(&manifest);
        let blobs = [
            (layer.digest.clone(), bytes::Bytes::from(layer_bytes)),
            (
                config_descriptor.digest.clone(),
                bytes::Bytes::from(config_bytes),
            ),
        ];
        let content_type = http::HeaderValue::from_static(OCI_MANIFEST_MEDIA_TYPE);
        tracing::debug!(tag = %first, tree = %job.tree.display(), "pushing a tree");

        let present = futures_util::future::join_all(blobs.iter().map(|(digest, _)| {
            let base = &base;
            self.retry(move || client.blob_exists(base, digest))
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<bool>, _>>()
        .map_err(fail)?;
        let missing: Vec<&(String, bytes::Bytes)> = blobs
            .iter()
            .zip(&present)
            .filter(|(_, present)| !**present)
            .map(|(blob, _)| blob)
            .collect();
        self.transfers
            .will_upload(missing.iter().map(|(_, bytes)| bytes.len() as u64).sum());
        futures_util::future::join_all(missing.iter().map(|(digest, bytes)| {
            let base = &base;
            self.retry(move || self.push_blob_counted(client, base, bytes.clone(), digest))
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<String>, _>>()
        .map_err(fail)?;
        let mut manifests_pushed = 0;
        for tag in &tag_refs {
            let target = repo.client_reference(tag);
            let existing = match self
                .retry(|| client.fetch_manifest_digest(&target, auth))
                .await
            {
                Ok(digest) => Some(digest),
                Err(error) if is_not_found(&error) => None,
                Err(error) => return Err(fail(error)),
            };
            if existing.as_deref() == Some(manifest_digest.as_str()) {
                continue;
            }
            self.retry(|| {
                client.push_manifest_raw(&target, manifest.clone(), content_type.clone())
            })
            .await
            .map_err(fail)?;
            manifests_pushed += 1;
        }
        Ok(PushOutcome {
            manifest_digest,
            uploaded_blobs: missing.len(),
            skipped_blobs: blobs.len() - missing.len(),
            uploaded_bytes: missing.iter().map(|(_, bytes)| bytes.len() as u64).sum(),
            manifests_pushed,
        })
    }
}
