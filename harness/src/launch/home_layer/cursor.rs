//! Cursor's home layer: the synthetic `HOME` `cursor-agent` runs with.
//!
//! ```text
//! cursor-home/
//!   .cursor/
//!     skills/ commands/ agents/ rules/   the pack's entries (links into the generation) over the user's
//!     mcp.json                            the pack's servers, the user's over them (0600)
//!     cli-config.json                     a real file: the user's with attribution forced off
//!     hooks.json                          the user's hooks plus the pack's
//!     <everything else>                   links to the real ~/.cursor (login, sessions)
//!   .config/cursor  .config/Cursor        links to the real profiles (Linux auth)
//! ```
//!
//! Variables: `HOME`, `CURSOR_CONFIG_DIR`, `CURSOR_DATA_DIR` (the real `~/.cursor` unless set), and
//! `CARGO_HOME`, `RUSTUP_HOME`, `DOCKER_CONFIG` bridged from the real home unless set.

use serde_json::Value;

use super::fsops::{self, ensure_symlink, write_file};
use super::merge;
use super::{HomeLayerError, HomeLayerRequest, PreparedHome};

/// The variable that points Cursor Agent at its synthetic home.
pub(crate) const ENV_VAR: &str = "HOME";

const PACK_DIRS: [&str; 4] = ["skills", "commands", "agents", "rules"];
const GENERATED: [&str; 3] = ["mcp.json", "cli-config.json", "hooks.json"];

pub(crate) fn prepare(
    request: &HomeLayerRequest<'_>,
    prepared: &mut PreparedHome,
) -> Result<(), HomeLayerError> {
    let bundle = request.staged_tree(crate::render::cursor::BUNDLE)?;
    let fake_home = request.layer_dir().join("cursor-home");
    let dot_cursor = fake_home.join(".cursor");
    fsops::private_dir(&dot_cursor)?;
    let real_home = &request.user.home;
    let real = real_home.join(".cursor");

    // Everything of the real ~/.cursor that the pack does not provide: linked.
    for name in fsops::list_names(&real) {
        let text = name.to_string_lossy();
        if PACK_DIRS.contains(&text.as_ref()) || GENERATED.contains(&text.as_ref()) {
            continue;
        }
        ensure_symlink(&dot_cursor.join(&name), &real.join(&name))?;
    }
    // Pack directories: the user's entries, then the pack's over them.
    for dir in PACK_DIRS {
        let dest = dot_cursor.join(dir);
        fsops::plain_dir(&dest)?;
        let pack_dir = bundle.join(dir);
        let pack_names = fsops::list_names(&pack_dir);
        for name in fsops::list_names(&real.join(dir)) {
            if !pack_names.contains(&name) {
                ensure_symlink(&dest.join(&name), &real.join(dir).join(&name))?;
            }
        }
        for name in pack_names {
            ensure_symlink(&dest.join(&name), &pack_dir.join(&name))?;
        }
    }

    let pack_mcp = fsops::read_optional(&bundle.join("mcp.json"))?;
    let user_mcp = fsops::read_optional(&real.join("mcp.json"))?;
    if pack_mcp.is_some() || user_mcp.is_some() {
        let merged = merge::cursor_mcp(user_mcp.as_deref(), pack_mcp.as_deref().unwrap_or("{}"))?;
        write_file(&dot_cursor.join("mcp.json"), merged.as_bytes(), 0o600)?;
    }
    let pack_config = request
        .generation
        .join(crate::render::cursor::ROOT)
        .join("cli-config.json");
    match fsops::read_optional(&pack_config)? {
        Some(pack) => {
            let user = fsops::read_optional(&real.join("cli-config.json"))?;
            let merged = merge::cursor_cli_config(user.as_deref(), &pack)?;
            write_file(
                &dot_cursor.join("cli-config.json"),
                merged.as_bytes(),
                0o600,
            )?;
        }
        None if real.join("cli-config.json").exists() => {
            ensure_symlink(
                &dot_cursor.join("cli-config.json"),
                &real.join("cli-config.json"),
            )?;
        }
        None => {}
    }
    let pack_hooks = fsops::read_optional(&bundle.join("hooks/hooks.json"))?;
    let user_hooks = fsops::read_optional(&real.join("hooks.json"))?;
    match (pack_hooks, user_hooks) {
        (None, Some(_)) => {
            ensure_symlink(&dot_cursor.join("hooks.json"), &real.join("hooks.json"))?
        }
        (Some(pack), user) => {
            let merged = merge_hooks(user.as_deref(), &pack);
            write_file(
                &dot_cursor.join("hooks.json"),
                &crate::json_bytes(&merged),
                0o600,
            )?;
        }
        (None, None) => fsops::remove_any(&dot_cursor.join("hooks.json"))?,
    }

    // Linux auth profiles: durable, in the real config home.
    let config_home = request.user.config_home();
    for profile in ["cursor", "Cursor"] {
        let real_profile = config_home.join(profile);
        fsops::plain_dir(&real_profile)?;
        ensure_symlink(&fake_home.join(".config").join(profile), &real_profile)?;
    }

    let env = &mut prepared.env;
    env.insert("CURSOR_CONFIG_DIR".into(), dot_cursor.into_os_string());
    if !request.user.is_set("CURSOR_DATA_DIR") {
        env.insert("CURSOR_DATA_DIR".into(), real.clone().into_os_string());
    }
    for (var, dir) in [
        ("CARGO_HOME", ".cargo"),
        ("RUSTUP_HOME", ".rustup"),
        ("DOCKER_CONFIG", ".docker"),
    ] {
        if !request.user.is_set(var) {
            env.insert(var.into(), real_home.join(dir).into_os_string());
        }
    }
    prepared.root = Some(fake_home);
    Ok(())
}

/// The user's `~/.cursor/hooks.json` with the pack's hooks appended event by event.
fn merge_hooks(user: Option<&str>, pack: &str) -> Value {
    let mut merged: Value = user
        .and_then(|text| serde_json::from_str(text).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| serde_json::json!({"version": 1}));
    let pack: Value = serde_json::from_str(pack).unwrap_or_default();
    let Some(map) = merged.as_object_mut() else {
        return merged;
    };
    let hooks = map
        .entry("hooks")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let (Some(target), Some(Value::Object(source))) = (hooks.as_object_mut(), pack.get("hooks"))
    {
        for (event, entries) in source {
            let list = target
                .entry(event.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let (Some(list), Some(added)) = (list.as_array_mut(), entries.as_array()) {
                list.extend(added.iter().cloned());
            }
        }
    }
    merged
}
