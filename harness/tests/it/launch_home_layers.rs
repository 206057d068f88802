//! Home layers prepared from a real rendered generation (read-only, like a store path) and a fake
//! user HOME: what each agent sees, what is private, and that nothing under the user's real agent
//! homes changes beyond what the docs allow.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use crate::launch_common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use agentpack_harness::launch::home_layer::{self, HomeLayerRequest, PreparedHome, WorkspaceLinks};
use agentpack_harness::Agent;
use launch_common::{changed, tree_digest, world, World};

fn request<'a>(
    w: &'a World,
    agent: Agent,
    user: &'a home_layer::UserEnv,
    yolo: bool,
) -> HomeLayerRequest<'a> {
    HomeLayerRequest {
        agent,
        generation: &w.generation,
        project_root: &w.project,
        project_hash: "0123456789abcdef",
        mode_dir: "default",
        agentpack_home: &w.agentpack_home,
        staging_root_override: Some(&w.staging_root),
        state_dir: &w.state_dir,
        user,
        secrets: &w.secrets[&agent],
        keep_attribution: false,
        yolo,
        workspace: &w.project,
        keychain: None,
    }
}

fn prepare(w: &World, agent: Agent, yolo: bool) -> PreparedHome {
    let user = w.user_env();
    let prepared = home_layer::prepare(&request(w, agent, &user, yolo)).unwrap();
    // Preparing again changes nothing and does not fail.
    let again = home_layer::prepare(&request(w, agent, &user, yolo)).unwrap();
    assert_eq!(prepared, again);
    prepared
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn exe() -> std::path::PathBuf {
    std::path::PathBuf::from("/usr/local/bin/agentpack")
}

#[test]
fn codex_gets_a_short_writable_home_with_bridged_credentials_and_history() {
    let w = world(&exe());
    let before = tree_digest(&w.home);
    let prepared = prepare(&w, Agent::Codex, false);
    let home = prepared.root.clone().unwrap();
    assert_eq!(prepared.env["CODEX_HOME"], home.as_os_str());
    assert!(
        home.starts_with(w.staging_root.join("ap-c/0123456789abcdef/default")),
        "{home:?}"
    );
    assert!(
        home.as_os_str().len() + home_layer::CODEX_SOCKET_SUFFIX.len()
            <= home_layer::MAX_SOCKET_PATH
    );
    assert!(std::fs::read_to_string(
        home.parent()
            .unwrap()
            .parent()
            .unwrap()
            .join(".agentpack-project")
    )
    .unwrap()
    .contains(&*w.project.to_string_lossy()));
    // Skills: pack content is a hard link (never a file symlink); the user's are linked beside it.
    let skill = home.join("skills/demo-skill/SKILL.md");
    let meta = std::fs::symlink_metadata(&skill).unwrap();
    assert!(meta.is_file());
    let staged =
        std::fs::metadata(w.generation.join("codex-home/skills/demo-skill/SKILL.md")).unwrap();
    assert_eq!(meta.ino(), staged.ino());
    assert_eq!(
        std::fs::read_link(home.join("skills/mine")).unwrap(),
        w.home.join(".codex/skills/mine")
    );
    // The home itself is writable (Codex installs skills/.system and sockets into it).
    std::fs::create_dir_all(home.join("skills/.system")).unwrap();
    // config.toml: the user's, attribution stripped, the pack's servers and secrets, 0600.
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.starts_with("# mine\n"), "{config}");
    let parsed: toml::Table = toml::from_str(&config).unwrap();
    assert_eq!(parsed["model"].as_str(), Some("gpt-5"));
    assert!(parsed.get("commit_attribution").is_none());
    assert_eq!(parsed["cli_auth_credentials_store"].as_str(), Some("file"));
    assert_eq!(parsed["mcp_oauth_credentials_store"].as_str(), Some("file"));
    assert_eq!(
        parsed["sqlite_home"].as_str(),
        Some(&*w.home.join(".codex").to_string_lossy())
    );
    assert!(
        config.contains("sk-SENTINEL"),
        "the secret is materialised here: {config}"
    );
    assert_eq!(mode_of(&home.join("config.toml")), 0o600);
    assert!(
        !std::fs::read_to_string(w.generation.join("codex-home/config.toml"))
            .unwrap()
            .contains("sk-SENTINEL")
    );
    // ... but not under the home (the staging root): its config.toml links to the private copy
    // in the project's state directory (0700), and no file under the home holds the secret.
    let private = home_layer::private_config_dir(
        &w.state_dir,
        "default",
        &home_layer::generation_id(&w.generation),
    );
    assert_eq!(
        std::fs::read_link(home.join("config.toml")).unwrap(),
        private.join("config.toml")
    );
    assert_eq!(mode_of(&private), 0o700);
    assert_eq!(
        mode_of(&w.state_dir.join(home_layer::PRIVATE_CONFIG_DIR)),
        0o700
    );
    assert_eq!(
        files_holding(&w.staging_root, "sk-SENTINEL"),
        Vec::<PathBuf>::new()
    );
    // Credentials and history links.
    assert_eq!(
        std::fs::read_link(home.join("auth.json")).unwrap(),
        w.home.join(".codex/auth.json")
    );
    assert_eq!(
        std::fs::read_link(home.join(".credentials.json")).unwrap(),
        w.state_dir.join("codex-mcp-oauth/.credentials.json")
    );
    assert!(w.state_dir.join("codex-mcp-oauth/mcp-oauth-locks").is_dir());
    for name in ["sessions", "archived_sessions", "history.jsonl"] {
        assert_eq!(
            std::fs::read_link(home.join(name)).unwrap(),
            w.home.join(".codex").join(name)
        );
    }
    // Only the documented native history paths appeared under the real HOME.
    let after = tree_digest(&w.home);
    assert_eq!(
        changed(&before, &after),
        [
            ".codex/archived_sessions",
            ".codex/history.jsonl",
            ".codex/sessions"
        ]
    );
}

#[test]
fn codex_without_a_real_auth_file_links_the_shared_one() {
    let w = world(&exe());
    std::fs::remove_file(w.home.join(".codex/auth.json")).unwrap();
    let prepared = prepare(&w, Agent::Codex, false);
    let home = prepared.root.unwrap();
    assert_eq!(
        std::fs::read_link(home.join("auth.json")).unwrap(),
        w.agentpack_home.join("shared/codex/auth.json")
    );
    // A long staging root falls back to /var/tmp.
    let long = w
        .root
        .join("a-staging-root-that-is-far-too-long-for-a-socket-path");
    let dir = home_layer::codex_home_dir(Some(&long), "0123456789abcdef", "default", "0a1b2c3d");
    assert_eq!(
        dir,
        Path::new("/var/tmp/ap-c/0123456789abcdef/default/g-0a1b2c3d")
    );
}

#[test]
fn opencode_gets_a_writable_root_seeded_from_the_user_config() {
    let w = world(&exe());
    let before = tree_digest(&w.home);
    let prepared = prepare(&w, Agent::OpenCode, true);
    let root = prepared.root.clone().unwrap();
    assert_eq!(prepared.env["OPENCODE_CONFIG_DIR"], root.as_os_str());
    assert!(
        root.starts_with(w.state_dir.join("homes/default/0a1b2c3d")),
        "{root:?}"
    );
    assert!(
        std::fs::symlink_metadata(root.join("skills/demo-skill/SKILL.md"))
            .unwrap()
            .is_file()
    );
    assert!(root.join("agents/reviewer.md").is_file());
    assert_eq!(
        std::fs::read_link(root.join("agents/mine.md")).unwrap(),
        w.home.join(".config/opencode/agents/mine.md")
    );
    std::fs::write(root.join(".gitignore"), "node_modules\n").unwrap();
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("opencode.json")).unwrap())
            .unwrap();
    assert_eq!(config["provider"]["acme"]["name"], "Acme");
    assert!(config["mcp"]["user-srv"].is_object() && config["mcp"]["retrieval"].is_object());
    assert_eq!(config["permission"], "allow", "--yolo");
    assert_eq!(mode_of(&root.join("opencode.json")), 0o600);
    // JSON agents get their secrets as variables.
    assert!(
        prepared.env.values().any(|v| v == "sk-SENTINEL"),
        "{:?}",
        prepared.env
    );
    assert!(changed(&before, &tree_digest(&w.home)).is_empty());
}

#[test]
fn cursor_runs_in_a_synthetic_home_and_the_agents_link_is_tracked() {
    let w = world(&exe());
    let before = tree_digest(&w.home);
    let prepared = prepare(&w, Agent::Cursor, false);
    let fake = prepared.root.clone().unwrap();
    let dot = fake.join(".cursor");
    assert_eq!(prepared.env["HOME"], fake.as_os_str());
    assert_eq!(prepared.env["CURSOR_CONFIG_DIR"], dot.as_os_str());
    assert_eq!(
        prepared.env["CURSOR_DATA_DIR"],
        w.home.join(".cursor").as_os_str()
    );
    assert_eq!(
        prepared.env["CARGO_HOME"],
        w.home.join(".cargo").as_os_str()
    );
    assert_eq!(
        prepared.env["DOCKER_CONFIG"],
        w.home.join(".docker").as_os_str()
    );
    assert_eq!(
        std::fs::read_link(dot.join("skills/demo-skill")).unwrap(),
        w.generation
            .join("cursor/agentpack-bundle/skills/demo-skill")
    );
    assert_eq!(
        std::fs::read_link(dot.join("skills/user-skill")).unwrap(),
        w.home.join(".cursor/skills/user-skill")
    );
    assert_eq!(
        std::fs::read_link(dot.join("chats")).unwrap(),
        w.home.join(".cursor/chats")
    );
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dot.join("cli-config.json")).unwrap())
            .unwrap();
    assert!(!std::fs::symlink_metadata(dot.join("cli-config.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(config["attribution"]["attributeCommitsToAgent"], false);
    assert_eq!(config["editor"]["vimMode"], true);
    let mcp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dot.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["user-srv"]["command"], "user");
    assert!(mcp["mcpServers"]["retrieval"].is_object());
    assert_eq!(mode_of(&dot.join("mcp.json")), 0o600);
    assert!(dot.join("hooks.json").is_file());
    assert_eq!(
        std::fs::read_link(fake.join(".config/cursor")).unwrap(),
        w.home.join(".config/cursor")
    );
    // The workspace link, recorded.
    let link = w.project.join(".cursor/agents");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        w.generation.join("cursor/agentpack-bundle/agents")
    );
    assert_eq!(prepared.workspace_links.len(), 1);
    assert_eq!(WorkspaceLinks::load(&w.state_dir).unwrap().links().len(), 1);
    // Only the documented Cursor profile directories appeared.
    assert_eq!(
        changed(&before, &tree_digest(&w.home)),
        [".config/Cursor", ".config/cursor"]
    );

    // Another launcher removes it and makes its own; bare sync removes every one.
    let agy = prepare(&w, Agent::Antigravity, false);
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "the Cursor link is gone"
    );
    let plugin = w.project.join(".agents/plugins/agentpack-bundle");
    assert_eq!(
        std::fs::read_link(&plugin).unwrap(),
        w.generation.join("agy/agentpack-bundle")
    );
    assert_eq!(agy.workspace_links.len(), 1);
    let mut links = WorkspaceLinks::load(&w.state_dir).unwrap();
    assert!(links.remove_all_except(None).unwrap().is_empty());
    links.save().unwrap();
    assert!(std::fs::symlink_metadata(&plugin).is_err());
    assert!(WorkspaceLinks::load(&w.state_dir)
        .unwrap()
        .links()
        .is_empty());
}

#[test]
fn a_real_agents_directory_in_the_workspace_is_left_alone() {
    let w = world(&exe());
    launch_common::write(&w.project.join(".cursor/agents/own.md"), "mine");
    let prepared = prepare(&w, Agent::Cursor, false);
    assert!(prepared.workspace_links.is_empty());
    assert!(
        prepared
            .warnings
            .iter()
            .any(|m| m.contains("not a link agentpack made")),
        "{:?}",
        prepared.warnings
    );
    assert!(w.project.join(".cursor/agents/own.md").is_file());
    let _ = prepare(&w, Agent::Claude, false);
    assert!(w.project.join(".cursor/agents/own.md").is_file());
}

#[test]
fn grok_home_syncs_credentials_through_the_shared_copy() {
    let w = world(&exe());
    let before = tree_digest(&w.home);
    let prepared = prepare(&w, Agent::Grok, false);
    let home = prepared.root.clone().unwrap();
    assert_eq!(prepared.env["GROK_HOME"], home.as_os_str());
    assert_eq!(home, w.state_dir.join("grok-homes/default/0a1b2c3d"));
    let config: toml::Table =
        toml::from_str(&std::fs::read_to_string(home.join("config.toml")).unwrap()).unwrap();
    assert_eq!(config["model"].as_str(), Some("grok-4"));
    let enabled = config["plugins"]["enabled"].as_array().unwrap();
    assert!(enabled
        .iter()
        .any(|v| v.as_str() == Some("agentpack-bundle")));
    assert!(config["mcp_servers"]["retrieval"].is_table());
    assert_eq!(mode_of(&home.join("config.toml")), 0o600);
    assert_eq!(
        std::fs::read_link(home.join("plugins/agentpack-bundle")).unwrap(),
        w.generation.join("grok/agentpack-bundle")
    );
    assert_eq!(
        std::fs::read_link(home.join("sessions")).unwrap(),
        w.home.join(".grok/sessions")
    );
    assert_eq!(
        std::fs::read_to_string(home.join("auth.json")).unwrap(),
        "{\"token\": \"grok\"}\n"
    );
    assert_eq!(mode_of(&home.join("auth.json")), 0o600);
    // Grok refreshes its token; after the launch the shared copy has it, the real file is untouched.
    std::fs::write(home.join("auth.json"), "{\"token\": \"refreshed\"}\n").unwrap();
    let user = w.user_env();
    home_layer::after_exit(&request(&w, Agent::Grok, &user, false), &prepared).unwrap();
    assert_eq!(
        std::fs::read_to_string(w.agentpack_home.join("shared/grok/auth.json")).unwrap(),
        "{\"token\": \"refreshed\"}\n"
    );
    assert_eq!(changed(&before, &tree_digest(&w.home)), [".grok/sessions"]);
}

#[test]
fn claude_needs_no_home_and_a_missing_tree_is_reported() {
    let w = world(&exe());
    let before = tree_digest(&w.home);
    let prepared = prepare(&w, Agent::Claude, false);
    assert!(prepared.root.is_none());
    assert!(prepared.env.values().any(|v| v == "sk-SENTINEL"));
    assert!(changed(&before, &tree_digest(&w.home)).is_empty());
    let user = w.user_env();
    let mut missing = request(&w, Agent::Codex, &user, false);
    let empty = w.root.join("empty-generation");
    std::fs::create_dir_all(&empty).unwrap();
    missing.generation = &empty;
    let err = home_layer::prepare(&missing).unwrap_err();
    assert!(err.to_string().contains("agentpack sync"), "{err}");
}

#[test]
fn layers_of_generations_nobody_uses_are_pruned() {
    let w = world(&exe());
    for agent in [Agent::Codex, Agent::OpenCode, Agent::Grok, Agent::Cursor] {
        prepare(&w, agent, false);
    }
    // A layer of an older generation, and one a live launch still holds.
    let old = w.state_dir.join("homes/default/deadbeef/opencode");
    let held = w.state_dir.join("grok-homes/default/cafebabe");
    let old_codex = w
        .staging_root
        .join("ap-c/0123456789abcdef/default/g-deadbeef");
    // The private configs of the old Codex home, of the live one, and of one whose home is gone.
    let old_config = home_layer::private_config_dir(&w.state_dir, "default", "deadbeef");
    let gone_config = home_layer::private_config_dir(&w.state_dir, "default", "0ddba11f");
    let live_config = home_layer::private_config_dir(&w.state_dir, "default", "0a1b2c3d");
    for dir in [&old, &held, &old_codex, &old_config, &gone_config] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(w.home.join(".codex/sessions"), old_codex.join("sessions")).unwrap();
    std::fs::create_dir_all(w.home.join(".codex/sessions")).unwrap();
    std::fs::write(w.home.join(".codex/sessions/s.jsonl"), "{}").unwrap();
    let keep = ["0a1b2c3d".to_string(), "cafebabe".to_string()]
        .into_iter()
        .collect();
    let removed = home_layer::prune_layers(
        &w.state_dir,
        "default",
        "0123456789abcdef",
        Some(&w.staging_root),
        &keep,
        &home_layer::DaemonPolicy::default(),
    )
    .unwrap()
    .removed;
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(!old.exists() && !old_codex.exists());
    assert!(held.is_dir());
    assert!(
        w.home.join(".codex/sessions/s.jsonl").is_file(),
        "links are not followed"
    );
    assert!(w
        .state_dir
        .join("homes/default/0a1b2c3d/opencode/opencode.json")
        .is_file());
    assert!(w
        .staging_root
        .join("ap-c/0123456789abcdef/default/g-0a1b2c3d/config.toml")
        .is_file());
    assert!(!old_config.exists() && !gone_config.exists());
    assert!(live_config.join("config.toml").is_file());
}

#[test]
fn codex_homes_of_projects_that_are_gone_are_removed_unless_running() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let gone = base.join("ap-c/1111111111111111");
    let running = base.join("ap-c/2222222222222222");
    let alive = base.join("ap-c/3333333333333333");
    let unmarked = base.join("ap-c/4444444444444444");
    for (project, path) in [
        (&gone, "/nonexistent/project-a"),
        (&running, "/nonexistent/project-b"),
        (&alive, &*base.to_string_lossy()),
    ] {
        std::fs::create_dir_all(project.join("default/g-aaaaaaaa")).unwrap();
        std::fs::write(project.join(".agentpack-project"), format!("{path}\n")).unwrap();
    }
    std::fs::create_dir_all(running.join("default/g-bbbbbbbb")).unwrap();
    std::fs::create_dir_all(unmarked.join("default/g-aaaaaaaa")).unwrap();
    let live = ["bbbbbbbb".to_string()].into_iter().collect();
    let removed =
        home_layer::prune_orphan_codex_homes(base, &live, &home_layer::DaemonPolicy::default())
            .unwrap()
            .removed;
    assert!(!gone.exists(), "{removed:?}");
    assert!(running.join("default/g-bbbbbbbb").is_dir());
    assert!(!running.join("default/g-aaaaaaaa").exists());
    assert!(alive.join("default/g-aaaaaaaa").is_dir());
    assert!(unmarked.join("default/g-aaaaaaaa").is_dir());
}

#[test]
fn grok_credentials_are_imported_from_an_older_project_home() {
    let w = world(&exe());
    std::fs::remove_file(w.home.join(".grok/auth.json")).unwrap();
    let older = w
        .agentpack_home
        .join("projects/ffffffffffffffff/grok-homes/default/12345678");
    std::fs::create_dir_all(&older).unwrap();
    std::fs::write(older.join("auth.json"), "{\"token\": \"older\"}\n").unwrap();
    let prepared = prepare(&w, Agent::Grok, false);
    let home = prepared.root.unwrap();
    assert_eq!(
        std::fs::read_to_string(home.join("auth.json")).unwrap(),
        "{\"token\": \"older\"}\n"
    );
    assert!(
        !w.home.join(".grok/auth.json").exists(),
        "the real home is not written"
    );
}

/// Regular files under `root` (links not followed) whose bytes contain `needle`.
fn files_holding(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file()
                && std::fs::read(entry.path())
                    .unwrap()
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes())
            {
                found.push(entry.path());
            }
        }
    }
    found
}
