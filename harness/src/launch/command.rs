//! Launch commands: what each agent's binary is called, where it is found, and the exact argument
//! list and environment a launcher runs it with. Pure except for [`resolve_binary`]'s look at
//! `PATH`: the caller reads the environment, prepares the home layer
//! ([`crate::launch::home_layer`]) and runs the command. The per-agent values are the rows'
//! [`crate::agent::Launcher`]; the table below is what they hold:
//!
//! | agent | binary (override) | what the launcher adds | `--yolo` |
//! | --- | --- | --- | --- |
//! | Claude Code | `claude` (`CLAUDE_PATH`) | `--plugin-dir <bundle> --settings <json>` | `--dangerously-skip-permissions` |
//! | Cursor Agent | `cursor-agent` (`CURSOR_AGENT_PATH`) | synthetic `HOME`, `--workspace <dir>`, `--trust` with `-p` | `--force` |
//! | OpenCode | `opencode` (`OPENCODE_PATH`) | `OPENCODE_CONFIG_DIR` (and `OPENCODE_EXPERIMENTAL_LSP_TOOL=true` with staged language servers, unless set) | `"permission": "allow"` in the root |
//! | Codex | `codex` (`CODEX_PATH`) | `CODEX_HOME` | `--dangerously-bypass-approvals-and-sandbox` |
//! | Grok | `grok` (`GROK_PATH`) | `GROK_HOME`, `--cwd <dir>` | `--always-approve` |
//! | Antigravity | `agy` (`AGY_PATH`) | `--add-dir <dir>` | `--dangerously-skip-permissions` |
//!
//! The user's trailing arguments come last, unchanged. A flag the launcher would add is left out when
//! the user passed it (`--cwd`, `--add-dir`, `--workspace`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::agent::Agent;
use crate::launch::home_layer::PreparedHome;
use crate::plan::SecretLayer;

/// Failures finding an agent's binary.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{display} is not installed: no `{binary}` on PATH\n  fix  install it, or set {var} to its executable")]
    NotInstalled {
        display: &'static str,
        binary: &'static str,
        var: &'static str,
    },
    #[error("{var} is set to {path}, which is not an executable file\n  fix  point {var} at the {display} executable, or unset it")]
    BadOverride {
        display: &'static str,
        var: &'static str,
        path: PathBuf,
    },
}

/// The executable name an agent is started by ([`crate::agent::Launcher::binary`]).
pub fn binary_name(agent: Agent) -> &'static str {
    agent.profile().launcher.binary
}

/// The variable that overrides where the binary is.
pub fn path_override_var(agent: Agent) -> &'static str {
    agent.profile().launcher.override_var
}

/// The flag `--yolo` adds, if the agent takes one (OpenCode's is a config setting).
pub fn yolo_flag(agent: Agent) -> Option<&'static str> {
    agent.profile().launcher.yolo.flag()
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds the agent's binary: the override variable's value when set (it must be an executable
/// file), else the first executable `binary_name` on `path_var` (the `PATH` value).
pub fn resolve_binary(
    agent: Agent,
    override_value: Option<&OsStr>,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, LaunchError> {
    let var = path_override_var(agent);
    if let Some(value) = override_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        if is_executable_file(&path) {
            return Ok(path);
        }
        return Err(LaunchError::BadOverride {
            display: agent.display_name(),
            var,
            path,
        });
    }
    let binary = binary_name(agent);
    if let Some(path_var) = path_var {
        for dir in std::env::split_paths(path_var) {
            if dir.as_os_str().is_empty() {
                continue;
            }
            let candidate = dir.join(binary);
            if is_executable_file(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Err(LaunchError::NotInstalled {
        display: agent.display_name(),
        binary,
        var,
    })
}

/// Whether the user's arguments already carry `flag` (as `--flag value` or `--flag=value`).
pub fn has_flag(args: &[OsString], flag: &str) -> bool {
    args.iter().any(|arg| {
        let text = arg.to_string_lossy();
        text == flag || text.starts_with(&format!("{flag}="))
    })
}

/// Claude Code's leading arguments: the plugin bundle and the settings file.
pub(crate) fn claude_args(request: &LaunchRequest<'_>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--plugin-dir".into(),
        claude_bundle(request.generation).into_os_string(),
    ];
    if let Some(settings) = request.claude_settings {
        args.push("--settings".into());
        args.push(settings.into());
    }
    args
}

/// Cursor Agent's leading argument: `--trust` when it runs headless (`-p`, `--print`).
pub(crate) fn cursor_args(request: &LaunchRequest<'_>) -> Vec<OsString> {
    let user = request.user_args;
    let headless = user
        .iter()
        .any(|a| a == "-p" || a == "--print" || a.to_string_lossy().starts_with("--print="));
    if headless && !has_flag(user, "--trust") {
        vec!["--trust".into()]
    } else {
        Vec::new()
    }
}

/// Everything a command is built from.
#[derive(Debug, Clone)]
pub struct LaunchRequest<'a> {
    pub agent: Agent,
    pub program: PathBuf,
    /// The resolved generation store path.
    pub generation: &'a Path,
    pub prepared: &'a PreparedHome,
    pub yolo: bool,
    /// The user's trailing arguments, forwarded unchanged and last.
    pub user_args: &'a [OsString],
    /// Cursor's `--workspace`, Grok's `--cwd`, Antigravity's `--add-dir`.
    pub workspace: &'a Path,
    /// Claude Code's inline `--settings` JSON (the generation's `agentpack-settings.json`).
    pub claude_settings: Option<&'a str>,
}

/// A command ready to run: program, arguments, and the variables to set on top of the launcher's
/// own environment.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: BTreeMap<String, OsString>,
}

/// The Claude bundle directory of a generation.
pub fn claude_bundle(generation: &Path) -> PathBuf {
    generation.join(crate::render::claude::BUNDLE)
}

/// Builds the command that starts `request.agent`.
pub fn build_command(request: &LaunchRequest<'_>) -> LaunchCommand {
    let mut args: Vec<OsString> = Vec::new();
    let user = request.user_args;
    let yolo = request.yolo.then(|| yolo_flag(request.agent)).flatten();
    let push_yolo = |args: &mut Vec<OsString>| {
        if let Some(flag) = yolo {
            if !has_flag(user, flag) {
                args.push(flag.into());
            }
        }
    };
    let launcher = &request.agent.profile().launcher;
    args.extend((launcher.leading_args)(request));
    push_yolo(&mut args);
    if let Some(flag) = launcher.workspace_flag {
        if !has_flag(user, flag) {
            args.push(flag.into());
            args.push(request.workspace.as_os_str().to_owned());
        }
    }
    args.extend(user.iter().cloned());
    LaunchCommand {
        program: request.program.clone(),
        args,
        env: request.prepared.env.clone(),
    }
}

/// A [`SecretLayer`] as the launcher keeps it between launches (in a 0600 file outside the
/// store), so a launch that skips the sync still has the agent's secret values.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SecretRecord {
    pub env: BTreeMap<String, String>,
    /// The TOML fragment, as text.
    pub config_toml: Option<String>,
}

impl SecretRecord {
    pub fn from_layer(layer: &SecretLayer) -> Self {
        Self {
            env: layer.env.clone(),
            config_toml: layer
                .config_toml
                .as_ref()
                .and_then(|table| toml::to_string(table).ok()),
        }
    }

    pub fn into_layer(self) -> SecretLayer {
        SecretLayer {
            env: self.env,
            config_toml: self.config_toml.and_then(|text| toml::from_str(&text).ok()),
        }
    }
}

/// Compacts Claude's `agentpack-settings.json` into the one-line JSON `--settings` takes.
pub fn inline_settings(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .map(|v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        agent: Agent,
        prepared: &'a PreparedHome,
        args: &'a [OsString],
        yolo: bool,
    ) -> LaunchRequest<'a> {
        LaunchRequest {
            agent,
            program: PathBuf::from("/bin/agent"),
            generation: Path::new("/store/abc-generation"),
            prepared,
            yolo,
            user_args: args,
            workspace: Path::new("/work"),
            claude_settings: Some("{\"includeCoAuthoredBy\":false}"),
        }
    }

    fn texts(command: &LaunchCommand) -> Vec<String> {
        command
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn each_agent_gets_its_documented_flags() {
        let prepared = PreparedHome::default();
        let user: Vec<OsString> = vec!["--model".into(), "x".into()];
        let claude = build_command(&request(Agent::Claude, &prepared, &user, true));
        assert_eq!(
            texts(&claude),
            [
                "--plugin-dir",
                "/store/abc-generation/plugins/agentpack-bundle",
                "--settings",
                "{\"includeCoAuthoredBy\":false}",
                "--dangerously-skip-permissions",
                "--model",
                "x"
            ]
        );
        let cursor = build_command(&request(Agent::Cursor, &prepared, &user, true));
        assert_eq!(
            texts(&cursor),
            ["--force", "--workspace", "/work", "--model", "x"]
        );
        let print: Vec<OsString> = vec!["-p".into(), "hi".into()];
        let cursor = build_command(&request(Agent::Cursor, &prepared, &print, false));
        assert_eq!(
            texts(&cursor),
            ["--trust", "--workspace", "/work", "-p", "hi"]
        );
        let codex = build_command(&request(Agent::Codex, &prepared, &user, true));
        assert_eq!(
            texts(&codex),
            ["--dangerously-bypass-approvals-and-sandbox", "--model", "x"]
        );
        let opencode = build_command(&request(Agent::OpenCode, &prepared, &user, true));
        assert_eq!(texts(&opencode), ["--model", "x"]);
        let grok = build_command(&request(Agent::Grok, &prepared, &user, true));
        assert_eq!(
            texts(&grok),
            ["--always-approve", "--cwd", "/work", "--model", "x"]
        );
        let own: Vec<OsString> = vec!["--cwd=/elsewhere".into()];
        let grok = build_command(&request(Agent::Grok, &prepared, &own, false));
        assert_eq!(texts(&grok), ["--cwd=/elsewhere"]);
        let agy = build_command(&request(Agent::Antigravity, &prepared, &[], false));
        assert_eq!(texts(&agy), ["--add-dir", "/work"]);
    }

    #[test]
    fn binaries_resolve_from_path_or_override() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("codex");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(
            resolve_binary(Agent::Codex, None, Some(&path)).unwrap(),
            bin
        );
        let missing = resolve_binary(Agent::Cursor, None, Some(&path)).unwrap_err();
        assert!(missing.to_string().contains("`cursor-agent`"), "{missing}");
        assert!(
            missing.to_string().contains("CURSOR_AGENT_PATH"),
            "{missing}"
        );
        let bad =
            resolve_binary(Agent::Cursor, Some(OsStr::new("/nonexistent/x")), None).unwrap_err();
        assert!(
            bad.to_string()
                .contains("CURSOR_AGENT_PATH is set to /nonexistent/x"),
            "{bad}"
        );
        assert_eq!(
            resolve_binary(Agent::Cursor, Some(bin.as_os_str()), None).unwrap(),
            bin
        );
    }
}
