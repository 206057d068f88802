//! Resolve and fetch end to end: the real `agentpack` binary against a fake GitHub on 127.0.0.1 over
//! real git repositories (`agentpack-test-support`). Every command the issue names, the offline
//! fallbacks, one download per (repo, commit), and tampering.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{agentpack_bin, Endpoint, FakeGitHub, IsolatedHome, Run, TestRepo};

struct World {
    home: IsolatedHome,
    github: Option<FakeGitHub>,
}

impl World {
    fn new() -> Self {
        Self {
            home: IsolatedHome::new(),
            github: Some(FakeGitHub::start()),
        }
    }

    fn github(&self) -> &FakeGitHub {
        self.github.as_ref().expect("server running")
    }

    fn run(&self, args: &[&str]) -> Output {
        let output = self
            .home
            .command(&agentpack_bin(), self.github.as_ref())
            .args(args)
            .output()
            .unwrap();
        output
    }

    fn ok(&self, args: &[&str]) -> String {
        Run::new(args, self.run(args)).assert_ok().stderr
    }

    fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(!output.status.success(), "agentpack {args:?} should fail");
        assert!(output.stdout.is_empty() || args.contains(&"--dry-run"));
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.home.project.join(name)).unwrap_or_default()
    }

    fn lock(&self) -> String {
        self.file("pack.lock")
    }

    fn manifest(&self) -> String {
        self.file("agentpack.toml")
    }

    fn slot(&self, cache_key: &str) -> PathBuf {
        self.home.agentpack_home.join("cache").join(cache_key)
    }

    fn staged(&self) -> PathBuf {
        self.home.staging_root.join("modes/default")
    }
}

fn skill(repo: &TestRepo, dir: &str, name: &str) {
    let file = if dir.is_empty() {
        "SKILL.md".to_owned()
    } else {
        format!("{dir}/SKILL.md")
    };
    repo.write(
        &file,
        format!("---\nname: {name}\ndescription: the {name} skill\n---\n\nDo {name} things.\n"),
    );
}

/// The value of `key` in the `[[packages]]` entry of `module`.
fn lock_field(lock: &str, module: &str, key: &str) -> String {
    let entry = lock
        .split("[[packages]]")
        .find(|entry| entry.contains(&format!("module = \"{module}\"")))
        .unwrap_or_else(|| panic!("{module} not in lock:\n{lock}"));
    entry
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key} = \"")))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .unwrap_or_else(|| panic!("{key} missing for {module}"))
}

fn make_file_writable_and_append(path: &Path, extra: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let real = std::fs::canonicalize(path).unwrap();
    let mut perms = std::fs::metadata(&real).unwrap().permissions();
    perms.set_mode(0o644);
    std::fs::set_permissions(&real, perms).unwrap();
    let mut text = std::fs::read_to_string(&real).unwrap();
    text.push_str(extra);
    std::fs::write(&real, text).unwrap();
}

#[test]
fn every_spec_form_locks_stages_and_verifies() {
    let world = World::new();
    let gh = world.github();

    // A monorepo with SemVer tags.
    let mono = gh.repo("acme", "mono");
    skill(&mono, "skills/alpha", "alpha");
    skill(&mono, "skills/beta", "beta");
    mono.commit("v1.0.0");
    mono.tag("v1.0.0");
    skill(&mono, "skills/alpha", "alpha-1-1");
    let v110 = mono.commit("v1.1.0");
    mono.tag("v1.1.0");
    skill(&mono, "skills/alpha", "alpha-2");
    mono.commit("v2.0.0");
    mono.tag("v2.0.0");

    // A repo followed by branch, one by tag, one by commit.
    let wip = gh.repo("acme", "wip");
    skill(&wip, "", "wip");
    let wip_first = wip.commit("first");
    let rules = gh.repo("acme", "rules");
    skill(&rules, "", "rules");
    rules.commit("one");
    rules.tag("v3.0.0");
    let pinned = gh.repo("acme", "pinned");
    skill(&pinned, "", "pinned");
    let pinned_commit = pinned.commit("pinned");
    skill(&pinned, "", "pinned-later");
    pinned.commit("later");

    // A package with a transitive dependency.
    let parent = gh.repo("acme", "parent");
    skill(&parent, "", "parent");
    parent.write(
        "agentpack.toml",
        "name = \"parent\"\nversion = \"1.0.0\"\n\n[dependencies]\n\"github.com/acme/mono/skills/beta\" = \"^1.0\"\n",
    );
    parent.commit("parent");

    // A marketplace with one plugin in its own directory.
    let market = gh.repo("acme", "market");
    market.write(
        ".claude-plugin/marketplace.json",
        r#"{"name":"market","owner":{"name":"acme"},"plugins":[{"name":"tools","source":"./plugins/tools"},{"name":"other","source":"./plugins/other"}]}"#,
    );
    market.write(
        "plugins/tools/.claude-plugin/plugin.json",
        r#"{"name":"tools","description":"tools"}"#,
    );
    market.write(
        "plugins/tools/commands/hello.md",
        "---\ndescription: say hello\n---\nSay hello.\n",
    );
    market.write(
        "plugins/other/.claude-plugin/plugin.json",
        r#"{"name":"other"}"#,
    );
    market.commit("market");

    // A local package.
    let local = world.home.project.parent().unwrap().join("local-rules");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::write(
        local.join("SKILL.md"),
        "---\nname: local-rules\ndescription: local\n---\nLocal.\n",
    )
    .unwrap();

    world.ok(&["init", "--name", "demo"]);
    world.ok(&["add", "acme/mono/skills/alpha@^1.0"]);
    let lock = world.lock();
    assert_eq!(
        lock_field(&lock, "github.com/acme/mono/skills/alpha", "commit"),
        v110,
        "^1.0 picks v1.1.0"
    );
    world.ok(&["add", "github.com/acme/wip", "--no-sync"]);
    assert!(
        world.manifest().contains("\"github.com/acme/wip\""),
        "{}",
        world.manifest()
    );
    world.ok(&["add", "acme/rules@v3.0.0"]);
    world.ok(&["add", &format!("acme/pinned@{pinned_commit}")]);
    world.ok(&["add", "https://github.com/acme/parent/tree/main"]);
    world.ok(&["add", "../local-rules"]);
    world.ok(&["add", "acme/market", "--plugin", "tools"]);

    let lock = world.lock();
    assert!(lock.starts_with("lockfile_version = 3\n"), "{lock}");
    assert_eq!(
        lock_field(&lock, "github.com/acme/wip", "commit"),
        wip_first
    );
    assert_eq!(
        lock_field(&lock, "github.com/acme/pinned", "commit"),
        pinned_commit
    );
    assert_eq!(
        lock_field(&lock, "github.com/acme/mono/skills/beta", "commit").len(),
        40,
        "the transitive dependency is locked"
    );
    assert!(
        lock.contains("module = \"github.com/acme/market/plugins/tools\""),
        "{lock}"
    );
    assert!(lock.contains("module = \"local-rules\""), "{lock}");
    for entry in lock.split("[[packages]]").skip(1) {
        assert!(
            entry.contains("content_hash = \"sha256-tree-v1:"),
            "every entry is hashed: {entry}"
        );
    }

    // Everything is staged for Claude Code (skills of every package, the plugin's command).
    let bundle = world.staged().join("plugins/agentpack-bundle");
    for skill in [
        "alpha-1-1",
        "wip",
        "rules",
        "pinned",
        "parent",
        "beta",
        "local-rules",
    ] {
        assert!(
            bundle.join("skills").join(skill).join("SKILL.md").is_file(),
            "{skill} staged"
        );
    }
    assert!(bundle.join("commands/hello.md").is_file());

    // A branch moves only with lock --update, which says so.
    skill(&wip, "", "wip-2");
    let wip_second = wip.commit("second");
    world.ok(&["lock"]);
    assert_eq!(
        lock_field(&world.lock(), "github.com/acme/wip", "commit"),
        wip_first
    );
    let said = world.ok(&["lock", "--update"]);
    assert!(
        said.contains(&format!("moved from commit {wip_first} to {wip_second}")),
        "{said}"
    );
    assert_eq!(
        lock_field(&world.lock(), "github.com/acme/wip", "commit"),
        wip_second
    );

    // A conflicting constraint on the transitive module fails naming both requesters, writing nothing.
    let before = (world.manifest(), world.lock());
    let err = world.fails(&["add", "acme/mono/skills/beta@^2.0"]);
    assert!(
        err.contains("github.com/acme/parent") && err.contains("agentpack.toml"),
        "{err}"
    );
    assert_eq!(
        (world.manifest(), world.lock()),
        before,
        "a failed add changes nothing"
    );

    // remove drops the entry (and its transitive dependency) and restages.
    world.ok(&["remove", "github.com/acme/parent"]);
    let lock = world.lock();
    assert!(!lock.contains("github.com/acme/parent"), "{lock}");
    assert!(!lock.contains("github.com/acme/mono/skills/beta"), "{lock}");
    assert!(
        !bundle.join("skills/parent").exists(),
        "the pointer selects a generation without it"
    );

    world.ok(&["sync", "--verify-only"]);
    world.ok(&["store", "verify"]);
}

#[test]
fn offline_fallbacks_and_one_download_per_commit() {
    let mut world = World::new();
    let gh = world.github();
    let mono = gh.repo("acme", "big");
    for index in 0..20 {
        skill(
            &mono,
            &format!("skills/s{index:02}"),
            &format!("s{index:02}"),
        );
    }
    mono.commit("twenty skills");
    mono.tag("v1.0.0");
    let mut manifest = String::from("name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
    for index in 0..20 {
        manifest.push_str(&format!(
            "\"github.com/acme/big/skills/s{index:02}\" = \"^1.0\"\n"
        ));
    }
    std::fs::write(world.home.project.join("agentpack.toml"), manifest).unwrap();
    world.ok(&["lock"]);
    assert_eq!(
        gh.count(Endpoint::Tarball, "acme", "big"),
        1,
        "twenty packages, one archive"
    );
    world.ok(&["sync"]);
    assert_eq!(
        gh.count(Endpoint::Tarball, "acme", "big"),
        1,
        "a warm sync downloads nothing"
    );

    // REST failing: the git protocol resolves a new ref.
    let other = gh.repo("acme", "other");
    skill(&other, "", "other");
    other.commit("other");
    gh.set_rest_down(Some(500));
    world.ok(&["add", "acme/other@main"]);
    assert!(gh.total(Endpoint::GitHttp) > 0, "the git protocol was used");
    gh.set_rest_down(None);

    // Both down: `lock --update` re-resolves `main` from the fresh cached lookup.
    let lock_before = world.lock();
    gh.set_rest_down(Some(500));
    gh.set_git_http_enabled(false);
    world.ok(&["lock", "--update"]);
    assert_eq!(world.lock(), lock_before);
    gh.set_git_http_enabled(true);
    gh.set_rest_down(None);

    // The server gone entirely: a sync from the warm store still succeeds.
    world.github = None;
    world.ok(&["sync"]);
    world.ok(&["sync", "--verify-only"]);

    // The documented CI recipe: only `$AGENTPACK_HOME/cache` is saved and restored (here into a new
    // home, as `actions/cache` would), and an offline sync is warm and verified.
    let restored = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(world.home.agentpack_home.join("cache"))
        .arg(restored.path().join("cache"))
        .status()
        .unwrap();
    assert!(status.success());
    let bin = agentpack_bin();
    for args in [&["sync"][..], &["sync", "--verify-only"][..]] {
        let output = world
            .home
            .command(&bin, None)
            .env("AGENTPACK_HOME", restored.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?} from a restored cache: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn tampering_stops_the_command_and_changes_nothing() {
    let world = World::new();
    let gh = world.github();
    let repo = gh.repo("acme", "skills");
    // The package is the repository root, so a file added to the served archive lands in it.
    skill(&repo, "", "demo");
    let commit = repo.commit("demo");
    repo.tag("v1.0.0");
    world.ok(&["init", "--name", "demo"]);
    world.ok(&["add", "acme/skills@^1"]);
    let module = "github.com/acme/skills";
    let lock = world.lock();
    let cache_key = lock_field(&lock, module, "cache_key");
    let content_hash = lock_field(&lock, module, "content_hash");
    let slot = world.slot(&cache_key);

    // 1. A changed byte in the cached package (an edit through a hard link): a plain sync restores
    //    it from a verified source and names the file it replaced.
    make_file_writable_and_append(&slot.join("SKILL.md"), "tampered\n");
    let err = world.ok(&["sync"]);
    assert!(
        err.contains(&format!(
            "restored {module}: SKILL.md (edited through a hard link?)"
        )),
        "{err}"
    );
    assert_eq!(world.lock(), lock, "the lock is untouched");
    world.ok(&["sync", "--verify-only"]);
    assert!(!std::fs::read_to_string(slot.join("SKILL.md"))
        .unwrap()
        .contains("tampered"));
    // ... but not from a tampered archive: with no kept snapshot and GitHub serving other bytes,
    //    it stops and changes nothing.
    gh.tamper_tarball("acme", "skills", &commit);
    world.ok(&["gc"]);
    make_file_writable_and_append(&slot.join("SKILL.md"), "tampered\n");
    let pointer_before = std::fs::read_link(world.staged()).unwrap();
    // (The no-op fast path does not hash packages; `--verify-only` finds the damage and drops it.)
    world.fails(&["sync", "--verify-only"]);
    let err = world.fails(&["sync"]);
    assert!(err.contains("does not match pack.lock"), "{err}");
    assert!(err.contains(&format!("expected  {content_hash}")), "{err}");
    assert_eq!(world.lock(), lock, "the lock is untouched");
    assert_eq!(
        std::fs::read_link(world.staged()).unwrap(),
        pointer_before,
        "staging is untouched"
    );
    assert!(
        std::fs::read_to_string(slot.join("SKILL.md"))
            .unwrap()
            .contains("tampered"),
        "the damaged copy was left as found"
    );

    // 2. A changed archive served for the same commit, with an empty cache: refused, and --repair
    //    cannot fix it.
    std::fs::remove_file(&slot).unwrap();
    // The kept repo snapshot would serve the package again: collect it, so the cache is empty.
    world.ok(&["gc"]);
    let err = world.fails(&["sync"]);
    assert!(err.contains("does not match"), "{err}");
    let err = world.fails(&["sync", "--repair"]);
    assert!(err.contains("does not match"), "{err}");
    assert_eq!(world.lock(), lock);

    // 3. A hand-edited content_hash: refused by every command, nothing rewritten.
    let bad = lock.replace(
        &content_hash,
        "sha256-0000000000000000000000000000000000000000000000000000000000000000",
    );
    std::fs::write(world.home.project.join("pack.lock"), &bad).unwrap();
    for args in [&["sync"][..], &["lock"][..]] {
        let err = world.fails(args);
        assert!(
            err.contains(&format!("invalid content_hash in pack.lock: {module}")),
            "{err}"
        );
        assert_eq!(world.lock(), bad, "{args:?} leaves the lock as it was");
    }

    // 4. A hand-edited commit: inconsistent with its cache_key.
    let other = "1111111111111111111111111111111111111111";
    let edited = lock.replace(&commit, other);
    std::fs::write(world.home.project.join("pack.lock"), &edited).unwrap();
    let err = world.fails(&["sync"]);
    assert!(
        err.contains(&format!("inconsistent pack.lock entry: {module}")),
        "{err}"
    );
    assert_eq!(world.lock(), edited);
}

#[test]
fn the_local_mirror_serves_owner_repo_specs_and_names_offline() {
    let mut world = World::new();
    world.github = None; // nothing to reach: everything comes from $AGENTPACK_HOME/local/
    let mirror = world.home.agentpack_home.join("local");
    for (dir, name) in [
        ("acme/mirrored/skills/one", "one"),
        ("team-rules", "team-rules"),
    ] {
        std::fs::create_dir_all(mirror.join(dir)).unwrap();
        std::fs::write(
            mirror.join(dir).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: mirrored\n---\nFrom the mirror.\n"),
        )
        .unwrap();
    }
    world.ok(&["init"]);
    world.ok(&["add", "acme/mirrored/skills/one"]);
    world.ok(&["add", "team-rules"]);
    let lock = world.lock();
    assert_eq!(
        lock_field(&lock, "github.com/acme/mirrored/skills/one", "url"),
        "local:acme/mirrored/skills/one"
    );
    assert_eq!(lock_field(&lock, "team-rules", "url"), "local:team-rules");
    let bundle = world.staged().join("plugins/agentpack-bundle/skills");
    assert!(bundle.join("one/SKILL.md").is_file() && bundle.join("team-rules/SKILL.md").is_file());

    // The mirror is re-copied and re-hashed: an edit there reaches the next sync.
    std::fs::write(mirror.join("team-rules/extra.md"), "more\n").unwrap();
    world.ok(&["sync"]);
    assert!(bundle.join("team-rules/extra.md").is_file());
    world.ok(&["sync", "--verify-only"]);
}

#[test]
fn a_changed_ref_moves_the_pin_and_an_unknown_ref_is_refused() {
    let world = World::new();
    let gh = world.github();
    let repo = gh.repo("acme", "skills");
    skill(&repo, "skills/demo", "demo");
    let main = repo.commit("main");
    repo.branch("dev");
    skill(&repo, "skills/demo", "demo-dev");
    let dev = repo.commit("dev");
    repo.switch("main");
    let module = "github.com/acme/skills/skills/demo";
    world.ok(&["init", "--name", "demo"]);
    world.ok(&["add", "acme/skills/skills/demo@main", "--no-sync"]);
    assert_eq!(lock_field(&world.lock(), module, "commit"), main);

    // `add spec@ref` with another branch: the lock follows it.
    let err = world.ok(&["add", "acme/skills/skills/demo@dev", "--no-sync"]);
    assert!(
        err.contains(&format!("{module}: moved from commit {main} to {dev}")),
        "{err}"
    );
    assert!(world
        .manifest()
        .contains(&format!("\"{module}\" = \"dev\"")));
    assert_eq!(lock_field(&world.lock(), module, "commit"), dev);

    // A hand edit of the branch, then `lock`: reconciled both ways.
    let path = world.home.project.join("agentpack.toml");
    for (branch, commit) in [("main", &main), ("dev", &dev)] {
        let text = world.manifest();
        let edited: String = text
            .lines()
            .map(|line| {
                if line.starts_with(&format!("\"{module}\"")) {
                    format!("\"{module}\" = {{ branch = \"{branch}\" }}")
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&path, edited + "\n").unwrap();
        let err = world.ok(&["lock"]);
        assert!(err.contains("Wrote"), "{branch}: {err}");
        assert_eq!(
            &lock_field(&world.lock(), module, "commit"),
            commit,
            "{branch}"
        );
    }

    // An unknown ref: `add` asks GitHub, fails with what/why/fix, and writes nothing.
    let (manifest, lock) = (world.manifest(), world.lock());
    gh.reset_counters();
    let err = world.fails(&["add", "acme/skills/skills/demo@nosuchref", "--no-sync"]);
    assert!(
        err.contains("\"nosuchref\"") && err.contains("fix"),
        "{err}"
    );
    assert!(!err.contains("Added"), "{err}");
    assert!(gh.total(Endpoint::Commits) + gh.total(Endpoint::GitHttp) > 0);
    assert_eq!((world.manifest(), world.lock()), (manifest, lock));
}

#[test]
fn an_unknown_repository_names_what_was_asked() {
    let world = World::new();
    world.ok(&["init", "--name", "demo"]);
    let manifest = world.manifest();
    let err = world.fails(&["add", "nobody/nothing", "--no-sync"]);
    assert!(
        err.contains("github.com/nobody/nothing") && err.contains("its tags"),
        "{err}"
    );
    assert!(!err.contains("\"tags\""), "{err}");
    assert_eq!(world.manifest(), manifest);
}

#[test]
fn add_refuses_a_second_source_under_a_taken_name() {
    let world = World::new();
    let outside = world.home.project.parent().unwrap();
    for dir in ["repo1/pk", "repo2/pk"] {
        std::fs::create_dir_all(outside.join(dir)).unwrap();
        std::fs::write(
            outside.join(dir).join("SKILL.md"),
            format!("---\nname: pk\ndescription: {dir}\n---\nFrom {dir}.\n"),
        )
        .unwrap();
    }
    world.ok(&["init", "--name", "demo"]);
    world.ok(&["add", "../repo1/pk", "--no-sync"]);
    let (manifest, lock) = (world.manifest(), world.lock());
    assert!(manifest.contains("../repo1/pk"), "{manifest}");

    // The same directory again: a no-op success.
    world.ok(&["add", "../repo1/pk", "--no-sync"]);
    assert_eq!(
        (world.manifest(), world.lock()),
        (manifest.clone(), lock.clone())
    );

    // Another directory with the same name: refused, naming the entry and what to do.
    let err = world.fails(&["add", "../repo2/pk", "--no-sync"]);
    assert!(
        err.contains("already has a dependency named pk")
            && err.contains("../repo1/pk")
            && err.contains("agentpack remove pk")
            && err.contains("\"pk-2\" = { path = \"../repo2/pk\" }"),
        "{err}"
    );
    assert!(!err.contains("moved from commit"), "{err}");
    // A remote package under the same name: refused too.
    let err = world.fails(&["add", "pk", "--no-sync"]);
    assert!(
        err.contains("already has a dependency named pk") && err.contains("../repo1/pk"),
        "{err}"
    );
    assert_eq!((world.manifest(), world.lock()), (manifest, lock));
}

/// A GitHub package's links that are absolute or leave the package become empty files (the
/// extraction rule), and `add` names each one, like it does for a path package.
#[test]
fn a_github_package_names_the_links_it_could_not_keep() {
    let world = World::new();
    let repo = world.github().repo("acme", "linky");
    skill(&repo, "skills/demo", "demo");
    skill(&repo, "shared/other", "other");
    repo.symlink("skills/demo/escape", "/etc/hostname");
    repo.symlink("skills/demo/outside", "../../shared/other");
    repo.symlink("skills/demo/inside", "SKILL.md");
    repo.commit("links");
    world.ok(&["init", "--name", "demo"]);
    let stderr = world.ok(&["add", "acme/linky/skills/demo"]);
    assert!(
        stderr.contains("symbolic link escape is absolute or leaves the package"),
        "{stderr}"
    );
    assert!(
        stderr.contains("symbolic link outside is absolute or leaves the package"),
        "{stderr}"
    );
    assert!(!stderr.contains("symbolic link inside"), "{stderr}");
}
