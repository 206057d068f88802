//! The declared sources of the plan's artifacts and the one digest framing `source_digest` and
//! `rendered_digest` share.
//!
//! Sources are the verified package trees the plan renders and the `./.agents/` overlay, read
//! with staging's own loader (`harness::input::load`: the same tree reader, path filters, mode
//! selectors, artifact parser and package layering as `sync`), once, and only when a requirement
//! needs them (a source digest, a rule's source, an overlay artifact the plan leaves out). A skill's digest covers every file of its directory, paths relative
//! to it; a command's, agent's or rule's covers its one file, named `<name>.<extension>`. Reads
//! only; never writes, never prints.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::PathBuf;

use agentpack_harness::input::artifact::{Artifact, ArtifactKind};
use agentpack_harness::input::{self, Loaded};
use agentpack_harness::render::convert;
use agentpack_harness::{
    ModeFilter, OverlayInput, PackageInput, PlanEntry, RenderOptions, StageInputs,
};
use anyhow::{Context as _, Result};
use sha2::{Digest as _, Sha256};

/// The label the overlay's artifacts carry as their module.
pub const OVERLAY: &str = ".agents";

/// `sha256:<hex>` over `files` in byte order of their paths, each as the path's length (u64, little
/// endian), the path, the content's length (u64, little endian) and the content.
pub fn framed_digest(mut files: Vec<(String, Vec<u8>)>) -> String {
    files.sort();
    let mut digest = Sha256::new();
    for (path, bytes) in &files {
        digest.update((path.len() as u64).to_le_bytes());
        digest.update(path.as_bytes());
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    }
    format!("sha256:{}", hex::encode(digest.finalize()))
}

/// The bytes a planned entry stages (a link: its target text).
pub fn entry_bytes(entry: &PlanEntry) -> Result<Vec<u8>> {
    Ok(match entry {
        PlanEntry::FromFile { source, .. } => fs_err::read(source)
            .with_context(|| format!("cannot read {} for the plan", source.display()))?,
        PlanEntry::Bytes(bytes) => bytes.clone(),
        PlanEntry::Symlink(target) => target.to_string_lossy().into_owned().into_bytes(),
    })
}

/// The category a contract names, as the loader's kind.
pub fn kind_of(category: &str) -> Option<ArtifactKind> {
    [
        ArtifactKind::Skill,
        ArtifactKind::Command,
        ArtifactKind::Agent,
        ArtifactKind::Rule,
    ]
    .into_iter()
    .find(|kind| kind.as_str() == category)
}

/// The package trees and the overlay, loaded on first use.
pub struct Sources<'a> {
    packages: &'a [PackageInput],
    overlay: Option<&'a OverlayInput>,
    mode: &'a ModeFilter,
    loaded: OnceCell<std::result::Result<Loaded, String>>,
}

impl<'a> Sources<'a> {
    /// `packages` as the plan renders them (verified trees, each with the mode's filter), the
    /// overlay when staging merges one, and the mode.
    pub fn new(
        packages: &'a [PackageInput],
        overlay: Option<&'a OverlayInput>,
        mode: &'a ModeFilter,
    ) -> Self {
        Self {
            packages,
            overlay,
            mode,
            loaded: OnceCell::new(),
        }
    }

    fn loaded(&self) -> Result<&Loaded> {
        let loaded = self.loaded.get_or_init(|| {
            let stage = StageInputs {
                packages: self.packages.to_vec(),
                overlay: self.overlay.cloned(),
                mcp_servers: Default::default(),
                mcp_launch: BTreeMap::new(),
                mode: self.mode.clone(),
                // Loading reads trees; these only shape rendered text, which is not read here.
                options: RenderOptions {
                    keep_attribution: false,
                    dot_agents_enabled: self.overlay.is_some(),
                    yolo: false,
                    agentpack_exe: PathBuf::new(),
                    generation_root: PathBuf::new(),
                    plugin_data_root: PathBuf::new(),
                },
                listings: Default::default(),
            };
            input::load(&stage).map_err(|err| format!("{err:#}"))
        });
        loaded
            .as_ref()
            .map_err(|err| anyhow::anyhow!("cannot read the package sources: {err}"))
    }

    /// Whether the overlay holds an artifact of `category` named `name`.
    pub fn in_overlay(&self, category: &str, name: &str) -> Result<bool> {
        let Some(kind) = kind_of(category) else {
            return Ok(false);
        };
        let loaded = self.loaded()?;
        Ok(loaded
            .overlay
            .iter()
            .flat_map(|o| o.artifacts.iter())
            .any(|a| matches(a, kind, name)))
    }

    /// The `source_digest` of each artifact of `category` named `name`, by module (the overlay as
    /// [`OVERLAY`]), packages in layering order, then the overlay. `only_module` restricts the
    /// search to the one the plan stages it from.
    pub fn digests(
        &self,
        category: &str,
        name: &str,
        only_module: Option<&str>,
    ) -> Result<Vec<(String, String)>> {
        let Some(kind) = kind_of(category) else {
            return Ok(Vec::new());
        };
        let loaded = self.loaded()?;
        let packages = loaded
            .packages
            .iter()
            .map(|p| (p.input.module.as_str(), p.artifacts.as_slice()));
        let overlay = loaded
            .overlay
            .iter()
            .map(|o| (OVERLAY, o.artifacts.as_slice()));
        let mut found = Vec::new();
        for (module, artifacts) in packages.chain(overlay) {
            if only_module.is_some_and(|only| only != module) {
                continue;
            }
            for artifact in artifacts.iter().filter(|a| matches(a, kind, name)) {
                found.push((module.to_owned(), source_digest(artifact)?));
            }
        }
        Ok(found)
    }
}

/// Whether `artifact` is the `kind` named `name` (its storage name, its leaf, or as a skill name).
fn matches(artifact: &Artifact, kind: ArtifactKind, name: &str) -> bool {
    artifact.kind == kind
        && (artifact.name == name
            || convert::leaf_name(&artifact.name) == name
            || (kind == ArtifactKind::Skill && convert::skill_name(&artifact.name) == name))
}

/// The framed digest of `artifact`'s source files.
fn source_digest(artifact: &Artifact) -> Result<String> {
    let files: Vec<(String, PathBuf)> = if artifact.kind == ArtifactKind::Skill {
        artifact
            .skill_files
            .iter()
            .map(|file| (file.relative.clone(), file.source.clone()))
            .collect()
    } else {
        vec![(
            format!("{}.{}", artifact.name, artifact.extension),
            artifact.source.clone(),
        )]
    };
    let mut read = Vec::new();
    for (path, source) in files {
        let bytes = fs_err::read(&source)
            .with_context(|| format!("cannot read {} for source_digest", source.display()))?;
        read.push((path, bytes));
    }
    Ok(framed_digest(read))
}
