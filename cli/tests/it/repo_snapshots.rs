//! Repo snapshots end to end: the real `agentpack` binary against a fake GitHub on 127.0.0.1 that
//! counts archive downloads. A repository at one commit is downloaded once and kept in the store;
//! later commands take packages (and marketplace catalogs) from it; `gc` removes it; a changed
//! snapshot is not used.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{agentpack_bin, Endpoint, FakeGitHub, IsolatedHome, Run, TestRepo};

struct World {
    home: IsolatedHome,
    github: FakeGitHub,
}

impl World {
    fn new() -> Self {
        let world = Self {
            home: IsolatedHome::new(),
            github: FakeGitHub::start(),
        };
        world.ok(&["init", "--name", "demo"]);
        world
    }

    fn run(&self, args: &[&str]) -> Output {
        self.home
            .command(&agentpack_bin(), Some(&self.github))
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        Run::new(args, self.run(args)).assert_ok().stderr
    }

    fn downloads(&self, repo: &str) -> usize {
        self.github.count(Endpoint::Tarball, "acme", repo)
            + self.github.count(Endpoint::GitHttp, "acme", repo)
    }

    /// The kept snapshots of `acme/<repo>` in the store.
    fn snapshots(&self, repo: &str) -> Vec<PathBuf> {
        let suffix = format!("-snapshot-acme-{repo}");
        walk(&self.home.agentpack_home.join("cache"), 4, false)
            .into_iter()
            .filter(|path| {
                let name = path.file_name().unwrap().to_string_lossy();
                path.is_dir() && !name.starts_with('.') && name.ends_with(&suffix)
            })
            .collect()
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.home.project.join("pack.lock")).unwrap()
    }
}

/// Every path below `dir`, `depth` levels deep at most, following directory links if `follow`.
fn walk(dir: &Path, depth: usize, follow: bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = if follow {
            path.is_dir()
        } else {
            entry.file_type().is_ok_and(|kind| kind.is_dir())
        };
        found.push(path.clone());
        if is_dir && depth > 1 {
            found.extend(walk(&path, depth - 1, follow));
        }
    }
    found
}

fn skill(repo: &TestRepo, dir: &str, name: &str) {
    repo.write(
        &format!("{dir}/SKILL.md"),
        format!("---\nname: {name}\ndescription: the {name} skill\n---\n\nDo {name} things.\n"),
    );
}

/// Replaces `file` (inside a sealed store path) with other bytes, as a careless edit would.
fn tamper(file: &Path, text: &str) {
    let dir = file.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_file(file).unwrap();
    std::fs::write(file, text).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
}

#[test]
fn one_by_one_adds_of_one_commit_download_once_until_gc_and_never_use_a_changed_snapshot() {
    let world = World::new();
    let big = world.github.repo("acme", "big");
    for index in 0..23 {
        skill(
            &big,
            &format!("skills/s{index:02}"),
            &format!("s{index:02}"),
        );
    }
    let commit = big.commit("twenty-three skills");

    for index in 0..20 {
        world.ok(&["add", &format!("acme/big/skills/s{index:02}@{commit}")]);
    }
    assert_eq!(
        world.downloads("big"),
        1,
        "twenty adds of one commit, one download"
    );
    let snapshots = world.snapshots("big");
    assert_eq!(snapshots.len(), 1, "one kept snapshot: {snapshots:?}");
    let snapshot = &snapshots[0];
    // The tree is kept as one archive, the downloaded tarball itself (no file shares an inode with
    // a package's blobs).
    assert!(snapshot.join("tree.tar.gz").is_file());
    assert!(!snapshot.join("tree.tar.zst").exists());
    assert!(!snapshot.join("tree").exists());
    for index in 0..20 {
        assert!(
            world.lock().contains(&format!(
                "module = \"github.com/acme/big/skills/s{index:02}\""
            )),
            "s{index:02} locked"
        );
    }
    // A full re-lock takes every package from the snapshot too.
    world.ok(&["lock", "--update"]);
    assert_eq!(world.downloads("big"), 1, "lock --update downloads nothing");

    // The snapshot is no root: gc removes it, and the next add downloads again (and keeps it).
    world.ok(&["gc"]);
    assert!(!snapshot.exists(), "gc removed the snapshot");
    world.ok(&["add", &format!("acme/big/skills/s20@{commit}")]);
    assert_eq!(world.downloads("big"), 2, "after gc: downloaded again");
    let snapshots = world.snapshots("big");
    assert_eq!(snapshots.len(), 1, "kept again: {snapshots:?}");

    // A changed snapshot is detected and not used: downloaded again, the package is the real one.
    // (A forged archive of another tree is refused by the builders' snapshot tests.)
    tamper(
        &snapshots[0].join("tree.tar.gz"),
        "---\nname: s21\ndescription: evil\n---\n\nDo evil things.\n",
    );
    let stderr = world.ok(&["add", &format!("acme/big/skills/s21@{commit}")]);
    assert_eq!(world.downloads("big"), 3, "a changed snapshot is not used");
    assert!(stderr.contains("was changed"), "{stderr}");
    let staged = walk(&world.home.staging_root, 12, true)
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|name| name == "SKILL.md"))
        .map(|path| std::fs::read_to_string(path).unwrap_or_default())
        .filter(|text| text.contains("name: s21"))
        .collect::<Vec<_>>();
    assert!(!staged.is_empty(), "s21 staged");
    assert!(
        staged.iter().all(|text| text.contains("Do s21 things.")),
        "the staged s21 is the repository's, not the changed snapshot's: {staged:?}"
    );

    // `store verify --repair` restores the snapshot from its blobs: used again, no download.
    world.ok(&["store", "verify", "--repair"]);
    let stderr = world.ok(&["add", &format!("acme/big/skills/s22@{commit}")]);
    assert!(!stderr.contains("was changed"), "{stderr}");
    assert_eq!(
        world.downloads("big"),
        3,
        "the repaired snapshot serves the next add"
    );
}

#[test]
fn plugin_adds_of_one_marketplace_download_it_once() {
    let world = World::new();
    let market = world.github.repo("acme", "market");
    let plugins = 6;
    let mut entries = Vec::new();
    for index in 0..plugins {
        let name = format!("p{index}");
        entries.push(format!(
            r#"{{"name":"{name}","source":"./plugins/{name}"}}"#
        ));
        market.write(
            &format!("plugins/{name}/.claude-plugin/plugin.json"),
            format!(r#"{{"name":"{name}","description":"plugin {name}"}}"#),
        );
        market.write(
            &format!("plugins/{name}/commands/hello-{name}.md"),
            "---\ndescription: say hello\n---\nSay hello.\n",
        );
    }
    market.write(
        ".claude-plugin/marketplace.json",
        format!(
            r#"{{"name":"market","owner":{{"name":"acme"}},"plugins":[{}]}}"#,
            entries.join(",")
        ),
    );
    market.commit("market");

    for index in 0..plugins {
        world.ok(&["add", "acme/market", "--plugin", &format!("p{index}")]);
    }
    assert_eq!(
        world.downloads("market"),
        1,
        "{plugins} plugin adds of one marketplace commit, one download"
    );
    for index in 0..plugins {
        assert!(
            world.lock().contains(&format!(
                "module = \"github.com/acme/market/plugins/p{index}\""
            )),
            "p{index} locked:\n{}",
            world.lock()
        );
    }
}

#[test]
fn a_sync_without_the_snapshot_takes_verified_packages_from_the_store_and_downloads_nothing() {
    let world = World::new();
    let repo = world.github.repo("acme", "pair");
    skill(&repo, "skills/one", "one");
    skill(&repo, "skills/two", "two");
    let commit = repo.commit("two skills");
    world.ok(&["add", &format!("acme/pair/skills/one@{commit}")]);
    world.ok(&["add", &format!("acme/pair/skills/two@{commit}")]);
    assert_eq!(world.downloads("pair"), 1);

    // The snapshot goes (gc'd, or kept by an older agentpack under another name); the packages'
    // verified store paths stay, so nothing needs the repository again.
    assert_eq!(world.snapshots("pair").len(), 1);
    for snapshot in world.snapshots("pair") {
        for path in walk(&snapshot, 8, false) {
            if path.is_dir() {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        std::fs::set_permissions(&snapshot, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&snapshot).unwrap();
    }
    assert!(world.snapshots("pair").is_empty());
    let full = world
        .home
        .command(&agentpack_bin(), Some(&world.github))
        .args(["sync"])
        .env("AGENTPACK_FULL_VERIFY", "1")
        .output()
        .unwrap();
    Run::new(&["sync"], full).assert_ok();
    world.ok(&["lock"]);
    assert_eq!(
        world.downloads("pair"),
        1,
        "a full sync and a lock of verified packages download nothing"
    );
}
