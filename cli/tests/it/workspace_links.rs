//! The workspace links launchers place (`./.cursor/agents` for Cursor,
//! `./.agents/plugins/agentpack-bundle` for Antigravity) through the real binary: the parent
//! directories a launcher had to create go again when another launcher or a bare `sync` removes
//! the link, and a directory the user made, or one holding anything, stays.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;

use agentpack_test_support::{demo_plugin, write, IsolatedHome};

/// Every stand-in agent exits at once: only what the launcher leaves in the workspace matters here.
const STANDIN: &str = "#!/bin/sh\nexit 0\n";

struct Workspace {
    iso: IsolatedHome,
    bin: PathBuf,
}

/// A project whose one package has an agent (so Cursor gets `.cursor/agents`) and a skill (so
/// Antigravity gets its workspace plugin), with stand-ins for every agent on PATH.
fn setup() -> Workspace {
    let iso = IsolatedHome::new();
    let bin = iso.project.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["claude", "cursor-agent", "codex", "agy"] {
        let path = bin.join(name);
        std::fs::write(&path, STANDIN).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The package lives outside the project, so the project directory holds only what a test
    // puts there.
    let pkg = iso.project.parent().unwrap().join("pkg");
    demo_plugin(&pkg, "A demo skill for the workspace link tests.");
    write(
        &pkg.join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code for the workspace link tests.\n---\nReview.\n",
    );
    write(
        &iso.project.join("agentpack.toml"),
        &format!(
            "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = {{ path = \"{}\" }}\n",
            pkg.display()
        ),
    );
    Workspace { iso, bin }
}

impl Workspace {
    fn ok(&self, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = self
            .iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .env("PATH", path)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "agentpack {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.iso.project.join(relative)
    }

    fn is_link(&self, relative: &str) -> bool {
        std::fs::symlink_metadata(self.path(relative)).is_ok_and(|m| m.file_type().is_symlink())
    }

    fn exists(&self, relative: &str) -> bool {
        std::fs::symlink_metadata(self.path(relative)).is_ok()
    }

    /// The names in the project directory, sorted.
    fn top_level(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.iso.project)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

#[test]
fn directories_a_launcher_created_go_with_its_link() {
    let w = setup();
    w.ok(&["sync"]);
    let before = w.top_level();
    assert!(!before.contains(&".cursor".to_owned()));
    assert!(!before.contains(&".agents".to_owned()));

    w.ok(&["agent", "-p", "x"]);
    assert!(w.is_link(".cursor/agents"));
    // Another agent's launcher removes the link and the `.cursor` it made.
    w.ok(&["claude"]);
    assert!(!w.exists(".cursor"), "the empty .cursor is gone");
    assert_eq!(w.top_level(), before);

    w.ok(&["agy"]);
    assert!(w.is_link(".agents/plugins/agentpack-bundle"));
    // A bare sync removes the link, `.agents/plugins` and `.agents`.
    w.ok(&["sync"]);
    assert!(!w.exists(".agents"), "the empty .agents is gone");
    assert_eq!(w.top_level(), before);

    // The same after the launcher ran twice (the second launch created nothing new).
    w.ok(&["agy"]);
    w.ok(&["agy"]);
    w.ok(&["agent", "-p", "x"]);
    assert!(!w.exists(".agents"));
    w.ok(&["codex"]);
    assert_eq!(w.top_level(), before);
}

#[test]
fn directories_the_user_made_or_filled_stay() {
    let w = setup();
    // The user's own `.agents/` (empty) and `.cursor/rules/`.
    std::fs::create_dir_all(w.path(".agents")).unwrap();
    write(&w.path(".cursor/rules/mine.mdc"), "my rule\n");

    w.ok(&["agy"]);
    assert!(w.is_link(".agents/plugins/agentpack-bundle"));
    w.ok(&["sync"]);
    assert!(!w.exists(".agents/plugins"), "agentpack made it: gone");
    assert!(w.path(".agents").is_dir(), "the user made it: stays, empty");

    w.ok(&["agent", "-p", "x"]);
    assert!(w.is_link(".cursor/agents"));
    w.ok(&["claude"]);
    assert!(!w.exists(".cursor/agents"));
    assert_eq!(
        std::fs::read_to_string(w.path(".cursor/rules/mine.mdc")).unwrap(),
        "my rule\n"
    );

    // A directory agentpack made that the user put a file in stays, with the file.
    std::fs::remove_dir(w.path(".agents")).unwrap();
    w.ok(&["agy"]);
    write(&w.path(".agents/skills/local/SKILL.md"), "mine\n");
    w.ok(&["claude"]);
    assert!(!w.exists(".agents/plugins"));
    assert!(w.path(".agents/skills/local/SKILL.md").is_file());
}
