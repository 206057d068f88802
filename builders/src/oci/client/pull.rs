//! [`OciClient::pull_tree`]: a manifest, its config and its one layer, every byte verified against
//! its digest and capped, unpacked beside the destination and renamed into place.
//!
//! Must never leave anything at the destination when a pull fails.

use std::io::Write as _;
use std::path::Path;

use futures_util::StreamExt as _;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;

use super::*;
use crate::oci::archive::{self, package_root_of};
use crate::oci::artifact::{
    self, classify, parse_config, Accepted, ArtifactConfig, Descriptor, MAX_CONFIG_BYTES,
};
use crate::oci::reference::{OciReference, OciRepository};
use crate::oci::OciError;

/// Manifest media types a pull sends in `Accept` (indexes too, to name them when refusing).
pub(super) const PULL_ACCEPT: [&str; 4] = [
    artifact::OCI_MANIFEST_MEDIA_TYPE,
    artifact::DOCKER_MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// What [`OciClient::pull_tree`] unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledTree {
    /// The manifest's digest (`sha256:...`).
    pub manifest_digest: String,
    /// The layer's media type.
    pub layer_media_type: String,
    /// Our config blob, for our artifacts; `None` for a plain image.
    pub config: Option<ArtifactConfig>,
    /// Regular files whose tar mode had an execute bit (written 0644 all the same), sorted.
    pub executables: Vec<String>,
}

impl OciClient {
    /// Pulls the tree `reference` names into `dest` (which must not exist; its parent must).
    /// `None` when the manifest does not exist. Refuses manifests of other shapes and media
    /// types, naming them (see [`artifact::classify`]).
    pub fn pull_tree(
        &self,
        repo: &OciRepository,
        reference: &OciReference,
        dest: &Path,
    ) -> Result<Option<PulledTree>, OciError> {
        if fs_err::symlink_metadata(dest).is_ok() {
            return Err(OciError::DestinationExists {
                path: dest.to_path_buf(),
            });
        }
        let parent = match dest.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let shown = repo.display_with(reference);
        let what = format!("pulling {shown}");
        let client = self.client_for(&repo.registry);
        let auth = self.auth(&repo.registry);
        let target = repo.client_reference(reference);
        let limits = self.transport.limits;

        let fetched = self.runtime.block_on(async {
            client
                .store_auth_if_needed(target.resolve_registry(), &auth)
                .await;
            match self
                .retry(|| client.pull_manifest_raw(&target, &auth, &PULL_ACCEPT))
                .await
            {
                Ok(found) => Ok(Some(found)),
                Err(error) if is_not_found(&error) => Ok(None),
                Err(error) => Err(self.map_error(repo, &what, error)),
            }
        })?;
        let Some((body, manifest_digest)) = fetched else {
            return Ok(None);
        };
        let accepted = classify(&shown, None, &body)?;
        let (layer, compression, config_descriptor) = match accepted {
            Accepted::Ours {
                config,
                layer,
                compression,
            } => (layer, compression, Some(config)),
            Accepted::Plain { layer, compression } => (layer, compression, None),
        };

        let config = match config_descriptor {
            None => None,
            Some(descriptor) => {
                if descriptor.size > MAX_CONFIG_BYTES {
                    return Err(OciError::Corrupt {
                        reference: shown.clone(),
                        reason: format!(
                            "its config blob declares {} bytes, more than the {MAX_CONFIG_BYTES} an agentpack config may have",
                            descriptor.size
                        ),
                    });
                }
                let bytes = self.download_blob_to_vec(repo, &target, &descriptor, &what)?;
                Some(parse_config(&shown, &bytes)?)
            }
        };

        if layer.size > limits.max_download_bytes {
            return Err(OciError::Limit(crate::limits::LimitExceeded::new(
                &limits,
                crate::limits::LimitKind::DownloadSize,
                shown.clone(),
                format!("has a layer of {} bytes", layer.size),
            )));
        }
        let work = tempfile::Builder::new()
            .prefix(".oci-pull-")
            .tempdir_in(&parent)
            .map_err(|e| io_error("create a work directory in", &parent, e))?;
        let blob_path = work.path().join("layer");
        self.download_blob_to_file(repo, &target, &layer, &blob_path, &what)?;
        let blob = fs_err::File::open(&blob_path).map_err(|e| io_error("open", &blob_path, e))?;
        let unpacked = work.path().join("tree");
        let report = archive::read_tree(
            std::io::BufReader::new(blob),
            compression,
            &unpacked,
            &limits,
            &shown,
        )
        .map_err(|source| OciError::Extract {
            reference: shown.clone(),
            source,
        })?;
        let (root, executables) = if config.is_some() {
            (unpacked, report.executables)
        } else {
            let hoisted = package_root_of(&unpacked, &report.executables);
            if !crate::normalize::is_package_root(&hoisted.root) {
                return Err(OciError::NotAPackage { reference: shown });
            }
            (hoisted.root, hoisted.executables)
        };
        fs_err::rename(&root, dest).map_err(|e| io_error("move the pulled tree to", dest, e))?;
        Ok(Some(PulledTree {
            manifest_digest,
            layer_media_type: layer.media_type,
            config,
            executables: executables.into_iter().collect(),
        }))
    }

    pub(super) fn descriptor(descriptor: &Descriptor) -> OciDescriptor {
        OciDescriptor {
            media_type: descriptor.media_type.clone(),
            digest: descriptor.digest.clone(),
            size: i64::try_from(descriptor.size).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        }
    }

    pub(super) fn download_blob_to_vec(
        &self,
        repo: &OciRepository,
        target: &oci_client::Reference,
        descriptor: &Descriptor,
        what: &str,
    ) -> Result<Vec<u8>, OciError> {
        let client = self.client_for(&repo.registry);
        let oci_descriptor = Self::descriptor(descriptor);
        self.runtime.block_on(async {
            self.retry(|| async {
                let mut out = Vec::new();
                client.pull_blob(target, &oci_descriptor, &mut out).await?;
                Ok(out)
            })
            .await
            .map_err(|error| self.map_error(repo, what, error))
        })
    }

    /// Streams a blob into `path`, capped at the download limit; the crate verifies the digest at
    /// the end of the stream.
    pub(super) fn download_blob_to_file(
        &self,
        repo: &OciRepository,
        target: &oci_client::Reference,
        descriptor: &Descriptor,
        path: &Path,
        what: &str,
    ) -> Result<(), OciError> {
        enum Failure {
            Registry(OciDistributionError),
            Local(OciError),
        }
        let client = self.client_for(&repo.registry);
        let oci_descriptor = &Self::descriptor(descriptor);
        let max = self.transport.limits.max_download_bytes;
        let attempt = || async {
            // Each attempt writes the file from its start (`create` truncates it).
            let mut file = fs_err::File::create(path)
                .map_err(|e| Failure::Local(io_error("create", path, e)))?;
            let mut stream = client
                .pull_blob_stream(target, oci_descriptor)
                .await
                .map_err(Failure::Registry)?;
            let mut written: u64 = 0;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| {
                    // A digest mismatch surfaces as an I/O error of the verifying stream.
                    Failure::Local(OciError::Corrupt {
                        reference: what.to_owned(),
                        reason: format!("the layer download failed ({e})"),
                    })
                })?;
                written += chunk.len() as u64;
                self.transfers.downloaded(chunk.len() as u64);
                if written > max {
                    return Err(Failure::Local(OciError::Limit(
                        crate::limits::LimitExceeded::new(
                            &self.transport.limits,
                            crate::limits::LimitKind::DownloadSize,
                            what.to_owned(),
                            format!("has a layer of more than {max} bytes"),
                        ),
                    )));
                }
                file.write_all(&chunk)
                    .map_err(|e| Failure::Local(io_error("write", path, e)))?;
            }
            Ok(file)
        };
        let result = self
            .runtime
            .block_on(self.retry_on(attempt, |failure| match failure {
                Failure::Registry(error) => Some(error),
                Failure::Local(_) => None,
            }));
        match result {
            Ok(mut file) => file.flush().map_err(|e| io_error("write", path, e)),
            Err(Failure::Registry(error)) => Err(self.map_error(repo, what, error)),
            Err(Failure::Local(error)) => Err(error),
        }
    }
}
