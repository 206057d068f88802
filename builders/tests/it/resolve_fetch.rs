//! Resolution into a lock and fetching a lock into the store, against the fake GitHub and a real store.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use crate::fetch_env::{env, github_config, Env};
use agentpack_builders::fetch::{fetch_lock, FetchOptions};
use agentpack_builders::github::metadata_cache::InMemoryMetadataCache;
use agentpack_builders::github::resolver::Resolver;
use agentpack_builders::package_store::{PackageStore, StoreMetadataCache};
use agentpack_builders::resolve::{resolve, PinChange, ResolutionError, UpdatePolicy};
use agentpack_builders::snapshot::SnapshotFetcher;
use agentpack_lockfile::keys::github_cache_key;
use agentpack_lockfile::lock::Lockfile;
use agentpack_lockfile::manifest::Manifest;
use agentpack_test_support::{Endpoint, FakeGitHub};

fn fetcher(gh: &FakeGitHub, env: &Env) -> SnapshotFetcher {
    fetcher_with(gh, env, false)
}

/// `persistent`: GitHub metadata cached in the store's index (as the cli does), else per run.
fn fetcher_with(gh: &FakeGitHub, env: &Env, persistent: bool) -> SnapshotFetcher {
    let config = github_config(gh);
    let cache: Arc<dyn agentpack_builders::github::metadata_cache::MetadataCache> = if persistent {
        Arc::new(StoreMetadataCache::new(Arc::clone(&env.store)))
    } else {
        Arc::new(InMemoryMetadataCache::new())
    };
    let resolver = Arc::new(Resolver::new(config, cache).unwrap());
    SnapshotFetcher::new(resolver, &env.home.join("scratch")).unwrap()
}

fn manifest(text: &str) -> Manifest {
    Manifest::parse(text, Path::new("agentpack.toml")).unwrap()
}

fn run(
    gh: &FakeGitHub,
    env: &Env,
    text: &str,
    old: Option<&Lockfile>,
    policy: UpdatePolicy,
) -> Result<agentpack_builders::resolve::ResolveOutcome, ResolutionError> {
    run_with(gh, env, text, old, policy, false)
}

fn run_with(
    gh: &FakeGitHub,
    env: &Env,
    text: &str,
    old: Option<&Lockfile>,
    policy: UpdatePolicy,
    persistent: bool,
) -> Result<agentpack_builders::resolve::ResolveOutcome, ResolutionError> {
    let fetcher = fetcher_with(gh, env, persistent);
    resolve(&manifest(text), old, &policy, &env.resolve_env(&fetcher))
}

const HEAD: &str = "name = \"demo\"\nversion = \"0.1.0\"\n";

#[test]
fn resolves_direct_and_transitive_packages_into_a_lock() {
    let gh = FakeGitHub::start();
    let base = gh.repo("acme", "base");
    base.write("rules/SKILL.md", "---\nname: base-rules\n---\nv1\n");
    base.commit("v1");
    base.tag("v1.0.0");
    base.write("rules/SKILL.md", "---\nname: base-rules\n---\nv1.1\n");
    let base_11 = base.commit("v1.1");
    base.tag("v1.1.0");
    base.write("rules/SKILL.md", "---\nname: base-rules\n---\nv2\n");
    base.commit("v2");
    base.tag("v2.0.0");

    let mono = gh.repo("acme", "mono");
    mono.write(
        "plugins/hookify/.claude-plugin/plugin.json",
        r#"{"name":"hookify","version":"0.1.0"}"#,
    );
    mono.write(
        "plugins/hookify/agentpack.toml",
        "[dependencies]\n\"github.com/acme/base/rules\" = \"^1.0\"\n",
    );
    for i in 0..5 {
        mono.write(
            &format!("skills/s{i}/SKILL.md"),
            format!("---\nname: s{i}\n---\n"),
        );
    }
    let mono_head = mono.commit("init");

    let env = env();
    std::fs::create_dir_all(env.project.join("local-rules")).unwrap();
    std::fs::write(
        env.project.join("local-rules/SKILL.md"),
        "---\nname: local\n---\n",
    )
    .unwrap();
    let mut text = format!("{HEAD}[dependencies]\n\"github.com/acme/mono/plugins/hookify\" = {{ branch = \"main\" }}\n");
    for i in 0..5 {
        text.push_str(&format!(
            "\"github.com/acme/mono/skills/s{i}\" = \"main\"\n"
        ));
    }
    text.push_str("\"local-rules\" = { path = \"local-rules\" }\n");
    let outcome = run(&gh, &env, &text, None, UpdatePolicy::KeepPins).unwrap();
    let lock = &outcome.lock;
    let modules: Vec<&str> = lock.packages.iter().map(|p| p.module.as_str()).collect();
    assert_eq!(modules.len(), 8, "{modules:?}");

    let hookify = lock
        .package("github.com/acme/mono/plugins/hookify")
        .unwrap();
    assert!(hookify.direct);
    assert_eq!(hookify.kind, "plugin");
    assert_eq!(hookify.commit.as_str(), mono_head);
    assert_eq!(
        hookify.cache_key,
        github_cache_key("acme", "mono", "plugins/hookify", &hookify.commit)
    );
    assert_eq!(
        hookify.url,
        format!("https://github.com/acme/mono/tree/{mono_head}/plugins/hookify")
    );
    assert_eq!(hookify.name.as_deref(), Some("hookify"));
    // Normalization happened before hashing: the stubs are in the published slot.
    let slot = &outcome.slots["github.com/acme/mono/plugins/hookify"];
    assert!(slot.join(".cursor-plugin/plugin.json").is_file());

    let rules = lock.package("github.com/acme/base/rules").unwrap();
    assert!(!rules.direct, "transitive");
    assert_eq!(
        rules.commit.as_str(),
        base_11,
        "highest tag satisfying ^1.0"
    );
    assert_eq!(rules.kind, "skill");
    assert!(rules.content_hash.is_some());

    let local = lock.package("local-rules").unwrap();
    assert_eq!(local.url, "path:local-rules");
    assert!(local.content_hash.is_some());

    // One tarball for the six packages of acme/mono at one commit.
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "mono"), 1);
    assert!(outcome
        .changes
        .iter()
        .all(|c| matches!(c, PinChange::Added { .. })));
    assert_eq!(lock.lockfile_version(), 3);

    // Fetch into a fresh store (another machine): downloads once per repo and verifies.
    let env2 = self::env();
    std::fs::create_dir_all(env2.project.join("local-rules")).unwrap();
    std::fs::write(
        env2.project.join("local-rules/SKILL.md"),
        "---\nname: local\n---\n",
    )
    .unwrap();
    gh.reset_counters();
    let fetcher2 = fetcher(&gh, &env2);
    let fetched = env2
        .fetch(&fetcher2, lock, FetchOptions::default())
        .unwrap();
    assert_eq!(fetched.slots.len(), 8);
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "mono"), 1);
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "base"), 1);
    // The path package has the same files (same dirhash40) but lives in another directory here.
    assert_eq!(fetched.updated_entries.len(), 1);
    assert_eq!(fetched.updated_entries[0].commit, local.commit);
    assert_ne!(fetched.updated_entries[0].cache_key, local.cache_key);
    // A warm store downloads nothing.
    gh.reset_counters();
    let again = env2
        .fetch(&fetcher2, lock, FetchOptions::default())
        .unwrap();
    assert!(again.downloaded.is_empty());
    assert_eq!(gh.total(Endpoint::Tarball), 0);
}

#[test]
fn pins_are_kept_until_an_update_and_conflicts_name_both_packages() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("demo/SKILL.md", "one");
    let first = repo.commit("one");
    repo.tag("v1.0.0");
    let env = env();
    let text = format!(
        "{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = {{ branch = \"main\" }}\n"
    );
    let locked = run(&gh, &env, &text, None, UpdatePolicy::KeepPins)
        .unwrap()
        .lock;
    repo.write("demo/SKILL.md", "two");
    let second = repo.commit("two");
    repo.tag("v2.0.0");

    let kept = run(&gh, &env, &text, Some(&locked), UpdatePolicy::KeepPins).unwrap();
    assert_eq!(kept.lock.packages[0].commit.as_str(), first);
    assert!(kept.changes.is_empty());
    assert_eq!(kept.lock, locked, "nothing moved: the same lock");

    let updated = run(&gh, &env, &text, Some(&locked), UpdatePolicy::UpdateAll).unwrap();
    assert_eq!(updated.lock.packages[0].commit.as_str(), second);
    let line = updated.changes[0].to_string();
    assert_eq!(
        line,
        format!("github.com/acme/skills/demo: moved from commit {first} to {second}")
    );

    // A manifest edit moves the pin without --update.
    let tagged = format!("{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = \"^2\"\n");
    let edited = run(&gh, &env, &tagged, Some(&locked), UpdatePolicy::KeepPins).unwrap();
    assert_eq!(edited.lock.packages[0].commit.as_str(), second);

    // Two constraints with no common tag.
    let dep = gh.repo("acme", "dep");
    dep.write(
        "agentpack.toml",
        "[dependencies]\n\"github.com/acme/skills/demo\" = \"^1\"\n",
    );
    dep.write("SKILL.md", "dep");
    dep.commit("dep");
    let conflicting =
        format!("{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = \"^2\"\n\"github.com/acme/dep\" = \"main\"\n");
    let error = run(&gh, &env, &conflicting, None, UpdatePolicy::KeepPins).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, ResolutionError::Conflict { .. }), "{text}");
    assert!(
        text.contains("agentpack.toml wants version ^2")
            && text.contains("github.com/acme/dep wants version ^1"),
        "{text}"
    );
}

#[test]
fn tampered_downloads_and_edited_cache_entries_are_refused() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("SKILL.md", "original");
    let commit = repo.commit("one");
    let env = env();
    let text = format!("{HEAD}[dependencies]\n\"github.com/acme/skills\" = \"{commit}\"\n");
    let lock = run(&gh, &env, &text, None, UpdatePolicy::KeepPins)
        .unwrap()
        .lock;

    // Another machine gets a tampered archive for the pinned commit.
    gh.tamper_tarball("acme", "skills", &commit);
    let other = crate::fetch_env::env();
    let fetcher = fetcher(&gh, &other);
    let error = other
        .fetch(&fetcher, &lock, FetchOptions::default())
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, ResolutionError::FetchedMismatch { .. }),
        "{message}"
    );
    assert!(
        message.contains("github.com/acme/skills") && message.contains(&commit),
        "{message}"
    );
    let key = lock.packages[0].cache_key.clone();
    assert!(
        PackageStore::slot(other.store.as_ref(), &key)
            .unwrap()
            .is_none(),
        "nothing published"
    );

    // `lock` re-checks a locked hash against a fresh download too.
    let error = run(&gh, &other, &text, Some(&lock), UpdatePolicy::KeepPins).unwrap_err();
    assert!(
        matches!(error, ResolutionError::FetchedMismatch { .. }),
        "{error}"
    );
}

#[test]
fn lock_without_network_uses_the_warm_store_and_cached_metadata() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("demo/SKILL.md", "x");
    repo.commit("one");
    repo.tag("v1.0.0");
    let env = env();
    let text = format!("{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = \"^1\"\n");
    let lock = run_with(&gh, &env, &text, None, UpdatePolicy::KeepPins, true)
        .unwrap()
        .lock;
    gh.set_rest_down(Some(500));
    gh.set_git_http_enabled(false);
    gh.reset_counters();
    let again = run_with(&gh, &env, &text, Some(&lock), UpdatePolicy::KeepPins, true).unwrap();
    assert_eq!(again.lock, lock);
    assert!(gh.requests().is_empty(), "{:?}", gh.requests());
}

#[test]
fn an_edited_cache_entry_is_restored_from_github_and_stops_the_fetch_offline() {
    use std::os::unix::fs::PermissionsExt;
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("demo/SKILL.md", "original");
    let commit = repo.commit("one");
    let env = env();
    let text = format!("{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = \"{commit}\"\n");
    let outcome = run(&gh, &env, &text, None, UpdatePolicy::KeepPins).unwrap();
    let lock = outcome.lock;
    let slot = outcome.slots["github.com/acme/skills/demo"].clone();
    // Someone edits the cached copy (the store is read-only: they had to chmod first).
    std::fs::set_permissions(&slot, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(slot.join("EXTRA.md"), "edited").unwrap();

    // Offline (no kept snapshot: this fetcher has no store): stops with the remedy.
    gh.set_rest_down(Some(500));
    gh.set_git_http_enabled(false);
    let error = env
        .fetch(&fetcher(&gh, &env), &lock, FetchOptions::default())
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, ResolutionError::Unrestored { .. }),
        "{message}"
    );
    assert!(
        message.starts_with("content hash mismatch: github.com/acme/skills/demo"),
        "{message}"
    );
    assert!(
        message.contains(
            "\n  restore   no verified source: no usable kept snapshot, and cannot download github.com/acme/skills at"
        ),
        "{message}"
    );
    assert!(message.contains("agentpack sync --repair"), "{message}");
    assert!(slot.join("EXTRA.md").exists(), "left as found");

    // Online: a plain fetch downloads, verifies, replaces the copy and names the file.
    gh.set_rest_down(None);
    gh.set_git_http_enabled(true);
    let restored = env
        .fetch(&fetcher(&gh, &env), &lock, FetchOptions::default())
        .unwrap();
    assert!(
        restored.warnings.iter().any(|w| w.starts_with(
            "restored github.com/acme/skills/demo: EXTRA.md (edited through a hard link?)"
        )),
        "{:?}",
        restored.warnings
    );
    let now = restored.slots["github.com/acme/skills/demo"].clone();
    assert!(!now.join("EXTRA.md").exists(), "{}", now.display());

    // `--repair` replaces a damaged copy too, and reports it as repaired.
    std::fs::set_permissions(&now, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(now.join("EXTRA.md"), "edited").unwrap();
    let fetcher = fetcher(&gh, &env);
    let repaired = env
        .fetch(&fetcher, &lock, FetchOptions { repair: true })
        .unwrap();
    assert_eq!(repaired.repaired.len(), 1);
    assert_eq!(
        Some(&repaired.repaired[0].new),
        lock.packages[0].content_hash.as_ref()
    );
    let now = &repaired.slots["github.com/acme/skills/demo"];
    assert!(!now.join("EXTRA.md").exists(), "{}", now.display());
    let verified = env.fetch(&fetcher, &lock, FetchOptions::default()).unwrap();
    assert!(verified.downloaded.is_empty() && verified.repaired.is_empty());
}

#[test]
fn a_session_over_the_store_and_a_missing_path_directory_served_from_its_slot() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("SKILL.md", "root skill");
    repo.commit("one");
    let env = env();
    std::fs::create_dir_all(env.project.join("mine")).unwrap();
    std::fs::write(env.project.join("mine/SKILL.md"), "mine").unwrap();
    let session =
        agentpack_builders::session::GitHubSession::new(&env.store, github_config(&gh)).unwrap();
    let text = format!("{HEAD}[dependencies]\n\"github.com/acme/skills\" = \"main\"\n\"mine\" = {{ path = \"mine\" }}\n");
    let lock = resolve(
        &manifest(&text),
        None,
        &UpdatePolicy::KeepPins,
        &env.resolve_env(&session.fetcher),
    )
    .unwrap()
    .lock;
    assert_eq!(lock.packages.len(), 2);

    std::fs::remove_dir_all(env.project.join("mine")).unwrap();
    let fetched = env
        .fetch(&session.fetcher, &lock, FetchOptions::default())
        .unwrap();
    assert!(fetched.slots["mine"].join("SKILL.md").is_file());
    let other = crate::fetch_env::env();
    let error = fetch_lock(
        &lock,
        &env.project,
        &other.home,
        &session.fetcher,
        other.store.as_ref(),
        FetchOptions::default(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("mine"), "{error}");
}

#[test]
fn locks_without_content_hashes_fetch_unverified() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("SKILL.md", "x");
    let commit = repo.commit("one");
    let env = env();
    let text = format!("{HEAD}[dependencies]\n\"github.com/acme/skills\" = \"{commit}\"\n");
    let mut lock = run(&gh, &env, &text, None, UpdatePolicy::KeepPins)
        .unwrap()
        .lock;
    lock.packages[0].content_hash = None;
    assert_eq!(lock.lockfile_version(), 2);
    let other = crate::fetch_env::env();
    let fetcher = fetcher(&gh, &other);
    let fetched = other
        .fetch(&fetcher, &lock, FetchOptions::default())
        .unwrap();
    assert_eq!(
        fetched.unverified,
        vec!["github.com/acme/skills".to_owned()]
    );
    assert_eq!(
        fetched.downloaded,
        vec!["github.com/acme/skills".to_owned()]
    );
    // `lock` records the first content hash from a fresh download.
    let relocked = run(&gh, &other, &text, Some(&lock), UpdatePolicy::KeepPins)
        .unwrap()
        .lock;
    assert!(relocked.packages[0].content_hash.is_some());
    assert_eq!(relocked.packages[0].commit, lock.packages[0].commit);
}

/// The manifest text pinning `github.com/acme/skills/demo` to `value`.
fn demo_pinned(value: &str) -> String {
    format!("{HEAD}[dependencies]\n\"github.com/acme/skills/demo\" = {value}\n")
}

#[test]
fn a_changed_ref_name_re_resolves_and_an_unknown_one_is_refused() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("demo/SKILL.md", "main");
    let main = repo.commit("main");
    repo.branch("dev");
    repo.write("demo/SKILL.md", "dev");
    let dev = repo.commit("dev");
    repo.switch("main");
    let env = env();

    // Locked from branch main, with the metadata cache the cli keeps.
    let locked = run_with(
        &gh,
        &env,
        &demo_pinned("{ branch = \"main\" }"),
        None,
        UpdatePolicy::KeepPins,
        true,
    )
    .unwrap()
    .lock;
    assert_eq!(locked.packages[0].commit.as_str(), main);

    // The same pin again: kept, without asking GitHub for the branch.
    gh.reset_counters();
    let same = run_with(
        &gh,
        &env,
        &demo_pinned("{ branch = \"main\" }"),
        Some(&locked),
        UpdatePolicy::KeepPins,
        true,
    )
    .unwrap();
    assert_eq!(same.lock, locked);
    assert_eq!(gh.count(Endpoint::Commits, "acme", "skills"), 0);

    // Another branch, in table and in short form: the pin follows the new name.
    for value in ["{ branch = \"dev\" }", "\"dev\""] {
        let moved = run_with(
            &gh,
            &env,
            &demo_pinned(value),
            Some(&locked),
            UpdatePolicy::KeepPins,
            true,
        )
        .unwrap();
        assert_eq!(moved.lock.packages[0].commit.as_str(), dev, "{value}");
        assert_eq!(
            moved.changes,
            vec![PinChange::Moved {
                module: "github.com/acme/skills/demo".into(),
                from: main.clone(),
                to: dev.clone(),
            }],
            "{value}"
        );
    }

    // A name GitHub does not know is an error that names it, not the old commit.
    for value in [
        "\"nosuchref\"",
        "{ branch = \"nosuchref\" }",
        "{ tag = \"v9\" }",
    ] {
        let error = run_with(
            &gh,
            &env,
            &demo_pinned(value),
            Some(&locked),
            UpdatePolicy::KeepPins,
            true,
        )
        .unwrap_err();
        let text = error.to_string();
        let name = if value.contains("v9") {
            "v9"
        } else {
            "nosuchref"
        };
        assert!(
            text.contains(&format!("\"{name}\"")) && text.contains("fix"),
            "{value}: {text}"
        );
    }
}

#[test]
fn a_branch_that_moved_keeps_its_pin_on_a_machine_that_never_resolved_it() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("demo/SKILL.md", "one");
    let first = repo.commit("one");
    repo.tag("v1.0.0");
    let env = env();
    let locked = run(
        &gh,
        &env,
        &demo_pinned("\"main\""),
        None,
        UpdatePolicy::KeepPins,
    )
    .unwrap()
    .lock;
    repo.write("demo/SKILL.md", "two");
    repo.commit("two");

    // A fresh metadata cache (another machine): main now names another commit, but the locked one is
    // the head of no other branch (only a tag), so the pin is the one that made the lock and stays.
    let kept = run(
        &gh,
        &env,
        &demo_pinned("\"main\""),
        Some(&locked),
        UpdatePolicy::KeepPins,
    )
    .unwrap();
    assert_eq!(kept.lock.packages[0].commit.as_str(), first);
    assert!(kept.changes.is_empty());
    // A tag name follows the tag; a short commit of the locked one keeps it.
    let tagged = run(
        &gh,
        &env,
        &demo_pinned("\"v1.0.0\""),
        Some(&locked),
        UpdatePolicy::KeepPins,
    )
    .unwrap();
    assert_eq!(tagged.lock.packages[0].commit.as_str(), first);
    let short = run(
        &gh,
        &env,
        &demo_pinned(&format!("\"{}\"", &first[..10])),
        Some(&locked),
        UpdatePolicy::KeepPins,
    )
    .unwrap();
    assert_eq!(short.lock.packages[0].commit.as_str(), first);
}

#[test]
fn an_unknown_repository_says_what_was_asked_and_warnings_carry_no_label() {
    let gh = FakeGitHub::start();
    let env = env();
    let error = run(
        &gh,
        &env,
        &format!("{HEAD}[dependencies]\n\"github.com/nobody/nothing\" = {{}}\n"),
        None,
        UpdatePolicy::KeepPins,
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("github.com/nobody/nothing") && text.contains("its tags"),
        "{text}"
    );
    assert!(!text.contains("\"tags\""), "{text}");

    // A package declaring a path dependency: the warning is returned without a `warning:` label.
    let repo = gh.repo("acme", "nested");
    repo.write("SKILL.md", "nested");
    repo.write(
        "agentpack.toml",
        "[dependencies]\n\"helper\" = { path = \"../helper\" }\n",
    );
    let commit = repo.commit("nested");
    let outcome = run(
        &gh,
        &env,
        &format!("{HEAD}[dependencies]\n\"github.com/acme/nested\" = \"{commit}\"\n"),
        None,
        UpdatePolicy::KeepPins,
    )
    .unwrap();
    assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
    assert!(
        outcome.warnings[0].starts_with("github.com/acme/nested declares the path dependency"),
        "{:?}",
        outcome.warnings
    );
}
