//! Grok's home layer: `GROK_HOME` at `$AGENTPACK_HOME/projects/<hash>/grok-homes/<mode>/<gen>/`.
//!
//! `config.toml` is the user's `~/.grok/config.toml` with the generation's fragment and the secret
//! layer merged (0600); the bundle is linked at `plugins/agentpack-bundle`; the user's skills,
//! agents, commands and plugins are linked in; `sessions/` links to `~/.grok/sessions/`. Grok
//! replaces credential files when it refreshes tokens, so credentials are copied, not linked: from
//! `$AGENTPACK_HOME/shared/grok/` before the launch and back after it ([`save_grok_credentials`]);
//! the shared copy starts from `~/.grok/`, else from the newest copy in an older project home.

use std::path::Path;

use super::fsops::{self, ensure_symlink, io_error, write_file};
use super::merge;
use super::opencode::seed_dir;
use super::{HomeLayerError, HomeLayerRequest, PreparedHome};

/// The variable that points Grok at its layer.
pub(crate) const ENV_VAR: &str = "GROK_HOME";

/// The credential files kept in sync through `$AGENTPACK_HOME/shared/grok/`.
const CREDENTIALS: [&str; 1] = ["auth.json"];

fn copy_private(from: &Path, to: &Path) -> Result<(), HomeLayerError> {
    let bytes = std::fs::read(from).map_err(|e| io_error("read", from, e))?;
    write_file(to, &bytes, 0o600)
}

pub(crate) fn prepare(
    request: &HomeLayerRequest<'_>,
    prepared: &mut PreparedHome,
) -> Result<(), HomeLayerError> {
    let staged = request.staged_tree(crate::agent::Agent::Grok.profile().staged_root)?;
    let home = request
        .state_dir
        .join("grok-homes")
        .join(request.mode_dir)
        .join(request.generation_id());
    fsops::private_dir(&home)?;
    let real = request.user.home.join(".grok");

    let user_config = fsops::read_optional(&real.join("config.toml"))?;
    let fragment = fsops::read_optional(&staged.join("config.fragment.toml"))?.unwrap_or_default();
    let config = merge::grok_config(user_config.as_deref(), &fragment, request.secrets)?;
    write_file(&home.join("config.toml"), config.as_bytes(), 0o600)?;

    for dir in ["skills", "agents", "commands", "plugins"] {
        seed_dir(&real.join(dir), &home.join(dir))?;
    }
    ensure_symlink(
        &home.join("plugins/agentpack-bundle"),
        &staged.join("agentpack-bundle"),
    )?;
    for file in ["lsp.json", "AGENTS.md"] {
        let source = staged.join(file);
        if source.is_file() {
            ensure_symlink(&home.join(file), &source)?;
        } else {
            fsops::remove_any(&home.join(file))?;
        }
    }
    let sessions = real.join("sessions");
    if !sessions.exists() {
        fsops::plain_dir(&sessions)?;
    }
    ensure_symlink(&home.join("sessions"), &sessions)?;

    let shared = request.agentpack_home.join("shared/grok");
    fsops::private_dir(&shared)?;
    for name in CREDENTIALS {
        let shared_file = shared.join(name);
        if !shared_file.exists() {
            if real.join(name).is_file() {
                copy_private(&real.join(name), &shared_file)?;
            } else if let Some(older) = newest_project_copy(request.agentpack_home, name) {
                copy_private(&older, &shared_file)?;
            }
        }
        if shared_file.is_file() {
            copy_private(&shared_file, &home.join(name))?;
        }
    }

    prepared.root = Some(home);
    Ok(())
}

/// The newest `name` in any project's Grok homes (`projects/*/grok-homes/*/*/`), for importing
/// credentials an older agentpack kept per project.
fn newest_project_copy(agentpack_home: &Path, name: &str) -> Option<std::path::PathBuf> {
    let projects = agentpack_home.join("projects");
    let mut best: Option<(std::time::SystemTime, std::path::PathBuf)> = None;
    for project in fsops::list_names(&projects) {
        let homes = projects.join(project).join("grok-homes");
        for mode in fsops::list_names(&homes) {
            for generation in fsops::list_names(&homes.join(&mode)) {
                let file = homes.join(&mode).join(generation).join(name);
                let Ok(modified) = std::fs::metadata(&file).and_then(|m| m.modified()) else {
                    continue;
                };
                if best.as_ref().is_none_or(|(time, _)| modified > *time) {
                    best = Some((modified, file));
                }
            }
        }
    }
    best.map(|(_, file)| file)
}

/// Copies the credentials Grok left in `grok_home` to `$AGENTPACK_HOME/shared/grok/`, for every
/// project's next launch.
/// [`crate::agent::HomeLayer`]'s `after_exit` for Grok: shares its credentials.
pub(crate) fn after_exit(
    request: &HomeLayerRequest<'_>,
    root: &Path,
) -> Result<(), HomeLayerError> {
    save_grok_credentials(root, request.agentpack_home)
}

pub fn save_grok_credentials(
    grok_home: &Path,
    agentpack_home: &Path,
) -> Result<(), HomeLayerError> {
    let shared = agentpack_home.join("shared/grok");
    for name in CREDENTIALS {
        let file = grok_home.join(name);
        if file.is_file() {
            fsops::private_dir(&shared)?;
            copy_private(&file, &shared.join(name))?;
        }
    }
    Ok(())
}
