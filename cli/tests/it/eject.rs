//! `agentpack eject` through the real binary: what it writes for each agent, that rendered paths
//! name the ejected copy instead of the store, its refusals (before writing anything), re-ejecting
//! after a manifest change, and `--remove` putting the project back exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::IsolatedHome;
use sha2::{Digest, Sha256};

struct Project {
    home: IsolatedHome,
    /// Holds extra path packages made by a test.
    packages: tempfile::TempDir,
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

impl Project {
    /// A project with the two example packages and one manifest MCP server, synced once (so
    /// pack.lock is settled before the tree is hashed).
    fn new() -> Self {
        let project = Self {
            home: IsolatedHome::new(),
            packages: tempfile::tempdir().unwrap(),
        };
        project.ok(&["init", "--name", "eject"]);
        for example in ["hello-skill", "review-plugin"] {
            project.ok(&[
                "add",
                examples().join(example).to_str().unwrap(),
                "--no-sync",
            ]);
        }
        let manifest = project.path("agentpack.toml");
        let mut text = std::fs::read_to_string(&manifest).unwrap();
        text.push_str("\n[mcp.servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"server-fs\"]\n");
        std::fs::write(&manifest, text).unwrap();
        project.ok(&["sync"]);
        project
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.home.project.join(relative)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.home.agentpack(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        self.home.ok(args).stderr
    }

    fn fails(&self, args: &[&str]) -> String {
        self.home.fails(args).stderr
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative))
            .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
    }

    fn json(&self, relative: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(relative)).unwrap()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A plugin with a hook and an MCP server that runs from the plugin's own directory.
    fn hook_plugin(&self) -> PathBuf {
        let root = self.packages.path().join("hook-plugin");
        for (relative, text) in [
            (
                ".claude-plugin/plugin.json",
                r#"{"name":"hook-plugin","version":"1.0.0"}"#,
            ),
            (
                "hooks/hooks.json",
                r#"{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"${CLAUDE_PLUGIN_ROOT}/check.sh"}]}]}}"#,
            ),
            (
                ".mcp.json",
                r#"{"mcpServers":{"local":{"command":"node","args":["${CLAUDE_PLUGIN_ROOT}/server.js"]}}}"#,
            ),
            ("check.sh", "#!/bin/sh\necho ok\n"),
            ("server.js", "console.log(1)\n"),
        ] {
            let path = root.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    /// Every entry of the project (kind, path, bytes), hashed.
    fn tree_hash(&self) -> String {
        let mut entries = BTreeMap::new();
        walk(&self.home.project, &self.home.project, &mut entries);
        let mut hasher = Sha256::new();
        for (path, content) in &entries {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(content);
            hasher.update([0]);
        }
        hex::encode(hasher.finalize())
    }

    /// Project-relative paths of every regular file.
    fn files(&self) -> Vec<String> {
        let mut entries = BTreeMap::new();
        walk(&self.home.project, &self.home.project, &mut entries);
        entries
            .into_iter()
            .filter(|(path, _)| path.starts_with("f "))
            .map(|(path, _)| path[2..].to_owned())
            .collect()
    }
}

fn walk(root: &Path, dir: &Path, entries: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let relative = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            entries.insert(
                format!("l {relative}"),
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
            );
        } else if kind.is_dir() {
            entries.insert(format!("d {relative}"), Vec::new());
            walk(root, &path, entries);
        } else {
            entries.insert(format!("f {relative}"), std::fs::read(&path).unwrap());
        }
    }
}

#[test]
fn eject_all_registers_every_supported_agent_with_writable_copies() {
    let project = Project::new();
    project.ok(&["add", project.hook_plugin().to_str().unwrap(), "--no-sync"]);
    project.ok(&["eject"]);

    for file in [
        ".claude/skills/hello-skill/SKILL.md",
        ".claude/commands/review.md",
        ".claude/agents/reviewer.md",
        ".cursor/commands/review.md",
        ".cursor/agents/reviewer.md",
        ".cursor/skills/hello-skill/SKILL.md",
        ".agents/skills/hello-skill/SKILL.md",
        ".codex/agents/reviewer.toml",
        ".agents/plugins/agentpack-bundle/plugin.json",
        ".agents/plugins/agentpack-bundle/skills/hello-skill/SKILL.md",
        ".agentpack/eject/plugins/agentpack-bundle/skills/hello-skill/SKILL.md",
    ] {
        assert!(project.path(file).is_file(), "{file} was not written");
    }
    assert!(
        !project.path("AGENTS.md").exists(),
        "AGENTS.md is not touched"
    );

    // MCP servers merged by key, their plugin paths pointing at the ejected copy.
    let eject_root = project.path(".agentpack/eject");
    let eject_text = eject_root.to_str().unwrap();
    let mcp = project.json(".mcp.json");
    assert_eq!(mcp["mcpServers"]["fs"]["command"], "npx");
    let server_script = mcp["mcpServers"]["local"]["args"][0].as_str().unwrap();
    assert!(server_script.starts_with(&format!("{eject_text}/plugin-roots/")));
    assert!(
        Path::new(server_script).is_file(),
        "{server_script} is not in the copy"
    );
    assert_eq!(
        project.json(".cursor/mcp.json")["mcpServers"]["fs"]["command"],
        "npx"
    );
    let codex = codex_config(&project);
    assert_eq!(codex["mcp_servers"]["fs"]["command"], "npx");
    let codex_script = codex["mcp_servers"]["local"]["args"][0].as_str().unwrap();
    assert!(
        codex_script.starts_with(&format!("{eject_text}/plugin-roots/")),
        "{codex_script}"
    );

    // Hooks dispatch from the ejected copy's specs, which run in the ejected plugin roots.
    let settings = project.json(".claude/settings.json");
    let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let spec = command.split("--spec ").nth(1).unwrap();
    assert!(
        spec.starts_with(&format!("{eject_text}/hook-specs/claude/")),
        "{command}"
    );
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(spec).unwrap()).unwrap();
    assert!(spec["handlers"][0]["plugin_root"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{eject_text}/plugin-roots/")));
    let codex_hooks = project.json(".codex/hooks.json");
    let codex_command = codex_hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let codex_spec = codex_command.split("--spec ").nth(1).unwrap();
    assert!(
        codex_spec.starts_with(&format!("{eject_text}/codex-home/hook-specs/")),
        "{codex_command}"
    );
    assert!(Path::new(codex_spec).is_file(), "{codex_spec}");
    assert_eq!(codex_hooks["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    let cursor_hooks = project.json(".cursor/hooks.json");
    assert_eq!(cursor_hooks["version"], 1);
    assert!(cursor_hooks["hooks"]["preToolUse"][0]["command"]
        .as_str()
        .unwrap()
        .contains(&format!("{eject_text}/hook-specs/cursor/")));

    // Real, writable files; no path into the store outside the manifest's own record.
    let store = project.home.agentpack_home.join("cache/store");
    let manifest = project.json(".agentpack/eject/manifest.json");
    let recorded: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for file in project.files() {
        let path = project.path(&file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert!(mode & 0o200 != 0, "{file} is not writable ({mode:o})");
        if file == ".agentpack/eject/manifest.json" || file == "pack.lock" {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(
            !text.contains(store.to_str().unwrap()),
            "{file} names the store"
        );
        let merged = [
            ".mcp.json",
            ".claude/settings.json",
            ".cursor/mcp.json",
            ".cursor/hooks.json",
            ".codex/config.toml",
            ".codex/hooks.json",
        ];
        if file != "agentpack.toml" && !merged.contains(&file.as_str()) {
            assert!(
                recorded.contains(&file.as_str()),
                "{file} is not in the manifest"
            );
        }
    }
    assert!(!project
        .files()
        .iter()
        .any(|f| std::fs::symlink_metadata(project.path(f))
            .unwrap()
            .is_symlink()));
}

#[test]
fn eject_named_agents_only_and_refuse_terminal_agents() {
    let project = Project::new();
    let before = project.tree_hash();
    let stderr = project.fails(&["eject", "opencode"]);
    assert!(stderr.contains("agentpack opencode"), "{stderr}");
    let stderr = project.fails(&["eject", "claude", "grok"]);
    assert!(stderr.contains("terminal"), "{stderr}");
    assert_eq!(project.tree_hash(), before, "a refusal writes nothing");

    project.ok(&["eject", "claude", "cursor"]);
    assert!(project.path(".claude/commands/review.md").is_file());
    assert!(project.path(".cursor/commands/review.md").is_file());
    assert!(
        !project.path(".agents").exists(),
        "codex and agy were not asked for"
    );
    let manifest = project.json(".agentpack/eject/manifest.json");
    assert_eq!(manifest["agents"], serde_json::json!(["claude", "cursor"]));
    assert!(!project.path(".agentpack/eject/codex-home").exists());

    let stderr = project.fails(&["eject", "vim"]);
    assert!(stderr.contains("unknown agent `vim`"), "{stderr}");

    // The agents named replace the previous set: Claude's files go, Cursor's stay.
    project.ok(&["eject", "cursor"]);
    assert!(!project.path(".claude").exists());
    assert!(!project.path(".mcp.json").exists());
    assert!(project.path(".cursor/commands/review.md").is_file());
}

#[test]
fn a_user_file_or_setting_in_the_way_is_refused_before_anything_is_written() {
    let project = Project::new();
    project.write(".claude/commands/review.md", "my own review command\n");
    let before = project.tree_hash();
    let stderr = project.fails(&["eject"]);
    assert!(stderr.contains(".claude/commands/review.md"), "{stderr}");
    assert_eq!(project.tree_hash(), before, "nothing was written");

    std::fs::remove_file(project.path(".claude/commands/review.md")).unwrap();
    project.write(
        ".cursor/mcp.json",
        r#"{"mcpServers":{"fs":{"command":"mine"}}}"#,
    );
    let before = project.tree_hash();
    let stderr = project.fails(&["eject"]);
    assert!(
        stderr.contains(".cursor/mcp.json#/mcpServers/fs"),
        "{stderr}"
    );
    assert_eq!(project.tree_hash(), before, "nothing was written");
}

#[test]
fn a_users_mcp_server_is_kept_and_the_file_restored_exactly() {
    let project = Project::new();
    let original = "{ \"mcpServers\": {\n    \"mine\": { \"command\": \"my-server\" } } }";
    project.write(".mcp.json", original);
    project.ok(&["eject", "claude"]);
    let mcp = project.json(".mcp.json");
    assert_eq!(mcp["mcpServers"]["mine"]["command"], "my-server");
    assert_eq!(mcp["mcpServers"]["fs"]["command"], "npx");
    project.ok(&["eject", "--remove"]);
    assert_eq!(project.read(".mcp.json"), original);
}

#[test]
fn a_user_edit_after_eject_is_kept_by_remove() {
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers":{"mine":{"command":"my-server"}}}"#,
    );
    project.ok(&["eject", "claude"]);
    let mut mcp = project.json(".mcp.json");
    mcp["mcpServers"]["later"] = serde_json::json!({"command": "added-after"});
    project.write(".mcp.json", &serde_json::to_string(&mcp).unwrap());
    project.ok(&["eject", "--remove"]);
    let mcp = project.json(".mcp.json");
    assert_eq!(
        mcp["mcpServers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["mine", "later"]
    );
}

#[test]
fn eject_again_after_adding_a_package_updates_what_it_wrote() {
    let project = Project::new();
    project.ok(&["eject", "claude", "codex"]);
    let first = project.json(".agentpack/eject/manifest.json");
    let settings_before = project.json(".claude/settings.json");
    assert!(settings_before.get("hooks").is_none());

    project.ok(&["add", project.hook_plugin().to_str().unwrap(), "--no-sync"]);
    project.ok(&["eject", "claude", "codex"]);
    let settings = project.json(".claude/settings.json");
    assert_eq!(settings["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    assert!(project.json(".mcp.json")["mcpServers"]["local"].is_object());
    let second = project.json(".agentpack/eject/manifest.json");
    assert!(second["files"].as_array().unwrap().len() > first["files"].as_array().unwrap().len());

    // Its own copies under ./.agents/ are not read back as the project overlay.
    let skills: Vec<String> = std::fs::read_dir(project.path(".claude/skills"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        skills,
        ["hello-skill"],
        "the commands stay commands for Claude"
    );

    // A third run with nothing changed writes the same files.
    project.ok(&["eject", "claude", "codex"]);
    assert_eq!(
        project.json(".agentpack/eject/manifest.json")["files"],
        second["files"]
    );
}

#[test]
fn remove_leaves_the_project_as_it_was() {
    let project = Project::new();
    project.write(
        ".claude/settings.json",
        "{\n  \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}]},\n  \"model\": \"opus\"\n}\n",
    );
    project.write(".cursor/rules/mine.mdc", "my rule\n");
    project.ok(&["add", project.hook_plugin().to_str().unwrap(), "--no-sync"]);
    project.ok(&["sync"]);
    let before = project.tree_hash();
    project.ok(&["eject"]);
    assert_ne!(project.tree_hash(), before);
    project.ok(&["eject"]);
    project.ok(&["eject", "--remove"]);
    assert_eq!(project.tree_hash(), before);
    // A second --remove has nothing left to do.
    project.ok(&["eject", "--remove"]);
    assert_eq!(project.tree_hash(), before);
}

/// The project's `.codex/config.toml` as JSON.
fn codex_config(project: &Project) -> serde_json::Value {
    agentpack_harness::render::eject::toml_to_json(&project.read(".codex/config.toml")).unwrap()
}

#[test]
fn codex_mcp_servers_are_merged_into_the_project_config_toml() {
    let project = Project::new();
    let before = project.tree_hash();
    let stderr = project.ok(&["eject", "codex"]);
    let config = codex_config(&project);
    assert_eq!(
        config["mcp_servers"]["fs"],
        serde_json::json!({"command": "npx", "args": ["-y", "server-fs"]})
    );
    assert!(
        stderr.contains(".codex/config.toml") && stderr.contains("trust_level = \"trusted\""),
        "{stderr}"
    );
    assert!(!stderr.contains("MCP servers (config.toml)"), "{stderr}");
    let manifest = project.json(".agentpack/eject/manifest.json");
    assert!(manifest["edits"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["file"] == ".codex/config.toml"
            && e["path"] == serde_json::json!(["mcp_servers", "fs"])));
    // The user's Codex home is never written.
    assert!(!project.home.home.join(".codex/config.toml").exists());

    // Eject created the file: --remove deletes it and the directory.
    project.ok(&["eject", "--remove"]);
    assert!(!project.path(".codex").exists());
    assert_eq!(project.tree_hash(), before);
}

#[test]
fn a_users_codex_config_is_kept_and_restored_exactly() {
    let project = Project::new();
    let original = "# my Codex project settings\nmodel = \"o3\"  # inline note\n\n[mcp_servers.mine]\ncommand = \"my-server\"\nargs = [ \"--flag\" ]\n";
    project.write(".codex/config.toml", original);
    project.ok(&["eject", "codex"]);
    let text = project.read(".codex/config.toml");
    assert!(
        text.starts_with(original),
        "the user's text is kept as written:\n{text}"
    );
    let config = codex_config(&project);
    assert_eq!(config["mcp_servers"]["mine"]["command"], "my-server");
    assert_eq!(config["mcp_servers"]["fs"]["command"], "npx");
    project.ok(&["eject", "codex"]);
    assert_eq!(
        project.read(".codex/config.toml"),
        text,
        "a re-eject is stable"
    );
    project.ok(&["eject", "--remove"]);
    assert_eq!(project.read(".codex/config.toml"), original);

    // Edited after eject: only eject's server is taken out, the rest stays byte for byte.
    project.ok(&["eject", "codex"]);
    let edited = format!("{}\n# added later\n", project.read(".codex/config.toml"));
    project.write(".codex/config.toml", &edited);
    project.ok(&["eject", "--remove"]);
    assert_eq!(
        project.read(".codex/config.toml"),
        format!("{original}\n# added later\n")
    );
}

#[test]
fn a_conflicting_codex_server_is_refused_with_nothing_written() {
    let project = Project::new();
    project.write(
        ".codex/config.toml",
        "# mine\n[mcp_servers.fs]\ncommand = \"my-fs\"\n",
    );
    let before = project.tree_hash();
    let stderr = project.fails(&["eject", "codex"]);
    assert!(
        stderr.contains(".codex/config.toml#/mcp_servers/fs"),
        "{stderr}"
    );
    assert_eq!(project.tree_hash(), before, "nothing was written");
}

#[test]
fn the_real_codex_lists_the_ejected_server_in_a_trusted_project() {
    let Some(bin) = agentpack_test_support::agents_bin() else {
        return;
    };
    let project = Project::new();
    project.ok(&["eject", "codex"]);
    let codex_home = tempfile::tempdir().unwrap();
    let root = project.home.project.canonicalize().unwrap();
    let list = |trusted: bool| {
        let home = codex_home
            .path()
            .join(if trusted { "trusted" } else { "untrusted" });
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let config = if trusted {
            format!(
                "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                root.display()
            )
        } else {
            String::new()
        };
        std::fs::write(home.join(".codex/config.toml"), config).unwrap();
        let output = std::process::Command::new(PathBuf::from(&bin).join("codex"))
            .args(["mcp", "list"])
            .current_dir(&root)
            .env("HOME", &home)
            .env("CODEX_HOME", home.join(".codex"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "codex mcp list failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    };
    let trusted = list(true);
    assert!(
        trusted
            .lines()
            .any(|l| l.starts_with("fs ") && l.contains("npx")),
        "codex mcp list does not show the ejected server:\n{trusted}"
    );
    let untrusted = list(false);
    assert!(
        !untrusted.lines().any(|l| l.starts_with("fs ")),
        "an untrusted project's config is ignored:\n{untrusted}"
    );
    // The ejected custom agent (.codex/agents/reviewer.toml) reaches the model's prompt.
    let home = codex_home.path().join("trusted");
    let output = std::process::Command::new(PathBuf::from(&bin).join("codex"))
        .args(["debug", "prompt-input", "hi"])
        .current_dir(&root)
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"))
        .output()
        .unwrap();
    let prompt = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "codex debug prompt-input failed");
    assert!(
        prompt.contains("reviewer: {"),
        "codex does not list the ejected custom agent"
    );

    // The ejected hooks are project hooks (`hooks/list` of Codex's app server). Codex still asks
    // the user to trust each one before it runs it.
    project.ok(&["add", project.hook_plugin().to_str().unwrap(), "--no-sync"]);
    project.ok(&["eject", "codex"]);
    let mut command = std::process::Command::new(PathBuf::from(&bin).join("codex"));
    command
        .arg("app-server")
        .current_dir(&root)
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"));
    let listed = agentpack_test_support::codex_daemon::ask_app_server(
        command,
        "hooks/list",
        serde_json::json!({"cwds": [root.display().to_string()]}),
    );
    let hooks = listed["data"][0]["hooks"].as_array().unwrap();
    let ejected = root.join(".codex/hooks.json");
    let hook = hooks
        .iter()
        .find(|h| h["sourcePath"] == ejected.display().to_string())
        .unwrap_or_else(|| panic!("codex does not list the ejected hooks: {listed}"));
    assert_eq!(hook["source"], "project");
    assert_eq!(hook["eventName"], "preToolUse");
    assert_eq!(hook["matcher"], "Bash");
    assert_eq!(hook["trustStatus"], "untrusted");
    assert!(hook["command"]
        .as_str()
        .unwrap()
        .contains("hook-exec dispatch --agent codex"));
    assert!(
        listed["data"][0]["errors"].as_array().unwrap().is_empty(),
        "{listed}"
    );
}

#[test]
fn a_codex_servers_secret_values_stay_out_with_a_warning() {
    let project = Project::new();
    let manifest = project.path("agentpack.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(
        "\n[mcp.servers.api]\ncommand = \"api-server\"\nenv = { API_KEY = \"sk-test-secret-1\" }\n",
    );
    std::fs::write(&manifest, text).unwrap();
    project.ok(&["sync"]);
    let stderr = project.ok(&["eject", "codex"]);
    assert!(
        stderr.contains("MCP server `api` (codex)") && stderr.contains("env API_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-test-secret-1"), "{stderr}");
    let config = project.read(".codex/config.toml");
    assert!(!config.contains("sk-test-secret-1"), "{config}");
    assert_eq!(
        codex_config(&project)["mcp_servers"]["api"]["command"],
        "api-server"
    );
}

#[test]
fn a_secret_template_is_named_never_written() {
    let project = Project::new();
    let manifest = project.path("agentpack.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(
        "\n[mcp.servers.db]\ncommand = \"db-server\"\nenv = { DATABASE_URL = 'postgres://app:pw-SENTINEL@${DB_HOST}/app' }\n",
    );
    std::fs::write(&manifest, text).unwrap();
    let stderr = project.ok(&["eject", "claude", "codex"]);
    assert!(!stderr.contains("pw-SENTINEL"), "{stderr}");
    // Claude Code's server reads the launcher's variable, which the editor must now provide.
    assert!(
        stderr.contains("MCP server `db` reads AGENTPACK_MCP_DB_DATABASE_URL from the environment"),
        "{stderr}"
    );
    assert_eq!(
        project.json(".mcp.json")["mcpServers"]["db"]["env"]["DATABASE_URL"],
        "${AGENTPACK_MCP_DB_DATABASE_URL}"
    );
    // Codex's has the value left out, and says so by name.
    assert!(
        stderr.contains("MCP server `db` (codex)") && stderr.contains("env DATABASE_URL"),
        "{stderr}"
    );
    for file in [".mcp.json", ".codex/config.toml"] {
        assert!(!project.read(file).contains("pw-SENTINEL"), "{file}");
    }
}

#[test]
fn remove_with_json_lists_what_it_took_out_and_what_it_left() {
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers":{"mine":{"command":"my-server"}}}"#,
    );
    project.ok(&["eject", "claude"]);
    let manifest = project.json(".agentpack/eject/manifest.json");
    // The user changes the value of a server eject added: --remove leaves that key.
    let mut mcp = project.json(".mcp.json");
    mcp["mcpServers"]["fs"]["command"] = serde_json::json!("my-own-npx");
    project.write(".mcp.json", &serde_json::to_string(&mcp).unwrap());

    let output = project.run(&["--json", "eject", "--remove"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", output.stdout));
    assert_eq!(report["schema_version"], 1);
    assert!(report["features"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("json-reads-v1")));
    assert_eq!(report["agents"], serde_json::json!(["claude"]));
    assert_eq!(report["manifest"], ".agentpack/eject/manifest.json");

    let recorded_files: Vec<&serde_json::Value> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["path"])
        .collect();
    let removed_files: Vec<&serde_json::Value> = report["removed"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert!(!removed_files.is_empty());
    for file in &recorded_files {
        assert!(removed_files.contains(file), "{file} is listed as removed");
        assert!(!project.path(file.as_str().unwrap()).exists());
    }
    // `.claude/settings.json` did not exist: eject created it, --remove deleted it.
    assert!(removed_files.contains(&&serde_json::json!(".claude/settings.json")));
    assert!(!project.path(".claude/settings.json").exists());

    let fs_key =
        serde_json::json!({"file": ".mcp.json", "path": ["mcpServers", "fs"], "kind": "key"});
    assert_eq!(report["left"]["settings"], serde_json::json!([fs_key]));
    let removed_settings = report["removed"]["settings"].as_array().unwrap();
    assert!(!removed_settings.contains(&fs_key));
    assert_eq!(
        removed_settings.len() + 1,
        manifest["edits"].as_array().unwrap().len(),
        "every recorded setting is either removed or left"
    );
    let outcomes: BTreeMap<String, String> = report["json_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(outcomes[".mcp.json"], "edited");
    assert_eq!(outcomes[".claude/settings.json"], "deleted");

    let removed_dirs = report["removed"]["dirs"].as_array().unwrap();
    assert!(removed_dirs.contains(&serde_json::json!(".agentpack/eject")));
    for dir in removed_dirs {
        assert!(
            !project.path(dir.as_str().unwrap()).exists(),
            "{dir} is gone"
        );
    }
    assert_eq!(report["left"]["dirs"], serde_json::json!([]));

    // Nothing left to remove: still one envelope, with nothing in it.
    let again = project.run(&["--json", "eject", "--remove"]);
    assert!(again.status.success());
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["manifest"], serde_json::Value::Null);
    assert_eq!(report["removed"]["files"], serde_json::json!([]));
}

#[test]
fn a_write_failing_part_way_puts_every_file_back() {
    let project = Project::new();
    project.ok(&["add", project.hook_plugin().to_str().unwrap(), "--no-sync"]);
    project.ok(&["sync"]);
    // Claude's settings are a dotfiles link to a file whose directory is gone: eject plans to merge
    // its hook into them and can only fail when it writes them, after its own copies are written.
    std::fs::create_dir_all(project.path(".claude")).unwrap();
    let missing = project.packages.path().join("gone/settings.json");
    std::os::unix::fs::symlink(&missing, project.path(".claude/settings.json")).unwrap();
    let before = project.tree_hash();
    let stderr = project.fails(&["eject"]);
    assert!(stderr.contains("settings.json"), "{stderr}");
    assert_eq!(
        project.tree_hash(),
        before,
        "every file eject wrote before the failure is gone again:\n{:#?}",
        project.files()
    );
}

/// With separate roots (`--definition-root D --workspace W`), eject writes into the checkout the
/// editors open, W, where the sync reads `./.agents/` and the launchers look for eject's record;
/// the definition root keeps only its manifest and lock, and `--remove` undoes it in W.
#[test]
fn with_separate_roots_eject_writes_into_the_workspace_and_removes_from_it() {
    let project = Project::new();
    let checkout = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(checkout.path()).unwrap();
    let roots = [
        "--definition-root",
        project.home.project.to_str().unwrap(),
        "--workspace",
        workspace.to_str().unwrap(),
    ];
    let definition_before = project.tree_hash();
    project.ok(&[&roots[..], &["eject", "claude"]].concat());
    assert!(
        workspace.join(".claude/commands/review.md").is_file(),
        "the copy is in the workspace"
    );
    assert!(workspace.join(".agentpack/eject/manifest.json").is_file());
    assert!(
        !project.path(".agentpack").exists() && !project.path(".claude").exists(),
        "nothing is ejected into the definition root"
    );
    assert_eq!(project.tree_hash(), definition_before);

    project.ok(&[&roots[..], &["eject", "--remove"]].concat());
    assert!(!workspace.join(".claude").exists());
    assert!(!workspace.join(".agentpack/eject/manifest.json").exists());
}
