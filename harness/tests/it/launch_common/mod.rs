//! Shared fixtures of the launch tests: a generation built by the real renderers into a read-only
//! directory that looks like a store path, a fake user HOME with each agent's real config, and a
//! tree digest to prove what changed under that HOME.

#![allow(clippy::unwrap_used, dead_code)] // tests may unwrap (HELPERS.md)

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use agentpack_harness::launch::home_layer::UserEnv;
use agentpack_harness::{
    render_generation, Agent, McpServer, ModeFilter, PackageInput, PathFilter, PlanEntry,
    RenderOptions, SecretLayer, StageInputs,
};
use indexmap::IndexMap;
use sha2::{Digest, Sha256};

pub struct World {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub generation: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    pub agentpack_home: PathBuf,
    pub state_dir: PathBuf,
    pub staging_root: PathBuf,
    pub secrets: BTreeMap<Agent, SecretLayer>,
}

impl Drop for World {
    fn drop(&mut self) {
        for entry in walkdir::WalkDir::new(&self.root).into_iter().flatten() {
            if entry.file_type().is_dir() {
                let _ =
                    std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755));
            }
        }
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn package(root: &Path) -> PathBuf {
    let pkg = root.join("pkg");
    write(
        &pkg.join(".claude-plugin/plugin.json"),
        r#"{"name": "demo", "version": "1.0.0"}"#,
    );
    write(
        &pkg.join("skills/demo-skill/SKILL.md"),
        "---\nname: demo-skill\ndescription: A demo skill staged by agentpack for the launch tests.\n---\nSay DEMO.\n",
    );
    write(
        &pkg.join("commands/hello.md"),
        "---\ndescription: Say hello\n---\nSay hello.\n",
    );
    write(
        &pkg.join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code for the launch tests.\n---\nReview the code.\n",
    );
    write(
        &pkg.join("hooks/hooks.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hook"}]}]}}"#,
    );
    pkg
}

/// The fake user's real config for every agent.
fn user_home(home: &Path) {
    write(
        &home.join(".codex/config.toml"),
        "# mine\nmodel = \"gpt-5\"\ncommit_attribution = \"x\"\n",
    );
    write(&home.join(".codex/auth.json"), "{\"token\": \"codex\"}\n");
    write(
        &home.join(".codex/skills/mine/SKILL.md"),
        "---\nname: mine\ndescription: The user's own Codex skill.\n---\nMine.\n",
    );
    write(
        &home.join(".config/opencode/opencode.json"),
        r#"{"provider": {"acme": {"name": "Acme"}}, "mcp": {"user-srv": {"type": "local", "command": ["x"]}}}"#,
    );
    write(
        &home.join(".config/opencode/agents/mine.md"),
        "---\ndescription: The user's agent.\n---\nMine.\n",
    );
    write(
        &home.join(".cursor/cli-config.json"),
        r#"{"attribution": {"attributeCommitsToAgent": true}, "editor": {"vimMode": true}}"#,
    );
    write(
        &home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"user-srv": {"command": "user"}}}"#,
    );
    write(&home.join(".cursor/chats/one.json"), "{}");
    write(
        &home.join(".cursor/skills/user-skill/SKILL.md"),
        "---\nname: user-skill\n---\nU.\n",
    );
    write(&home.join(".grok/config.toml"), "model = \"grok-4\"\n");
    write(&home.join(".grok/auth.json"), "{\"token\": \"grok\"}\n");
    write(
        &home.join(".claude/settings.json"),
        "{\"theme\": \"dark\"}\n",
    );
    write(&home.join(".claude.json"), "{}\n");
    write(&home.join(".gemini/settings.json"), "{}\n");
}

fn materialize(generation: &Path, entries: &BTreeMap<String, PlanEntry>) {
    for (relative, entry) in entries {
        let path = generation.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match entry {
            PlanEntry::Bytes(bytes) => std::fs::write(&path, bytes).unwrap(),
            PlanEntry::FromFile { source, .. } => {
                std::fs::copy(source, &path).unwrap();
            }
            PlanEntry::Symlink(target) => std::os::unix::fs::symlink(target, &path).unwrap(),
        }
    }
}

fn make_read_only(root: &Path) {
    let entries: Vec<_> = walkdir::WalkDir::new(root)
        .contents_first(true)
        .into_iter()
        .flatten()
        .collect();
    for entry in entries {
        let mode = if entry.file_type().is_dir() {
            0o555
        } else if entry.file_type().is_file() {
            0o444
        } else {
            continue;
        };
        std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Builds the world. `agentpack_exe` is what staged hooks call.
pub fn world(agentpack_exe: &Path) -> World {
    let dir = tempfile::Builder::new()
        .prefix("ap")
        .tempdir_in("/tmp")
        .unwrap();
    let root = dir.path().to_path_buf();
    let pkg = package(&root);
    let home = root.join("home");
    user_home(&home);
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let agentpack_home = root.join("aph");
    let project_hash = "0123456789abcdef";
    let state_dir = agentpack_home.join("projects").join(project_hash);
    let staging_root = root.join("st");
    let generation =
        agentpack_home.join("cache/store/v1/0a1b2c3d4e5f60718293a4b5c6d7e8f9-generation-default");
    let mut servers = IndexMap::new();
    servers.insert(
        "retrieval".to_string(),
        McpServer {
            command: Some("uvx".into()),
            args: vec!["mcp-retrieval".into()],
            env: [("API_KEY".to_string(), "sk-SENTINEL".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        },
    );
    let inputs = StageInputs {
        packages: vec![PackageInput {
            module: "github.com/acme/demo".into(),
            cache_key: "a".repeat(64),
            owner: "acme".into(),
            repo: "demo".into(),
            path: String::new(),
            commit: "1".repeat(40),
            kind: "plugin".into(),
            root: pkg,
            filter: PathFilter::all(),
            executables: Default::default(),
        }],
        overlay: None,
        mcp_servers: servers,
        mcp_launch: BTreeMap::new(),
        mode: ModeFilter::all(),
        listings: Default::default(),
        options: RenderOptions {
            keep_attribution: false,
            dot_agents_enabled: true,
            yolo: false,
            agentpack_exe: agentpack_exe.to_path_buf(),
            generation_root: generation.clone(),
            plugin_data_root: state_dir.join("plugin-data"),
        },
    };
    let plan = render_generation(&inputs, &Agent::ALL).unwrap();
    let mut secrets = BTreeMap::new();
    for (agent, render) in &plan.agents {
        materialize(&generation, &render.entries);
        secrets.insert(*agent, render.secrets.clone());
    }
    materialize(&generation, &plan.shared.entries);
    make_read_only(&generation);
    World {
        dir,
        root,
        generation,
        home,
        project,
        agentpack_home,
        state_dir,
        staging_root,
        secrets,
    }
}

impl World {
    pub fn user_env(&self) -> UserEnv {
        UserEnv {
            home: self.home.clone(),
            xdg_config_home: None,
            vars: BTreeMap::new(),
        }
    }
}

/// Path -> (kind, mode, content digest or link target) for every entry under `root`.
pub fn tree_digest(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        let meta = entry.path().symlink_metadata().unwrap();
        let relative = entry
            .path()
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let value = if meta.file_type().is_symlink() {
            format!("l {}", std::fs::read_link(entry.path()).unwrap().display())
        } else if meta.is_dir() {
            format!("d {:o}", meta.mode() & 0o7777)
        } else {
            let bytes = std::fs::read(entry.path()).unwrap();
            format!(
                "f {:o} {}",
                meta.mode() & 0o7777,
                hex::encode(Sha256::digest(&bytes))
            )
        };
        out.insert(relative, value);
    }
    out
}

/// The paths that differ between two digests.
pub fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}
