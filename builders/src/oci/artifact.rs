//! The artifact agentpack pushes and the manifests a pull accepts. Pure: bytes in, bytes out.
//!
//! What we push is an OCI image manifest (`application/vnd.oci.image.manifest.v1+json`) with
//! - `artifactType` [`PACKAGE_ARTIFACT_TYPE`], [`NPM_TREE_ARTIFACT_TYPE`] or
//!   [`GENERATION_ARTIFACT_TYPE`];
//! - a config blob of [`CONFIG_MEDIA_TYPE`]: the JSON of [`ArtifactConfig`];
//! - one layer of [`LAYER_MEDIA_TYPE`] (`application/vnd.oci.image.layer.v1.tar+zstd`): the
//!   deterministic archive of the normalized tree ([`super::archive`]);
//! - annotations `dev.agentpack.module` and `dev.agentpack.content-identity`, and no time stamp,
//!   so the same tree gives the same manifest digest on every machine.
//!
//! A pull accepts that, and any image manifest (OCI or Docker schema 2) with exactly one layer of
//! [`ACCEPTED_LAYER_MEDIA_TYPES`]; anything else is refused with the media type named.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::archive::Compression;
use super::OciError;

/// `artifactType` of a package (a skill or plugin tree, as a lock's `content_hash` names it).
pub const PACKAGE_ARTIFACT_TYPE: &str = "application/vnd.agentpack.package.v1";
/// `artifactType` of an npm MCP server tree (as a lock's `tree_digest` names it).
pub const NPM_TREE_ARTIFACT_TYPE: &str = "application/vnd.agentpack.npm-tree.v1";
/// `artifactType` of a generation (`store push --generations`): kept for inspection and rollback
/// elsewhere; nothing pulls it yet (a machine with the packages builds the same generation).
pub const GENERATION_ARTIFACT_TYPE: &str = "application/vnd.agentpack.generation.v1";
/// Media type of our config blob.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.agentpack.config.v1+json";
/// Media type of our layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// The OCI image manifest media type.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The Docker schema 2 manifest media type.
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The manifest media types a pull asks for.
pub const ACCEPTED_MANIFEST_MEDIA_TYPES: [&str; 2] =
    [OCI_MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
/// Layer media types a pull reads, with their compression.
pub const ACCEPTED_LAYER_MEDIA_TYPES: [(&str, Compression); 6] = [
    ("application/vnd.oci.image.layer.v1.tar", Compression::None),
    (
        "application/vnd.oci.image.layer.v1.tar+gzip",
        Compression::Gzip,
    ),
    (
        "application/vnd.oci.image.layer.v1.tar+zstd",
        Compression::Zstd,
    ),
    (
        "application/vnd.docker.image.rootfs.diff.tar",
        Compression::None,
    ),
    (
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        Compression::Gzip,
    ),
    (
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
        Compression::Zstd,
    ),
];
/// The largest config blob a pull reads.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What an artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactKind {
    /// A package tree (`content_hash`).
    Package,
    /// An npm MCP server tree (`tree_digest`).
    NpmTree,
    /// A generation store path (identity `generation:<store path name>`).
    Generation,
}

impl ArtifactKind {
    /// The `artifactType` of this kind.
    pub fn artifact_type(self) -> &'static str {
        match self {
            ArtifactKind::Package => PACKAGE_ARTIFACT_TYPE,
            ArtifactKind::NpmTree => NPM_TREE_ARTIFACT_TYPE,
            ArtifactKind::Generation => GENERATION_ARTIFACT_TYPE,
        }
    }
}

/// The config blob of our artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactConfig {
    /// Package or npm tree.
    pub kind: ArtifactKind,
    /// The module id (`github.com/o/r/path`), or the npm package for a tree.
    pub module: String,
    /// The locked commit, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// `content_hash` (`sha256-tree-v1:...`) or `tree_digest` (`sha256-npm-tree-v1:...`), as in
    /// `pack.lock`.
    pub content_identity: String,
    /// Regular files executable in the source, relative, sorted.
    #[serde(default)]
    pub executables: Vec<String>,
    /// The agentpack version that pushed it.
    pub agentpack_version: String,
}

impl ArtifactConfig {
    /// The config blob: compact JSON in field order, so equal configs give equal digests.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut sorted = self.clone();
        sorted.executables.sort();
        sorted.executables.dedup();
        serde_json::to_vec(&sorted).unwrap_or_default()
    }
}

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Bytes.
    pub size: u64,
}

impl Descriptor {
    /// The descriptor of `bytes`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_owned(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
        }
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestOut<'a> {
    schema_version: u32,
    media_type: &'a str,
    artifact_type: &'a str,
    config: &'a Descriptor,
    layers: [&'a Descriptor; 1],
    annotations: BTreeMap<&'a str, &'a str>,
}

/// Our manifest for a layer and a config (see the module docs): its bytes.
pub fn manifest_bytes(
    config: &ArtifactConfig,
    config_blob: &Descriptor,
    layer: &Descriptor,
) -> Vec<u8> {
    let annotations = BTreeMap::from([
        (
            "dev.agentpack.content-identity",
            config.content_identity.as_str(),
        ),
        ("dev.agentpack.module", config.module.as_str()),
    ]);
    serde_json::to_vec(&ManifestOut {
        schema_version: 2,
        media_type: OCI_MANIFEST_MEDIA_TYPE,
        artifact_type: config.kind.artifact_type(),
        config: config_blob,
        layers: [layer],
        annotations,
    })
    .unwrap_or_default()
}

/// A manifest as a registry serves it, read leniently.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDoc {
    /// 2 for every manifest we read.
    #[serde(default)]
    pub schema_version: Option<i64>,
    /// The manifest's media type, when it says.
    #[serde(default)]
    pub media_type: Option<String>,
    /// OCI 1.1 `artifactType`.
    #[serde(default)]
    pub artifact_type: Option<String>,
    /// The config descriptor.
    #[serde(default)]
    pub config: Option<Descriptor>,
    /// Layer descriptors.
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
    /// Present in an image index.
    #[serde(default)]
    pub manifests: Option<Vec<serde_json::Value>>,
}

/// What a pull will read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// One of our artifacts: its config blob and layer.
    Ours {
        /// The config descriptor.
        config: Descriptor,
        /// The layer.
        layer: Descriptor,
        /// The layer's compression.
        compression: Compression,
    },
    /// A plain image manifest with one tar layer.
    Plain {
        /// The layer.
        layer: Descriptor,
        /// Its compression.
        compression: Compression,
    },
}

/// Decides whether a manifest (its bytes and the media type the registry sent) can be pulled.
/// `shown` names it in messages (`oci://h/r:t`).
pub fn classify(
    shown: &str,
    header_media_type: Option<&str>,
    body: &[u8],
) -> Result<Accepted, OciError> {
    let doc: ManifestDoc = serde_json::from_slice(body).map_err(|e| OciError::Corrupt {
        reference: shown.to_owned(),
        reason: format!("the manifest is not valid JSON ({e})"),
    })?;
    let media_type = doc
        .media_type
        .clone()
        .or_else(|| header_media_type.map(str::to_owned));
    let refuse = |what: &str, media_type: &str| OciError::UnsupportedMediaType {
        reference: shown.to_owned(),
        what: what.to_owned(),
        media_type: media_type.to_owned(),
    };
    if doc.manifests.is_some() {
        return Err(refuse(
            "an image index",
            media_type
                .as_deref()
                .unwrap_or("application/vnd.oci.image.index.v1+json"),
        ));
    }
    if let Some(media_type) = media_type.as_deref() {
        if !ACCEPTED_MANIFEST_MEDIA_TYPES.contains(&media_type) {
            return Err(refuse("the manifest", media_type));
        }
    }
    if doc.schema_version != Some(2) {
        return Err(OciError::UnsupportedManifest {
            reference: shown.to_owned(),
            reason: format!(
                "the manifest has schemaVersion {}, agentpack reads schema 2",
                doc.schema_version
                    .map_or_else(|| "(none)".to_owned(), |v| v.to_string())
            ),
        });
    }
    let layers = doc.layers.clone().unwrap_or_default();
    let [layer] = layers.as_slice() else {
        return Err(OciError::UnsupportedManifest {
            reference: shown.to_owned(),
            reason: format!(
                "the manifest has {} layers; agentpack reads exactly one (the package directory as a tar)",
                layers.len()
            ),
        });
    };
    let Some(compression) = ACCEPTED_LAYER_MEDIA_TYPES
        .iter()
        .find(|(accepted, _)| *accepted == layer.media_type)
        .map(|(_, compression)| *compression)
    else {
        return Err(refuse("the layer", &layer.media_type));
    };
    let ours = doc.artifact_type.as_deref().is_some_and(|t| {
        t == PACKAGE_ARTIFACT_TYPE || t == NPM_TREE_ARTIFACT_TYPE || t == GENERATION_ARTIFACT_TYPE
    }) || doc
        .config
        .as_ref()
        .is_some_and(|c| c.media_type == CONFIG_MEDIA_TYPE);
    match (ours, doc.config) {
        (true, Some(config)) => {
            if config.media_type != CONFIG_MEDIA_TYPE {
                return Err(refuse("the config", &config.media_type));
            }
            Ok(Accepted::Ours {
                config,
                layer: layer.clone(),
                compression,
            })
        }
        (true, None) => Err(OciError::UnsupportedManifest {
            reference: shown.to_owned(),
            reason: "the manifest has an agentpack artifactType but no config".to_owned(),
        }),
        (false, _) => Ok(Accepted::Plain {
            layer: layer.clone(),
            compression,
        }),
    }
}

/// Reads our config blob.
pub fn parse_config(shown: &str, bytes: &[u8]) -> Result<ArtifactConfig, OciError> {
    serde_json::from_slice(bytes).map_err(|e| OciError::Corrupt {
        reference: shown.to_owned(),
        reason: format!("its config blob is not an agentpack artifact config ({e})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ArtifactConfig {
        ArtifactConfig {
            kind: ArtifactKind::Package,
            module: "github.com/o/r/skills/pdf".into(),
            commit: Some("a".repeat(40)),
            content_identity: format!("sha256-tree-v1:{}", "0".repeat(64)),
            executables: vec!["z.sh".into(), "a.sh".into()],
            agentpack_version: "0.1.0".into(),
        }
    }

    #[test]
    fn our_manifest_is_accepted_and_stable() {
        let config = config();
        let blob = config.to_bytes();
        let parsed = parse_config("x", &blob).unwrap();
        assert_eq!(parsed.executables, ["a.sh", "z.sh"]);
        let config_descriptor = Descriptor::of(CONFIG_MEDIA_TYPE, &blob);
        let layer = Descriptor::of(LAYER_MEDIA_TYPE, b"layer");
        let bytes = manifest_bytes(&config, &config_descriptor, &layer);
        assert_eq!(bytes, manifest_bytes(&config, &config_descriptor, &layer));
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains(r#""artifactType":"application/vnd.agentpack.package.v1""#),
            "{text}"
        );
        assert_eq!(
            classify("x", None, &bytes).unwrap(),
            Accepted::Ours {
                config: config_descriptor,
                layer,
                compression: Compression::Zstd
            }
        );
    }

    #[test]
    fn foreign_manifests_are_refused_by_media_type() {
        let helm = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":"sha256:00","size":1},
            "layers":[{"mediaType":"application/vnd.cncf.helm.chart.content.v1.tar+gzip","digest":"sha256:01","size":2}]}"#;
        let error = classify("oci://h/r:t", None, helm).unwrap_err().to_string();
        assert!(
            error.contains("application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
            "{error}"
        );
        let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        let error = classify("oci://h/r:t", None, index)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("application/vnd.oci.image.index.v1+json"),
            "{error}"
        );
        let two = br#"{"schemaVersion":2,"layers":[
            {"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:00","size":1},
            {"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:01","size":1}]}"#;
        let error = classify("oci://h/r:t", None, two).unwrap_err().to_string();
        assert!(error.contains("2 layers"), "{error}");
    }

    #[test]
    fn plain_docker_layers_are_accepted() {
        let docker = br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:00","size":1},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:01","size":2}]}"#;
        assert!(matches!(
            classify("x", None, docker).unwrap(),
            Accepted::Plain {
                compression: Compression::Gzip,
                ..
            }
        ));
    }
}
