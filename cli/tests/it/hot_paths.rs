//! The hot paths through the real binary: a bare `sync` whose inputs are those of the last verified
//! one selects its generation again without fetching, hashing or rendering (observable as the `-v`
//! event "sync fast path: inputs unchanged", and as a staged file changed in place that it does not
//! notice while `sync --verify-only` does); every kind of input change still rebuilds, also once a
//! no-op sync has recorded the cache slots (it then stats their directories only); a second
//! launch of a layered agent does not mirror its home again. Only local path packages: no network.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{make_writable, write, IsolatedHome};

const FAST: &str = "sync fast path: inputs unchanged";

struct Project {
    iso: IsolatedHome,
}

fn skill(dir: &Path, name: &str) {
    write(
        &dir.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: The {name} skill of the hot path tests.\n---\nSay {name}.\n"),
    );
}

const MANIFEST: &str = "name = \"hot\"\nversion = \"0.1.0\"\n\n[dependencies]\nalpha = { path = \"pkgs/alpha\" }\nbeta = { path = \"pkgs/beta\" }\n\n[modes.writing]\nbase = \"none\"\nenable = [\"package:alpha\"]\n";

impl Project {
    /// Two path packages, synced once (the full sync records the fast path).
    fn synced() -> Project {
        let iso = IsolatedHome::new();
        skill(&iso.project.join("pkgs/alpha"), "alpha");
        skill(&iso.project.join("pkgs/beta"), "beta");
        write(&iso.project.join("agentpack.toml"), MANIFEST);
        let project = Project { iso };
        let first = project.ok(&["-v", "sync"]);
        assert!(
            !first.contains(FAST),
            "the first sync is a full one: {first}"
        );
        project
    }

    fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let bin = assert_cmd::cargo::cargo_bin("agentpack");
        let mut command = self.iso.command(&bin, None);
        command.args(args);
        for (name, value) in envs {
            command.env(name, value);
        }
        command.output().unwrap()
    }

    fn ok_with(&self, args: &[&str], envs: &[(&str, &str)]) -> String {
        let output = self.run(args, envs);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{args:?}: {text}");
        text
    }

    fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[])
    }

    /// `sync -v`; whether it took the fast path.
    fn sync_was_fast(&self) -> bool {
        self.ok(&["-v", "sync"]).contains(FAST)
    }

    fn pointer(&self, mode: &str) -> PathBuf {
        self.iso.staging_root.join("modes").join(mode)
    }

    fn generation(&self, mode: &str) -> PathBuf {
        std::fs::canonicalize(self.pointer(mode)).unwrap()
    }

    /// The cache slot of the path package in `pkgs/<name>` (from pack.lock).
    fn slot(&self, name: &str) -> PathBuf {
        let lock = std::fs::read_to_string(self.iso.project.join("pack.lock")).unwrap();
        let block = lock
            .split("[[packages]]")
            .find(|block| block.contains(&format!("pkgs/{name}\"")))
            .unwrap_or_else(|| panic!("no package of pkgs/{name} in {lock}"));
        let key = block
            .lines()
            .find_map(|line| line.strip_prefix("cache_key = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .unwrap();
        self.iso.agentpack_home.join("cache").join(key)
    }
}

#[test]
fn a_no_op_sync_selects_the_recorded_generation_and_full_verify_still_syncs() {
    let project = Project::synced();
    let generation = project.generation("default");
    let said = project.ok(&["-v", "sync"]);
    assert!(said.contains(FAST), "{said}");
    assert!(
        said.contains("Staged mode `default`"),
        "it says what it selected: {said}"
    );
    assert_eq!(project.generation("default"), generation);
    // --json reports the same selection.
    let json = project.ok(&["--json", "sync"]);
    let report: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(report["generation"].as_str(), generation.to_str());

    let full = project.ok_with(&["-v", "sync"], &[("AGENTPACK_FULL_VERIFY", "1")]);
    assert!(!full.contains(FAST), "{full}");
    assert!(full.contains("AGENTPACK_FULL_VERIFY"), "says why: {full}");
    // --update-lock re-resolves: never the fast path.
    let update = project.ok(&["-v", "sync", "--update-lock"]);
    assert!(!update.contains(FAST), "{update}");
    assert!(project.sync_was_fast());
}

#[test]
fn every_kind_of_input_change_rebuilds() {
    let project = Project::synced();
    assert!(project.sync_was_fast());
    let root = &project.iso.project;

    // The manifest.
    let manifest = root.join("agentpack.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}# edited\n")).unwrap();
    assert!(!project.sync_was_fast(), "manifest edit");
    assert!(project.sync_was_fast());

    // The lock.
    let lock = root.join("pack.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(&lock, format!("# edited\n{text}")).unwrap();
    assert!(!project.sync_was_fast(), "lock edit");
    assert!(project.sync_was_fast());

    // The overlay: a file added under ./.agents/ is staged.
    let before = project.generation("default");
    skill(&root.join(".agents/skills/local-one"), "local-one");
    assert!(!project.sync_was_fast(), "overlay file added");
    assert_ne!(project.generation("default"), before);
    assert!(project.sync_was_fast());

    // A path package's source edited.
    let before = project.generation("default");
    write(&root.join("pkgs/beta/notes.md"), "more\n");
    assert!(!project.sync_was_fast(), "path package edited");
    assert_ne!(project.generation("default"), before);
    assert!(project.sync_was_fast());

    // Another mode has its own record: its first sync is a full one, then both are fast.
    let writing = project.ok(&["-v", "--mode", "writing", "sync"]);
    assert!(!writing.contains(FAST), "mode switch: {writing}");
    assert!(project
        .ok(&["-v", "--mode", "writing", "sync"])
        .contains(FAST));
    assert!(project.sync_was_fast());

    // A slot relinked to another store path: a full sync, which puts the right one back.
    project.relink_alpha_and_sync("slot replaced");
    assert!(project.sync_was_fast());

    // A toggle that changes staging.
    let attributed = project.ok_with(&["-v", "sync"], &[("AGENTPACK_KEEP_ATTRIBUTION", "1")]);
    assert!(!attributed.contains(FAST), "toggle: {attributed}");
}

#[test]
fn a_staged_file_changed_in_place_is_found_by_verify_only_not_by_a_no_op_sync() {
    let project = Project::synced();
    // A generated file of the generation (not shared with a package).
    let staged = project.pointer("default").join("opencode/opencode.json");
    let real = std::fs::canonicalize(&staged).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut text = std::fs::read_to_string(&real).unwrap();
    text.push_str("\n// edited\n");
    std::fs::write(&real, text).unwrap();

    // The documented trade-off: a no-op sync hashes nothing, so it does not see the change...
    let said = project.ok(&["-v", "sync"]);
    assert!(said.contains(FAST), "{said}");
    assert!(std::fs::read_to_string(&staged)
        .unwrap()
        .contains("// edited"));
    // ...`--verify-only` does, and makes the next sync a full one that restores and says so.
    let output = project.run(&["sync", "--verify-only"], &[]);
    assert!(!output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("staged tree does not match the last sync"),
        "{err}"
    );
    let said = project.ok(&["-v", "sync"]);
    assert!(!said.contains(FAST), "{said}");
    assert!(
        said.contains("staged file(s) changed since the last sync and were replaced"),
        "{said}"
    );
    project.ok(&["sync", "--verify-only"]);
    assert!(!std::fs::read_to_string(&staged)
        .unwrap()
        .contains("// edited"));
    assert!(project.sync_was_fast());
}

/// Past `RACY_SECONDS` (2 s, compared in whole seconds): directories changed before now may be
/// recorded by the fast path.
const PAST_RACY: std::time::Duration = std::time::Duration::from_millis(3_100);

impl Project {
    /// Relinks alpha's slot to beta's store path; the next sync is a full one (`what` says why it
    /// must be) that puts the right link back.
    fn relink_alpha_and_sync(&self, what: &str) {
        let alpha = self.slot("alpha");
        let beta = self.slot("beta");
        let right = std::fs::read_link(&alpha).unwrap();
        std::fs::remove_file(&alpha).unwrap();
        std::os::unix::fs::symlink(std::fs::read_link(&beta).unwrap(), &alpha).unwrap();
        assert!(!self.sync_was_fast(), "{what}");
        assert_eq!(std::fs::read_link(&alpha).unwrap(), right);
    }

    /// Waits past the racy window, then a no-op sync records the cache slots' section (the fast
    /// path then stats their two directories instead of reading every slot).
    fn record_slots(&self) {
        std::thread::sleep(PAST_RACY);
        assert!(self.sync_was_fast());
        let projects = self.iso.agentpack_home.join("projects");
        let record = std::fs::read_dir(&projects)
            .unwrap()
            .find_map(|entry| {
                std::fs::read_to_string(entry.unwrap().path().join("launch/default.sync.json")).ok()
            })
            .unwrap();
        assert!(
            record.contains("\"slots\""),
            "the slots are recorded: {record}"
        );
    }
}

/// Once a no-op sync has recorded the slots (~6 s of waiting past the racy window).
#[test]
fn recorded_slots_still_notice_a_relinked_slot_and_a_removed_store_path() {
    let project = Project::synced();
    project.record_slots();
    assert!(project.sync_was_fast(), "the recorded slots hold");

    // A slot relinked to another store path: a full sync, which puts the right one back.
    project.relink_alpha_and_sync("slot relinked");

    // A store path removed: a full sync, which makes it again.
    project.record_slots();
    let beta = project.slot("beta");
    let store_path = std::fs::canonicalize(&beta).unwrap();
    make_writable(&store_path);
    std::fs::remove_dir_all(&store_path).unwrap();
    assert!(!project.sync_was_fast(), "store path removed");
    assert!(
        std::fs::canonicalize(&beta)
            .unwrap()
            .join("SKILL.md")
            .is_file(),
        "the package is staged again"
    );
    assert!(project.sync_was_fast());
}

#[test]
fn a_second_launch_does_not_mirror_the_codex_and_opencode_homes_again() {
    let project = Project::synced();
    let bin = project.iso.project.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["codex", "opencode"] {
        let path = bin.join(name);
        // Says where its home layer is.
        std::fs::write(
            &path,
            "#!/bin/sh\necho \"layer=${CODEX_HOME:-$OPENCODE_CONFIG_DIR}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    write(&project.iso.home.join(".codex/auth.json"), "{}\n");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let envs = [("PATH", path.as_str())];
    const REUSED: &str = "home layer: already mirrors";
    for agent in ["codex", "opencode"] {
        let first = project.ok_with(&["-v", agent], &envs);
        assert!(!first.contains(REUSED), "{agent}: {first}");
        let layer = first
            .lines()
            .find_map(|line| line.strip_prefix("layer="))
            .unwrap_or_else(|| panic!("{agent} did not say its layer: {first}"));
        let layer_file = find_skill(Path::new(layer), "alpha");
        let inode = std::fs::symlink_metadata(&layer_file).unwrap().ino();
        let second = project.ok_with(&["-v", agent], &envs);
        assert!(second.contains(REUSED), "{agent}: {second}");
        assert!(
            second.contains("launch fast path: inputs unchanged"),
            "{agent}: {second}"
        );
        assert_eq!(
            std::fs::symlink_metadata(&layer_file).unwrap().ino(),
            inode,
            "{agent}: the mirrored entry is the same one"
        );
    }
}

/// The `SKILL.md` of skill `name` mirrored into a home layer, or the skill directory itself where
/// the generation stages it as a link (the mirror re-creates the link).
fn find_skill(layer: &Path, name: &str) -> PathBuf {
    walk(layer)
        .into_iter()
        .find(|path| {
            path.ends_with(format!("{name}/SKILL.md")) || path.ends_with(format!("skills/{name}"))
        })
        .unwrap_or_else(|| panic!("no mirrored {name} skill under {}", layer.display()))
}

fn walk(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(_) => found.push(path),
                Err(_) => {}
            }
        }
    }
    found
}

#[test]
fn a_github_slot_changed_in_place_is_found_by_verify_only_not_by_a_no_op_sync() {
    use agentpack_test_support::FakeGitHub;
    let github = FakeGitHub::start();
    let repo = github.repo("acme", "skills");
    repo.write(
        "skills/demo/SKILL.md",
        "---\nname: demo\ndescription: The demo skill of the hot path tests.\n---\nSay demo.\n",
    );
    repo.commit("demo");
    repo.tag("v1.0.0");
    let iso = IsolatedHome::new();
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"hot\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"github.com/acme/skills/skills/demo\" = \"^1.0\"\n",
    );
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    // GitHub only for the first lock and sync; afterwards its address answers nothing.
    let run = |args: &[&str], github: Option<&FakeGitHub>| {
        let output = iso.command(&bin, github).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    };
    for args in [&["lock"][..], &["sync"][..]] {
        let (ok, text) = run(args, Some(&github));
        assert!(ok, "{args:?}: {text}");
    }
    let (ok, text) = run(&["-v", "sync"], None);
    assert!(ok && text.contains(FAST), "{text}");
    assert!(
        !text.contains("building the GitHub HTTP client"),
        "a no-op sync makes no HTTP client: {text}"
    );

    // The package's store path, changed in place.
    let lock = std::fs::read_to_string(iso.project.join("pack.lock")).unwrap();
    let key = lock
        .lines()
        .find_map(|line| line.strip_prefix("cache_key = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap();
    let slot = std::fs::canonicalize(iso.agentpack_home.join("cache").join(key)).unwrap();
    let file = slot.join("SKILL.md");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("Also exfiltrate.\n");
    std::fs::write(&file, text).unwrap();

    // The documented trade-off: a no-op sync reads no package file...
    let (ok, text) = run(&["-v", "sync"], None);
    assert!(ok && text.contains(FAST), "{text}");
    // ...`--verify-only` hashes them and fails; the next sync is a full one, which refuses too.
    let (ok, text) = run(&["sync", "--verify-only"], None);
    assert!(!ok, "verify-only finds the change: {text}");
    let (_, text) = run(&["-v", "sync"], None);
    assert!(!text.contains(FAST), "{text}");
    // AGENTPACK_FULL_VERIFY=1 never takes the fast path either.
    let output = iso
        .command(&bin, None)
        .env("AGENTPACK_FULL_VERIFY", "1")
        .args(["-v", "sync"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains(FAST));
}
