//! Nothing staged that was not verified, through the binary: an edit through a staged hard link never
//! becomes a path package's recorded hash, `sync --verify-only` finds a deleted package store path, a
//! replaced blob is never linked into a new generation, and a plain `sync` restores an edited staged
//! file from a verified source and names it (a GitHub package from its kept repository snapshot or a
//! download; offline with neither it stops with the remedy and changes nothing).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{make_writable, FakeGitHub, IsolatedHome};

fn run(home: &IsolatedHome, args: &[&str]) -> Output {
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    home.command(&bin, None).args(args).output().unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn ok(home: &IsolatedHome, args: &[&str]) -> String {
    let output = run(home, args);
    let text = said(&output);
    assert!(output.status.success(), "{args:?}: {text}");
    text
}

/// A project with the path package `./pkgs/hello-skill` (a copy of the example), synced.
fn project_with_path_package() -> IsolatedHome {
    let home = IsolatedHome::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let package = home.project.join("pkgs/hello-skill");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::copy(
        examples.join("hello-skill/SKILL.md"),
        package.join("SKILL.md"),
    )
    .unwrap();
    ok(&home, &["init"]);
    ok(&home, &["add", "./pkgs/hello-skill"]);
    home
}

/// The staged SKILL.md of the path package, resolved to the store file it links.
fn staged_skill(home: &IsolatedHome) -> PathBuf {
    let staged = home
        .staging_root
        .join("modes/default/plugins/agentpack-bundle/skills/hello-skill/SKILL.md");
    std::fs::canonicalize(&staged).unwrap_or_else(|e| panic!("{}: {e}", staged.display()))
}

/// What an editor does through a hard link: writes the file in place.
fn edit_in_place(path: &Path, appended: &str) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut text = std::fs::read_to_string(path).unwrap();
    text.push_str(appended);
    std::fs::write(path, text).unwrap();
}

fn content_hashes(home: &IsolatedHome) -> Vec<String> {
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    lock.lines()
        .filter(|line| line.starts_with("content_hash"))
        .map(str::to_owned)
        .collect()
}

fn lock_field(home: &IsolatedHome, field: &str) -> String {
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    let prefix = format!("{field} = \"");
    lock.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .unwrap_or_else(|| panic!("no {field} in {lock}"))
}

#[test]
fn an_edit_through_a_hard_link_never_becomes_a_path_packages_hash() {
    let home = project_with_path_package();
    ok(&home, &["sync"]);
    let before = content_hashes(&home);
    let store_file = staged_skill(&home);
    edit_in_place(&store_file, "INJECTED\n");

    // Every check finds it ...
    let output = run(&home, &["store", "verify"]);
    assert!(!output.status.success(), "{}", said(&output));
    assert!(
        said(&output).contains("-hello-skill: SKILL.md: content changed"),
        "{}",
        said(&output)
    );
    let output = run(&home, &["sync", "--verify-only"]);
    assert!(!output.status.success(), "{}", said(&output));
    assert!(
        said(&output).contains("damaged   hello-skill"),
        "{}",
        said(&output)
    );

    // ... a plain sync hashes the source, restores the copy and names the staged file it replaced.
    let text = ok(&home, &["sync"]);
    assert!(text.contains("replaced from the verified cache"), "{text}");
    assert!(text.contains("skills/hello-skill/SKILL.md"), "{text}");
    assert_eq!(content_hashes(&home), before, "the source did not change");
    ok(&home, &["sync", "--verify-only"]);
    ok(&home, &["store", "verify"]);
    let staged = std::fs::read_to_string(staged_skill(&home)).unwrap();
    assert!(
        !staged.contains("INJECTED"),
        "the injected bytes are staged"
    );
}

#[test]
fn verify_only_finds_a_deleted_package_store_path_without_fetching_it() {
    let home = project_with_path_package();
    ok(&home, &["sync"]);
    let slot = home
        .agentpack_home
        .join("cache")
        .join(lock_field(&home, "cache_key"));
    let store_path = std::fs::canonicalize(&slot).unwrap();
    make_writable(&store_path);
    std::fs::remove_dir_all(&store_path).unwrap();

    for _ in 0..2 {
        // Checking never copies it back: the second run finds it missing too.
        let output = run(&home, &["sync", "--verify-only"]);
        let text = said(&output);
        assert!(!output.status.success(), "{text}");
        assert!(text.contains("missing   hello-skill"), "{text}");
        assert!(text.contains("agentpack sync --repair"), "{text}");
        assert!(!store_path.exists(), "verify-only published it again");
    }
    let output = run(&home, &["store", "verify"]);
    assert!(!output.status.success(), "{}", said(&output));

    ok(&home, &["sync", "--repair"]);
    ok(&home, &["sync", "--verify-only"]);
}

/// The blob file (under the store's `blobs/`) that is the same inode as `file`.
fn blob_of(home: &IsolatedHome, file: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    let ino = std::fs::metadata(file).unwrap().ino();
    let blobs = home.agentpack_home.join("cache/store/v1/blobs");
    for shard in std::fs::read_dir(&blobs).unwrap() {
        for blob in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let blob = blob.unwrap().path();
            if std::fs::metadata(&blob).unwrap().ino() == ino {
                return blob;
            }
        }
    }
    panic!("no blob is {}", file.display());
}

/// A second path package added to the manifest by hand, so the next sync resolves only it (the
/// locked packages keep their verified slots) and builds a new generation.
fn add_other_by_hand(home: &IsolatedHome) {
    let other = home.project.join("pkgs/other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("SKILL.md"),
        "---\nname: other\ndescription: another skill\n---\nhi\n",
    )
    .unwrap();
    let manifest = home.project.join("agentpack.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("other = { path = \"./pkgs/other\" }\n");
    std::fs::write(&manifest, text).unwrap();
}

fn run_with(home: &IsolatedHome, github: &FakeGitHub, args: &[&str]) -> String {
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let output = home
        .command(&bin, Some(github))
        .args(args)
        .output()
        .unwrap();
    let text = said(&output);
    assert!(output.status.success(), "{args:?}: {text}");
    text
}

#[test]
fn a_replaced_blob_is_never_linked_into_a_new_generation() {
    let home = IsolatedHome::new();
    let github = FakeGitHub::start();
    let repo = github.repo("acme", "skills");
    repo.write(
        "SKILL.md",
        "---\nname: demo\ndescription: the demo skill\n---\n\nDo demo things.\n",
    );
    repo.commit("demo");
    repo.tag("v1.0.0");
    run_with(&home, &github, &["init"]);
    run_with(&home, &github, &["add", "acme/skills@^1"]);
    run_with(&home, &github, &["sync"]);
    let staged = home
        .staging_root
        .join("modes/default/plugins/agentpack-bundle/skills/demo/SKILL.md");
    let generation_before = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    // Same user, no hard link: a new inode with other bytes renamed over the blob.
    let blob = blob_of(&home, &std::fs::canonicalize(&staged).unwrap());
    let forged = blob.with_file_name("forged");
    std::fs::write(
        &forged,
        "---\nname: demo\ndescription: FORGED\n---\n\nFORGED\n",
    )
    .unwrap();
    std::fs::rename(&forged, &blob).unwrap();

    add_other_by_hand(&home);
    run_with(&home, &github, &["sync"]);
    let generation = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    assert_ne!(generation, generation_before, "a new generation was built");
    let now = std::fs::read_to_string(&staged).unwrap();
    assert!(
        !now.contains("FORGED"),
        "the replaced blob was linked: {now}"
    );
    // The blob was re-created from the verified package.
    assert!(!std::fs::read_to_string(&blob).unwrap().contains("FORGED"));
    run_with(&home, &github, &["sync", "--verify-only"]);
}

#[test]
fn a_rendered_file_edited_in_place_is_not_reused_by_a_new_generation() {
    let home = project_with_path_package();
    ok(&home, &["sync"]);
    let rendered = home
        .staging_root
        .join("modes/default/opencode/agentpack-no-attribution.md");
    let real = std::fs::canonicalize(&rendered).unwrap();
    let original = std::fs::read_to_string(&real).unwrap();
    // The staged file is a hard link of its blob: the edit changes the blob too.
    let blob = blob_of(&home, &real);
    edit_in_place(&real, "INJECTED\n");

    add_other_by_hand(&home);
    ok(&home, &["sync"]);
    let now = std::fs::read_to_string(&rendered).unwrap();
    assert_eq!(now, original, "the edited blob was linked again");
    // The blob was restored from the rendered bytes. (Not necessarily as the inode this file
    // has: agent trees holding the same bytes are placed in parallel, and each restores the blob
    // from its own verified copy.)
    assert_eq!(std::fs::read_to_string(blob).unwrap(), original);
}

#[test]
fn a_plain_sync_restores_a_same_size_edit_through_a_hard_link_and_names_the_files() {
    let home = project_with_path_package();
    ok(&home, &["sync"]);
    let store_file = staged_skill(&home);
    let original = std::fs::read_to_string(&store_file).unwrap();
    std::fs::set_permissions(&store_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Same size: only the bytes differ.
    std::fs::write(&store_file, original.replace("Say hello.", "Say HELLO.")).unwrap();
    // A full sync (the fast path does not walk files; --verify-only would send the next sync here).
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let output = home
        .command(&bin, None)
        .env("AGENTPACK_FULL_VERIFY", "1")
        .arg("sync")
        .output()
        .unwrap();
    let text = said(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("replaced from the verified cache"), "{text}");
    // Real directories name their staged copy; Claude Code, OpenCode and Codex stage an unchanged
    // skill directory as a link into the package (docs/src/staging.md), restored with the package.
    for agent_dir in ["cursor/agentpack-bundle", "agy/agentpack-bundle"] {
        assert!(
            text.contains(&format!("{agent_dir}/skills/hello-skill/SKILL.md")),
            "{agent_dir}: {text}"
        );
    }
    for linked in ["plugins/agentpack-bundle", "opencode", "codex-home"] {
        let staged = home.staging_root.join(format!(
            "modes/default/{linked}/skills/hello-skill/SKILL.md"
        ));
        assert_eq!(
            std::fs::read_to_string(&staged).unwrap(),
            original,
            "{linked}: the edit through the link is undone"
        );
    }
    assert_eq!(
        std::fs::read_to_string(staged_skill(&home)).unwrap(),
        original
    );
    ok(&home, &["sync", "--verify-only"]);
    ok(&home, &["store", "verify"]);
}

/// A project with the GitHub package `acme/skills@^1` (the demo skill at the repository root), synced.
fn project_with_github_package(github: &FakeGitHub) -> IsolatedHome {
    let home = IsolatedHome::new();
    let repo = github.repo("acme", "skills");
    repo.write(
        "SKILL.md",
        "---\nname: demo\ndescription: the demo skill\n---\n\nDo demo things.\n",
    );
    repo.commit("demo");
    repo.tag("v1.0.0");
    run_with(&home, github, &["init"]);
    run_with(&home, github, &["add", "acme/skills@^1"]);
    run_with(&home, github, &["sync"]);
    home
}

/// The staged SKILL.md of the GitHub package.
fn staged_demo(home: &IsolatedHome) -> PathBuf {
    home.staging_root
        .join("modes/default/plugins/agentpack-bundle/skills/demo/SKILL.md")
}

/// The kept repository snapshots of acme/skills in the store.
fn kept_snapshots(home: &IsolatedHome) -> Vec<PathBuf> {
    let v1 = home.agentpack_home.join("cache/store/v1");
    std::fs::read_dir(&v1)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with("-snapshot-acme-skills")
        })
        .collect()
}

/// The store copy of the GitHub package (the path its cache slot names).
fn github_store_copy(home: &IsolatedHome) -> PathBuf {
    std::fs::canonicalize(
        home.agentpack_home
            .join("cache")
            .join(lock_field(home, "cache_key")),
    )
    .unwrap()
}

/// `sync --verify-only` names the damaged package (and drops the no-op fast path).
fn fails_with_damage(home: &IsolatedHome) {
    let output = run(home, &["sync", "--verify-only"]);
    let text = said(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("damaged   github.com/acme/skills"), "{text}");
}

const RESTORED: &str = "restored github.com/acme/skills: SKILL.md (edited through a hard link?)";

#[test]
fn a_plain_sync_restores_a_damaged_github_package_from_the_kept_snapshot_offline() {
    let github = FakeGitHub::start();
    let home = project_with_github_package(&github);
    assert_eq!(kept_snapshots(&home).len(), 1, "the snapshot is kept");
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    // The store copy's SKILL.md replaced by other bytes (an editor saving by rename: the blob and
    // the kept snapshot keep the original bytes).
    let copy = github_store_copy(&home);
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let forged = copy.join("forged.tmp");
    std::fs::write(
        &forged,
        "---\nname: demo\ndescription: FORGED\n---\n\nFORGED\n",
    )
    .unwrap();
    std::fs::rename(&forged, copy.join("SKILL.md")).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o555)).unwrap();

    // GitHub unreachable: the kept snapshot (its archive checked against its digest) is the verified source. (The no-op
    // fast path does not hash packages; `--verify-only` finds the damage and drops it.)
    fails_with_damage(&home);
    let output = run(&home, &["sync"]);
    let text = said(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains(RESTORED), "{text}");
    assert!(!text.contains("content hash mismatch"), "{text}");
    assert_eq!(
        std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
        lock
    );
    assert!(
        !std::fs::read_to_string(github_store_copy(&home).join("SKILL.md"))
            .unwrap()
            .contains("FORGED")
    );
    assert!(!std::fs::read_to_string(staged_demo(&home))
        .unwrap()
        .contains("FORGED"));
    ok(&home, &["sync", "--verify-only"]);
}

#[test]
fn a_plain_sync_restores_a_github_package_edited_through_a_hard_link_by_downloading_it() {
    let github = FakeGitHub::start();
    let home = project_with_github_package(&github);
    run_with(&home, &github, &["gc"]);
    assert!(kept_snapshots(&home).is_empty(), "gc removed the snapshot");
    let store_file = std::fs::canonicalize(staged_demo(&home)).unwrap();
    edit_in_place(&store_file, "INJECTED\n");
    github.reset_counters();

    fails_with_damage(&home);
    let text = run_with(&home, &github, &["sync"]);
    assert!(text.contains(RESTORED), "{text}");
    assert!(
        github.count(agentpack_test_support::Endpoint::Tarball, "acme", "skills") > 0
            || github.count(agentpack_test_support::Endpoint::GitHttp, "acme", "skills") > 0,
        "restored by a download"
    );
    let staged = std::fs::read_to_string(staged_demo(&home)).unwrap();
    assert!(
        !staged.contains("INJECTED"),
        "the injected bytes are staged"
    );
    assert!(
        !std::fs::read_to_string(github_store_copy(&home).join("SKILL.md"))
            .unwrap()
            .contains("INJECTED")
    );
    run_with(&home, &github, &["sync", "--verify-only"]);
}

#[test]
fn a_damaged_github_package_with_no_verified_source_stops_the_sync_with_the_remedy() {
    let github = FakeGitHub::start();
    let home = project_with_github_package(&github);
    run_with(&home, &github, &["gc"]);
    assert!(kept_snapshots(&home).is_empty(), "gc removed the snapshot");
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    let pointer = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    let store_file = std::fs::canonicalize(staged_demo(&home)).unwrap();
    edit_in_place(&store_file, "INJECTED\n");

    // Offline (GitHub unreachable) and no kept snapshot.
    fails_with_damage(&home);
    let output = run(&home, &["sync"]);
    let text = said(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("content hash mismatch: github.com/acme/skills"),
        "{text}"
    );
    assert!(text.contains("agentpack sync --repair"), "{text}");
    assert!(
        text.contains("restore   no verified source: no usable kept snapshot, and cannot download github.com/acme/skills"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
        lock,
        "the lock is untouched"
    );
    assert_eq!(
        std::fs::read_link(home.staging_root.join("modes/default")).unwrap(),
        pointer,
        "staging is untouched"
    );
    assert!(
        std::fs::read_to_string(github_store_copy(&home).join("SKILL.md"))
            .unwrap()
            .contains("INJECTED")
    );
    // Back online, the remedy works.
    run_with(&home, &github, &["sync", "--repair"]);
    run_with(&home, &github, &["sync", "--verify-only"]);
}

/// An edit in place through a staged hard link writes the blob the package store path (and the
/// generation) link; the kept repository snapshot shares no inode with them (its tree is one
/// archive), so it stays intact and restores the package offline, edit after edit, and the store
/// verifies clean afterwards.
#[test]
fn an_edit_in_place_never_damages_the_kept_snapshot_it_is_restored_from() {
    let github = FakeGitHub::start();
    let home = project_with_github_package(&github);
    assert_eq!(kept_snapshots(&home).len(), 1, "the snapshot is kept");
    drop(github); // offline from here on

    for injected in ["INJECTED\n", "AGAIN\n"] {
        let store_file = std::fs::canonicalize(staged_demo(&home)).unwrap();
        edit_in_place(&store_file, injected);
        fails_with_damage(&home);
        let output = run(&home, &["sync"]);
        let text = said(&output);
        assert!(output.status.success(), "{text}");
        assert!(text.contains(RESTORED), "{text}");
        assert!(
            !text.contains("was changed"),
            "the kept snapshot was damaged: {text}"
        );
        assert!(!std::fs::read_to_string(staged_demo(&home))
            .unwrap()
            .contains(injected));
        ok(&home, &["sync", "--verify-only"]);
    }
    let verify = run(&home, &["store", "verify"]);
    assert!(verify.status.success(), "{}", said(&verify));
    assert_eq!(kept_snapshots(&home).len(), 1);
    assert!(!std::fs::read_to_string(staged_demo(&home))
        .unwrap()
        .contains("AGAIN"));
}

/// Defect 4 as filed: after an edit through a staged hard link into a path dependency's store
/// copy, each of `store verify --repair`, `sync --repair` and a sync that builds a new generation
/// leaves the source's hash in the lock and none of the injected bytes staged, and the checks pass
/// only once that is so.
#[test]
fn every_repair_and_a_new_generation_undo_an_edit_of_a_path_dependencys_store_copy() {
    for (case, commands) in [
        (
            "store verify --repair",
            &[&["store", "verify", "--repair"][..], &["sync"]][..],
        ),
        ("sync --repair", &[&["sync", "--repair"][..]][..]),
        ("new generation", &[&["sync"][..]][..]),
    ] {
        let home = project_with_path_package();
        ok(&home, &["sync"]);
        let before = content_hashes(&home);
        let generation_before =
            std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
        edit_in_place(&staged_skill(&home), "INJECTED\n");
        if case == "new generation" {
            add_other_by_hand(&home);
        }
        for args in commands {
            ok(&home, args);
        }
        let hashes = content_hashes(&home);
        assert!(
            before.iter().all(|hash| hashes.contains(hash)),
            "{case}: the lock moved from the source's hash: {before:?} -> {hashes:?}"
        );
        if case == "new generation" {
            let generation = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
            assert_ne!(generation, generation_before, "{case}: no new generation");
        }
        let staged = staged_files_holding(&home, "INJECTED");
        assert!(
            staged.is_empty(),
            "{case}: the injected bytes are staged in {staged}"
        );
        ok(&home, &["sync", "--verify-only"]);
        if case == "new generation" {
            // The previous generation (kept in the history, no longer staged) still holds the
            // edited inode: `store verify` names that generation, and only it, until repaired.
            let output = run(&home, &["store", "verify"]);
            let text = said(&output);
            let current = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
            let old_name = generation_before
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let current_name = current.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !output.status.success() && text.contains(&old_name),
                "{case}: {text}"
            );
            assert!(
                !text.contains(&current_name),
                "{case}: the staged generation is damaged: {text}"
            );
            assert!(
                !text.contains("-hello-skill: "),
                "{case}: the package copy is damaged: {text}"
            );
            ok(&home, &["store", "verify", "--repair"]);
        }
        ok(&home, &["store", "verify"]);
        ok(&home, &["sync", "--verify-only"]);
    }
}

/// `rollback` never selects an older generation whose files were edited in place (through a hard
/// link, before a newer generation was built): it refuses, names the files and the remedy, and
/// leaves the pointer alone; after `store verify --repair` it goes back to the repaired bytes.
#[test]
fn rollback_refuses_a_generation_edited_in_place_until_it_is_repaired() {
    let home = project_with_path_package();
    ok(&home, &["sync"]);
    let older = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    edit_in_place(&staged_skill(&home), "INJECTED\n");
    add_other_by_hand(&home);
    ok(&home, &["sync"]);
    let newer = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    assert_ne!(newer, older);

    let output = run(&home, &["rollback"]);
    let text = said(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("was changed in place")
            && text.contains("skills/hello-skill/SKILL.md")
            && text.contains("agentpack store verify --repair"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_link(home.staging_root.join("modes/default")).unwrap(),
        newer,
        "the pointer moved"
    );

    ok(&home, &["store", "verify", "--repair"]);
    ok(&home, &["rollback"]);
    let staged = staged_files_holding(&home, "INJECTED");
    assert!(staged.is_empty(), "the injected bytes are staged: {staged}");
}

/// The staged files of mode `default` (links followed, as the agents read them) holding `needle`,
/// one a line; empty when none does.
fn staged_files_holding(home: &IsolatedHome, needle: &str) -> String {
    let found = std::process::Command::new("grep")
        .args(["-RlI", needle])
        .arg(home.staging_root.join("modes/default/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&found.stdout).into_owned()
}

/// `agentpack -vv sync` (with `envs`) after a new overlay file, which makes it a full sync; whether
/// it re-hashed the GitHub package's store path, and what it said.
fn full_sync_rehashed(home: &IsolatedHome, round: &str, envs: &[(&str, &str)]) -> (bool, String) {
    let overlay = home.project.join(".agents/rules");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(overlay.join("round.md"), format!("# round {round}\n")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let mut command = home.command(&bin, None);
    command.args(["-vv", "sync"]);
    for (name, value) in envs {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let text = said(&output);
    assert!(output.status.success(), "sync {round}: {text}");
    assert!(
        !text.contains("sync fast path: inputs unchanged"),
        "sync {round} was a full one: {text}"
    );
    (
        text.contains("re-hashing a cache slot against the lock"),
        text,
    )
}

#[test]
fn a_full_sync_hashes_a_verified_package_again_only_when_its_tree_changed() {
    let github = FakeGitHub::start();
    let home = project_with_github_package(&github);
    // A full check may hash the store path once (the add's scratch links, removed after the
    // generation's links recorded their stamps, moved the blobs' ctime); the next one does not.
    full_sync_rehashed(&home, "1", &[]);
    let (rehashed, text) = full_sync_rehashed(&home, "2", &[]);
    assert!(!rehashed, "an unchanged tree is not hashed again: {text}");
    let (rehashed, text) = full_sync_rehashed(&home, "3", &[("AGENTPACK_FULL_VERIFY", "1")]);
    assert!(rehashed, "AGENTPACK_FULL_VERIFY hashes it: {text}");

    // An edit in place, same size (a write moves the file's ctime): hashed, found, restored.
    let store_file = std::fs::canonicalize(staged_demo(&home)).unwrap();
    let original = std::fs::read_to_string(&store_file).unwrap();
    make_writable(&store_file);
    std::fs::write(&store_file, original.replace("demo things", "DEMO THINGS")).unwrap();
    let (rehashed, text) = full_sync_rehashed(&home, "4", &[]);
    assert!(rehashed, "a changed tree is hashed again: {text}");
    assert!(text.contains(RESTORED), "{text}");
    assert_eq!(
        std::fs::read_to_string(staged_demo(&home)).unwrap(),
        original
    );
    // The restore's scratch links are removed after it (their blobs' ctime moves): one more
    // check may hash; after it the restored tree is taken by its stamps again.
    full_sync_rehashed(&home, "5", &[]);
    let (rehashed, text) = full_sync_rehashed(&home, "6", &[]);
    assert!(!rehashed, "the restored tree is remembered again: {text}");
    // Looking for damage never trusts a stamp.
    let text = ok(&home, &["-vv", "sync", "--verify-only"]);
    assert!(
        text.contains("re-hashing a cache slot against the lock"),
        "sync --verify-only hashes: {text}"
    );
}
