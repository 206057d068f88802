//! Codex's home layer: a complete, writable `CODEX_HOME` at a short path.
//!
//! Pack content is mirrored from `<generation>/codex-home/` (hard links: Codex ignores a `SKILL.md`
//! that is a symlink); `config.toml` is the user's merged with the generation's fragment and the
//! secret layer (0600), written to the project's private state directory
//! ([`private_config_dir`]) and linked from the home, so no credential value is ever written under
//! the staging root or `/var/tmp` (Codex 0.171.0 reads and rewrites `config.toml` through the
//! link); the user's skills and themes are linked in; credentials and session history
//! are links to their shared and native places (see the Codex guide). The decisions Codex records in
//! its `config.toml` (trusted projects and hooks, dismissed notices) are kept per project across
//! launches ([`super::codex_state`]). The shared `auth.json` is
//! written from the keychain when Codex keeps its login there ([`super::codex_keychain`]).

use std::path::{Path, PathBuf};

use super::codex_keychain::{self, KeychainError, SecurityCli, KEYCHAIN_SERVICE};
use super::codex_state;
use super::fsops::{self, ensure_symlink, io_error, write_file};
use super::merge;
use super::{HomeLayerError, HomeLayerRequest, PreparedHome};

/// The variable that points Codex at its layer.
pub(crate) const ENV_VAR: &str = "CODEX_HOME";

/// What Codex appends to its home for its control socket.
pub const CODEX_SOCKET_SUFFIX: &str = "/app-server-control/app-server-control.sock";

/// The longest socket path that binds on Linux (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Where the Codex home of a project, mode and generation lives: under
/// `<staging_root_override>/ap-c/` when that leaves room for the socket, else `/var/tmp/ap-c/`.
pub fn codex_home_dir(
    staging_root_override: Option<&Path>,
    project_hash: &str,
    mode_dir: &str,
    generation_id: &str,
) -> PathBuf {
    let tail = format!("ap-c/{project_hash}/{mode_dir}/g-{generation_id}");
    if let Some(root) = staging_root_override {
        let candidate = root.join(&tail);
        if candidate.as_os_str().len() + CODEX_SOCKET_SUFFIX.len() <= MAX_SOCKET_PATH {
            return candidate;
        }
    }
    Path::new("/var/tmp").join(tail)
}

/// The fallback `/var/tmp/ap-c/` is shared by every user of the machine: it is made like `/tmp`
/// (1777: anyone may add their own private project directory, only its owner may remove it), never
/// private to whoever launched Codex first.
fn shared_fallback_base(home: &Path) -> Result<(), HomeLayerError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let base = Path::new("/var/tmp/ap-c");
    if !home.starts_with(base) {
        return Ok(());
    }
    match std::fs::create_dir(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error("create directory", base, e)),
    }
    let meta = std::fs::symlink_metadata(base).map_err(|e| io_error("inspect", base, e))?;
    // Only its owner can fix the mode; anyone else finds out below, when creating their directory.
    if meta.mode() & 0o7777 != 0o1777 && meta.uid() == nix::unistd::geteuid().as_raw() {
        std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1777))
            .map_err(|e| io_error("set permissions of", base, e))?;
    }
    Ok(())
}

/// The session history a Codex home links to its native place in `~/.codex` (directory or file).
const NATIVE_HISTORY: [(&str, bool); 3] = [
    ("sessions", true),
    ("archived_sessions", true),
    ("history.jsonl", false),
];

/// Makes sure Codex's native session history exists in the user's `~/.codex` (`home` is `$HOME`):
/// `sessions/`, `archived_sessions/` and `history.jsonl`, created empty when missing, because every
/// Codex home links to them. The one thing agentpack creates in `~/.codex`; every sync does it,
/// whether or not Codex was ever run.
pub fn ensure_codex_history(home: &Path) -> Result<(), HomeLayerError> {
    let real = home.join(".codex");
    for (name, dir) in NATIVE_HISTORY {
        ensure_native(&real.join(name), dir)?;
    }
    Ok(())
}

/// Makes sure a native history path exists.
fn ensure_native(path: &Path, dir: bool) -> Result<(), HomeLayerError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    if dir {
        fsops::plain_dir(path)
    } else {
        if let Some(parent) = path.parent() {
            fsops::plain_dir(parent)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| io_error("create", path, e))
    }
}

/// The `config.toml` a launch wrote, kept beside it (in [`private_config_dir`]) to tell Codex's
/// writes apart.
const WRITTEN_CONFIG: &str = ".agentpack-written-config.toml";

/// Per project (`$AGENTPACK_HOME/projects/<hash>/`): the directory of the private config files of
/// its Codex homes, one `<mode>/g-<gen>/` per home.
pub const PRIVATE_CONFIG_DIR: &str = "codex-config";

/// Where the `config.toml` of the Codex home of `mode_dir` and `generation_id` really lives:
/// `<state_dir>/codex-config/<mode>/g-<gen>/` (0700 directories, 0600 files), beside the launcher's
/// secret record. The home's `config.toml` is a link to it: the config holds the MCP credentials
/// (Codex expands no variables in `url` or `args`), and the home sits under the staging root or
/// `/var/tmp`, where no credential value may be written.
pub fn private_config_dir(state_dir: &Path, mode_dir: &str, generation_id: &str) -> PathBuf {
    state_dir
        .join(PRIVATE_CONFIG_DIR)
        .join(mode_dir)
        .join(format!("g-{generation_id}"))
}

/// Creates [`private_config_dir`] and makes its `codex-config/` root private (it may have been made
/// by an older version, or under a shared `AGENTPACK_HOME`, with a wider mode).
fn ensure_private_config_dir(state_dir: &Path, dir: &Path) -> Result<(), HomeLayerError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    fsops::private_dir(dir)?;
    let root = state_dir.join(PRIVATE_CONFIG_DIR);
    let meta = std::fs::symlink_metadata(&root).map_err(|e| io_error("inspect", &root, e))?;
    if !meta.is_dir() {
        return Err(io_error(
            "use",
            &root,
            std::io::Error::other("not a directory"),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_error("set permissions of", &root, e))?;
    }
    Ok(())
}

/// Per project (`$AGENTPACK_HOME/projects/<hash>/`): what Codex recorded of the user's decisions.
pub const DECISIONS_FILE: &str = "codex-state.toml";

fn read_table(path: &Path) -> Result<Option<toml::Table>, HomeLayerError> {
    Ok(fsops::read_optional(path)?.and_then(|text| text.parse().ok()))
}

/// Saves the decisions Codex wrote into the home's `config.toml` since agentpack wrote it (see
/// [`codex_state`]) to the project's [`DECISIONS_FILE`]. A config Codex left unparsable is a
/// warning: nothing is saved from it.
/// [`crate::agent::HomeLayer`]'s `after_exit` for Codex: keeps the decisions it recorded.
pub(crate) fn after_exit(
    request: &HomeLayerRequest<'_>,
    root: &Path,
) -> Result<(), HomeLayerError> {
    let private = private_config_dir(
        request.state_dir,
        request.mode_dir,
        &request.generation_id(),
    );
    match save_decisions(root, &private, request.state_dir)? {
        (Some(warning), _) => Err(HomeLayerError::NotKept(warning)),
        (None, _) => Ok(()),
    }
}

/// `home`'s `config.toml` is read through its link into `private` ([`private_config_dir`]), where
/// the written copy is; a home of an older layout kept both in the home itself. Returns the warning,
/// and the project's decisions as saved when it read them (a launch applies them without reading
/// the file again).
pub(super) fn save_decisions(
    home: &Path,
    private: &Path,
    state_dir: &Path,
) -> Result<(Option<String>, Option<toml::Table>), HomeLayerError> {
    let config = home.join("config.toml");
    let written = match read_table(&private.join(WRITTEN_CONFIG))? {
        Some(written) => Some(written),
        None => read_table(&home.join(WRITTEN_CONFIG))?,
    };
    let (Some(written), Some(after)) = (written, fsops::read_optional(&config)?) else {
        return Ok((None, None));
    };
    let Ok(after) = after.parse::<toml::Table>() else {
        return Ok((
            Some(format!(
            "{} does not parse; the trust decisions Codex recorded in it since the last launch are not kept",
                config.display()
            )),
            None,
        ));
    };
    let file = state_dir.join(DECISIONS_FILE);
    let previous = read_table(&file)?.unwrap_or_default();
    let next = codex_state::record_decisions(&previous, &written, &after, &home.to_string_lossy());
    if next != previous {
        if let Ok(text) = toml::to_string(&next) {
            write_file(&file, text.as_bytes(), 0o600)?;
        }
    }
    Ok((None, Some(next)))
}

/// How long a shared `auth.json` that does not parse is taken to be in the middle of Codex's write.
const IN_PLACE_WRITE_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes `shared_auth` (0600, atomically) from the keychain login of the real Codex home `real`
/// when there is one the file does not have yet (see [`codex_keychain::keychain_is_newer`]). A
/// keychain that cannot be read is a warning, returned, when the file holds no usable login
/// (otherwise Codex works from the file and the launch says nothing); no login there is normal.
fn materialize_from_keychain(
    keychain: &SecurityCli,
    real: &Path,
    shared_auth: &Path,
) -> Result<Option<String>, HomeLayerError> {
    let current = match std::fs::read(shared_auth) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error("read", shared_auth, e)),
    };
    // Codex rewrites the file in place (truncate, then write): a file that does not parse and
    // changed a moment ago is being written by a running Codex, whose write a replacement would lose.
    if current.is_some()
        && !codex_keychain::is_usable_auth_json(current.as_deref())
        && std::fs::metadata(shared_auth)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_none_or(|age| age < IN_PLACE_WRITE_WINDOW)
    {
        return Ok(None);
    }
    match codex_keychain::auth_json_to_write(keychain, real, current.as_deref()) {
        Ok(Some(auth_json)) => {
            write_file(shared_auth, &auth_json, 0o600)?;
            Ok(None)
        }
        Ok(None) => Ok(None),
        Err(_) if codex_keychain::is_usable_auth_json(current.as_deref()) => Ok(None),
        Err(error) => Ok(Some(keychain_warning(real, shared_auth, &error))),
    }
}

fn keychain_warning(real: &Path, shared_auth: &Path, error: &KeychainError) -> String {
    format!(
        "cannot bring your Codex login from the keychain ({KEYCHAIN_SERVICE:?}, account {:?} for {}) into {}: {error}; \
         Codex may ask you to log in: run `agentpack codex login` (it is saved to that file for every project)",
        codex_keychain::store_key(real),
        real.display(),
        shared_auth.display(),
    )
}

/// Removes the agent-fallback skills the generation lists ([`crate::render::codex::AGENT_FALLBACKS_FILE`])
/// from the home's `skills/`: every Codex a launch runs loads the custom agent from
/// `agents/<name>.toml` (Codex 0.171.0 lists it among the roles of its `spawn_agent` tool), so the
/// skill would list the agent a second time and take room in Codex's skill budget. Only a mirrored
/// directory is removed, never a link (a user's own skill of that name).
fn leave_out_agent_fallbacks(staged: &Path, home: &Path) -> Result<(), HomeLayerError> {
    let list = fsops::read_optional(&staged.join(crate::render::codex::AGENT_FALLBACKS_FILE))?;
    for name in list.iter().flat_map(|text| text.lines()) {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            continue;
        }
        let dir = home.join("skills").join(name);
        if std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
            std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
        }
    }
    Ok(())
}

pub(crate) fn prepare(
    request: &HomeLayerRequest<'_>,
    prepared: &mut PreparedHome,
) -> Result<(), HomeLayerError> {
    let staged = request.staged_tree(crate::render::codex::ROOT)?;
    let home = codex_home_dir(
        request.staging_root_override,
        request.project_hash,
        request.mode_dir,
        &request.generation_id(),
    );
    shared_fallback_base(&home)?;
    fsops::private_dir(&home)?;
    if let Some(project_dir) = home.parent().and_then(Path::parent) {
        let marker = project_dir.join(".agentpack-project");
        write_file(
            &marker,
            format!("{}\n", request.project_root.display()).as_bytes(),
            0o600,
        )?;
    }
    let real = request.user.home.join(".codex");

    // Pack content, then the user's skills and themes where the pack has nothing.
    prepared.mirror_reused = !fsops::mirror_stamped(
        &staged,
        &home,
        &["config.toml", crate::render::codex::AGENT_FALLBACKS_FILE],
        request.generation,
    )?;
    leave_out_agent_fallbacks(&staged, &home)?;
    let user_skills = real.join("skills");
    for name in fsops::list_names(&user_skills) {
        if name == ".system" {
            continue;
        }
        let link = home.join("skills").join(&name);
        if std::fs::symlink_metadata(&link).is_err() {
            ensure_symlink(&link, &user_skills.join(&name))?;
        }
    }
    let themes = real.join("themes");
    if themes.is_dir() {
        ensure_symlink(&home.join("themes"), &themes)?;
    }

    // config.toml: user's + fragment + secrets + the decisions Codex recorded earlier, 0600, in
    // the private directory (the home links to it). What Codex wrote since this layer's last
    // launch is saved first.
    let private = private_config_dir(
        request.state_dir,
        request.mode_dir,
        &request.generation_id(),
    );
    ensure_private_config_dir(request.state_dir, &private)?;
    let (warning, saved) = save_decisions(&home, &private, request.state_dir)?;
    prepared.warnings.extend(warning);
    let user_config = fsops::read_optional(&real.join("config.toml"))?;
    let fragment = fsops::read_optional(&staged.join("config.toml"))?.unwrap_or_default();
    let sqlite_home = real.to_string_lossy().into_owned();
    let mut config = merge::codex_config(
        user_config.as_deref(),
        &fragment,
        request.secrets,
        request.keep_attribution,
        Some(&sqlite_home),
    )?;
    let decisions = match saved {
        Some(decisions) => decisions,
        None => read_table(&request.state_dir.join(DECISIONS_FILE))?.unwrap_or_default(),
    };
    if !decisions.is_empty() {
        if let Ok(mut table) = config.parse::<toml::Table>() {
            codex_state::apply_decisions(&mut table, &decisions, &home.to_string_lossy());
            if let Ok(text) = toml::to_string(&table) {
                config = text;
            }
        }
    }
    write_file(&private.join("config.toml"), config.as_bytes(), 0o600)?;
    write_file(&private.join(WRITTEN_CONFIG), config.as_bytes(), 0o600)?;
    // A home of an older layout held the config itself: the link replaces it.
    ensure_symlink(&home.join("config.toml"), &private.join("config.toml"))?;
    fsops::remove_any(&home.join(WRITTEN_CONFIG))?;

    // Credentials: the real auth.json when it exists, else the shared file, brought up to date
    // from the keychain when Codex keeps its login there.
    let real_auth = real.join("auth.json");
    let auth_source = if real_auth.exists() {
        real_auth
    } else {
        let shared = request.agentpack_home.join("shared/codex");
        fsops::private_dir(&shared)?;
        let shared_auth = shared.join("auth.json");
        if let Some(keychain) = request.keychain {
            if let Some(warning) = materialize_from_keychain(keychain, &real, &shared_auth)? {
                prepared.warnings.push(warning);
            }
        }
        shared_auth
    };
    ensure_symlink(&home.join("auth.json"), &auth_source)?;
    let oauth = request.state_dir.join("codex-mcp-oauth");
    fsops::private_dir(&oauth.join("mcp-oauth-locks"))?;
    ensure_symlink(
        &home.join(".credentials.json"),
        &oauth.join(".credentials.json"),
    )?;
    ensure_symlink(
        &home.join("mcp-oauth-locks"),
        &oauth.join("mcp-oauth-locks"),
    )?;

    // Session history in the native places.
    ensure_codex_history(&request.user.home)?;
    for (name, _) in NATIVE_HISTORY {
        ensure_symlink(&home.join(name), &real.join(name))?;
    }

    prepared.root = Some(home);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_fallback_skills_leave_the_home_and_links_and_other_skills_stay() {
        let dir = tempfile::tempdir().unwrap();
        let staged = dir.path().join("gen/codex-home");
        let home = dir.path().join("home");
        for name in ["reviewer", "demo-skill", "planner"] {
            std::fs::create_dir_all(home.join("skills").join(name)).unwrap();
            std::fs::write(home.join("skills").join(name).join("SKILL.md"), "x").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("mine")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("mine"), home.join("skills/linked")).unwrap();
        std::fs::create_dir_all(&staged).unwrap();
        std::fs::write(
            staged.join(crate::render::codex::AGENT_FALLBACKS_FILE),
            "reviewer\nlinked\n../planner\n",
        )
        .unwrap();

        leave_out_agent_fallbacks(&staged, &home).unwrap();
        assert!(!home.join("skills/reviewer").exists());
        assert!(home.join("skills/demo-skill/SKILL.md").is_file());
        assert!(home.join("skills/planner/SKILL.md").is_file());
        assert!(std::fs::symlink_metadata(home.join("skills/linked")).is_ok());
        // Idempotent, and a generation without the list changes nothing.
        leave_out_agent_fallbacks(&staged, &home).unwrap();
        leave_out_agent_fallbacks(&dir.path().join("none"), &home).unwrap();
        assert!(home.join("skills/demo-skill/SKILL.md").is_file());
    }
}
