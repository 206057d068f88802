//! Unchanged skill directories are staged as links into their package's store path where the
//! agent reads through them (Claude Code's bundle; OpenCode; Codex when no plugin manifest lies
//! above the skill), real directories elsewhere (issue 14, Build 3); the links survive
//! `store verify` and `gc`, and eject copies real files out of them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};

use agentpack_test_support::{agentpack_bin, examples_dir, IsolatedHome, Run};

fn run(home: &IsolatedHome, args: &[&str]) -> String {
    let bin = agentpack_bin();
    let output = home.command(&bin, None).args(args).output().unwrap();
    Run::new(args, output).assert_ok().text()
}

fn synced() -> (IsolatedHome, PathBuf) {
    let home = IsolatedHome::new();
    let examples = examples_dir();
    run(&home, &["init", "--name", "shared"]);
    for package in ["hello-skill", "review-plugin"] {
        let path = examples.join(package);
        run(&home, &["add", path.to_str().unwrap(), "--no-sync"]);
    }
    run(&home, &["sync"]);
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    (home, generation)
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_symlink()
}

#[test]
fn unchanged_skill_directories_link_into_the_package_where_the_agent_follows() {
    let (home, generation) = synced();
    let store = home.agentpack_home.join("cache/store/v1");
    let opencode = generation.join("opencode/skills/hello-skill");
    let codex = generation.join("codex-home/skills/hello-skill");
    let claude = generation.join("plugins/agentpack-bundle/skills/hello-skill");
    for link in [&opencode, &codex, &claude] {
        assert!(is_link(link), "{} is not a link", link.display());
        let target = std::fs::read_link(link).unwrap();
        assert!(
            target.is_absolute() && target.starts_with(&store),
            "{}",
            target.display()
        );
        assert!(link.join("SKILL.md").is_file());
    }
    // The generation references the store path its links lead into.
    let name = std::fs::read_link(&opencode)
        .unwrap()
        .strip_prefix(&store)
        .unwrap()
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let meta = store.join("meta").join(format!(
        "{}.json",
        generation.file_name().unwrap().to_string_lossy()
    ));
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(meta).unwrap()).unwrap();
    assert!(
        meta["references"]
            .as_array()
            .unwrap()
            .iter()
            .any(|reference| reference == name.as_str()),
        "{meta}"
    );
    // Cursor, Grok and Antigravity are unchecked: real directories there. Codex names a skill
    // below a plugin manifest after the plugin: the review plugin's converted command is a real
    // directory anyway, its tree keeps them too.
    for real in [
        "cursor/agentpack-bundle/skills/hello-skill",
        "grok/agentpack-bundle/skills/hello-skill",
        "agy/agentpack-bundle/skills/hello-skill",
    ] {
        let path = generation.join(real);
        assert!(!is_link(&path) && path.is_dir(), "{real}");
    }

    // The links are part of the generation's manifest: verify is clean, gc keeps their targets.
    run(&home, &["store", "verify"]);
    run(&home, &["gc"]);
    assert!(opencode.join("SKILL.md").is_file());
    run(&home, &["sync", "--verify-only"]);
}

#[test]
fn eject_copies_real_files_out_of_linked_skill_directories() {
    let (home, _) = synced();
    run(&home, &["eject", "codex"]);
    let ejected = home
        .project
        .join(".agentpack/eject/codex-home/skills/hello-skill");
    assert!(!is_link(&ejected), "{}", ejected.display());
    let skill = ejected.join("SKILL.md");
    assert!(
        std::fs::symlink_metadata(&skill).unwrap().is_file(),
        "{}",
        skill.display()
    );
}
