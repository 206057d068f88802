//! OpenCode's home layer: a writable config root for `OPENCODE_CONFIG_DIR`.
//!
//! The generation's `opencode/` is mirrored (hard links), the user's `~/.config/opencode/` agents,
//! commands, modes, plugins and skills are linked in where the pack has nothing of the same name,
//! and `opencode.json` is the user's merged with the pack's (0600: it may carry MCP settings).

use std::path::Path;

use super::fsops::{self, ensure_symlink, write_file};
use super::merge;
use super::{HomeLayerError, HomeLayerRequest, PreparedHome};

/// The variable that points OpenCode at its layer.
pub(crate) const ENV_VAR: &str = "OPENCODE_CONFIG_DIR";

const SEEDED: [&str; 5] = ["agents", "commands", "modes", "plugins", "skills"];

/// The variable that gives the model OpenCode's lsp tool.
pub const LSP_TOOL_VAR: &str = "OPENCODE_EXPERIMENTAL_LSP_TOOL";

/// Whether the pack's `opencode.json` declares any language server.
fn stages_language_servers(pack: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(pack)
        .ok()
        .and_then(|config| {
            config
                .get("lsp")
                .and_then(|lsp| lsp.as_object())
                .map(|lsp| !lsp.is_empty())
        })
        .unwrap_or(false)
}

pub(crate) fn prepare(
    request: &HomeLayerRequest<'_>,
    prepared: &mut PreparedHome,
) -> Result<(), HomeLayerError> {
    let staged = request.staged_tree(crate::render::opencode::ROOT)?;
    let root = request.layer_dir().join("opencode");
    fsops::private_dir(&root)?;
    prepared.mirror_reused =
        !fsops::mirror_stamped(&staged, &root, &["opencode.json"], request.generation)?;
    let real = request.user.config_home().join("opencode");
    for dir in SEEDED {
        seed_dir(&real.join(dir), &root.join(dir))?;
    }
    if real.join("opencode.jsonc").is_file() && !real.join("opencode.json").is_file() {
        prepared.warnings.push(format!(
            "{} is not seeded into the staged OpenCode root (only opencode.json is); move its settings to opencode.json",
            real.join("opencode.jsonc").display()
        ));
    }
    let user = fsops::read_optional(&real.join("opencode.json"))?;
    let pack = fsops::read_optional(&staged.join("opencode.json"))?.unwrap_or_else(|| "{}".into());
    let mut merged: serde_json::Value =
        serde_json::from_str(&merge::opencode_config(user.as_deref(), &pack)?).unwrap_or_default();
    if request.yolo {
        if let Some(map) = merged.as_object_mut() {
            map.insert("permission".into(), serde_json::json!("allow"));
        }
    }
    write_file(
        &root.join("opencode.json"),
        &crate::json_bytes(&merged),
        0o600,
    )?;
    // Staged language servers come with OpenCode's lsp tool (the conversion table), unless the
    // user set the variable themselves.
    if stages_language_servers(&pack) && !request.user.is_set(LSP_TOOL_VAR) {
        prepared.env.insert(LSP_TOOL_VAR.into(), "true".into());
    }
    prepared.root = Some(root);
    Ok(())
}

/// Links each entry of the user's `source` directory into `dest` unless `dest` has one of that name.
pub(super) fn seed_dir(source: &Path, dest: &Path) -> Result<(), HomeLayerError> {
    let names = fsops::list_names(source);
    if names.is_empty() {
        return Ok(());
    }
    fsops::plain_dir(dest)?;
    for name in names {
        let link = dest.join(&name);
        let ours = std::fs::symlink_metadata(&link).is_ok_and(|m| {
            m.file_type().is_symlink()
                && std::fs::read_link(&link).ok().as_deref() == Some(&source.join(&name))
        });
        if std::fs::symlink_metadata(&link).is_err() || ours {
            ensure_symlink(&link, &source.join(&name))?;
        }
    }
    Ok(())
}
