//! The pipeline as a library (`agentpack_builders::project`): one session over a project with two
//! path packages resolves, plans (writing nothing), builds and selects; the plan names every
//! staged file with its package, the collision of the two packages and its winner, and serialises;
//! a second build of the same plan reuses the generation; a session sees the lock it wrote without
//! reading the file again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentpack_builders::github::GitHubConfig;
use agentpack_builders::project::{
    EntryCheck, PlanOptions, ProjectRoots, ProjectSession, ResolvePolicy, ResolvedMode,
};
use agentpack_builders::resolve::UpdatePolicy;
use agentpack_builders::session::GitHubSession;
use agentpack_harness::Agent;
use agentpack_store::{Store, StoreOptions};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct World {
    _dir: tempfile::TempDir,
    roots: ProjectRoots,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let project = root.join("project");
        for name in ["one", "two"] {
            write(
                &project.join(format!("pkgs/{name}/skills/{name}/SKILL.md")),
                &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSay {name}.\n"),
            );
            // The same command in both packages, different bytes: a collision.
            write(
                &project.join(format!("pkgs/{name}/commands/review.md")),
                &format!("---\ndescription: review from {name}\n---\nReview ({name}).\n"),
            );
        }
        write(
            &project.join("agentpack.toml"),
            "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\none = { path = \"pkgs/one\" }\ntwo = { path = \"pkgs/two\" }\n",
        );
        let roots = ProjectRoots {
            definition: project.clone(),
            workspace: project,
            project_hash: "0123456789abcdef".to_owned(),
            agentpack_home: root.join("home"),
            staging_root: root.join("staging"),
        };
        World { _dir: dir, roots }
    }

    fn session(&self) -> ProjectSession {
        let store = Store::open(
            &self.roots.agentpack_home.join("cache"),
            StoreOptions::default(),
        )
        .unwrap();
        ProjectSession::open(
            self.roots.clone(),
            Arc::new(store),
            Box::new(|store| {
                // Never the network: an address nothing listens on.
                let config = GitHubConfig::from_values(
                    Some("http://127.0.0.1:9".into()),
                    Some("http://127.0.0.1:9".into()),
                    None,
                    None,
                );
                GitHubSession::new(store, config).map_err(Into::into)
            }),
        )
        .unwrap()
    }
}

fn options() -> PlanOptions {
    PlanOptions {
        yolo: false,
        keep_attribution: false,
        dot_agents: true,
        agentpack_exe: PathBuf::from("/usr/bin/agentpack"),
    }
}

/// Every path under `root` with its size and modification time: what "writes nothing" compares.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .map(|entry| {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            (
                entry.path().to_path_buf(),
                (meta.len(), meta.modified().unwrap()),
            )
        })
        .collect()
}

#[test]
fn resolve_plan_build_select_over_one_session() {
    let world = World::new();
    let mut session = world.session();
    let relock = ResolvePolicy::Relock {
        update: UpdatePolicy::KeepPins,
        replace_unreadable: false,
    };
    let resolved = session.resolve(&relock, None).unwrap();
    assert_eq!(resolved.lock.packages.len(), 2);
    assert_eq!(resolved.slots.len(), 2);
    assert!(session.save_lock(&resolved.lock, true).unwrap());
    // The session holds what it wrote: the lock it returns is the written one, and writing the
    // same lock again writes nothing.
    assert!(session.lock().unwrap().records_same_as(&resolved.lock));
    assert!(!session.save_lock(&resolved.lock, true).unwrap());

    let mode = ResolvedMode::of(session.manifest(), "default").unwrap();
    let before = snapshot(&world.roots.agentpack_home);
    let plan = session
        .plan(&resolved, &mode, &Agent::ALL, &options())
        .unwrap();
    assert_eq!(
        snapshot(&world.roots.agentpack_home),
        before,
        "planning wrote nothing"
    );
    assert!(
        !world.roots.staging_root.exists(),
        "planning staged nothing"
    );

    // Every agent's files, each package file named by its package.
    assert_eq!(plan.agents.len(), Agent::ALL.len());
    let claude = &plan.files["claude"];
    let skill = claude
        .iter()
        .find(|file| file.path.ends_with("skills/one/SKILL.md"))
        .unwrap_or_else(|| panic!("{claude:#?}"));
    assert_eq!(skill.package.as_deref(), Some("one"));
    // The collision, the package that kept the name and where the other one went.
    let collision = plan
        .collisions
        .iter()
        .find(|c| c.agent == "claude" && c.path.contains("review"))
        .unwrap_or_else(|| panic!("{:#?}", plan.collisions));
    let mut sides = [collision.kept_by.as_str(), collision.renamed_from.as_str()];
    sides.sort_unstable();
    assert_eq!(sides, ["one", "two"], "{collision:?}");
    assert_ne!(collision.renamed_to, collision.path, "{collision:?}");
    assert!(
        claude
            .iter()
            .any(|file| file.path.ends_with(&collision.renamed_to)),
        "the renamed side is staged: {collision:?}"
    );
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["mode"], "default");
    assert!(json["files"]["codex"]
        .as_array()
        .is_some_and(|f| !f.is_empty()));

    let built = session.build(&plan).unwrap();
    assert!(!built.reused);
    assert_eq!(built.path.name().as_str(), plan.generation);
    let selected = session.select(&mode.dir, &built).unwrap();
    assert_eq!(
        std::fs::canonicalize(&selected.pointer).unwrap(),
        selected.generation
    );
    // The same plan again: the generation is found, nothing is published.
    let again = session.build(&plan).unwrap();
    assert!(again.reused);
    assert_eq!(again.path, built.path);
    assert!(session.take_warnings().is_empty());
}

#[test]
fn a_session_says_each_warning_once_even_after_it_was_taken() {
    let world = World::new();
    let session = world.session();
    session.warn("the MCP server `api` reads API_KEY");
    session.warn_all([
        "the MCP server `api` reads API_KEY".to_owned(),
        "second".to_owned(),
    ]);
    assert_eq!(
        session.take_warnings(),
        ["the MCP server `api` reads API_KEY", "second"]
    );
    // A later step that finds the same thing (the plan after the lock's records) says nothing new.
    session.warn("second");
    session.warn("the MCP server `api` reads API_KEY");
    session.warn("third");
    assert_eq!(session.take_warnings(), ["third"]);
    // Another session over the same project says it again: nothing is de-duplicated across them.
    let other = world.session();
    other.warn("second");
    assert_eq!(other.take_warnings(), ["second"]);
}

#[test]
fn a_mode_the_manifest_does_not_declare_is_refused_with_the_fix() {
    let world = World::new();
    let session = world.session();
    let error = ResolvedMode::of(session.manifest(), "writing").unwrap_err();
    let text = error.to_string();
    assert!(text.contains("mode `writing` is not declared"), "{text}");
    assert!(text.contains("agentpack mode create writing"), "{text}");
}

#[test]
fn a_read_only_session_inspects_plans_the_same_plan_and_writes_nothing() {
    let world = World::new();
    // A read-only session over `world`'s store (a store nobody made yet opens as empty).
    let read_only = |world: &World| {
        let store = Store::open_read_only(
            &world.roots.agentpack_home.join("cache"),
            StoreOptions::default(),
        )
        .unwrap();
        ProjectSession::open_read_only(world.roots.clone(), Arc::new(store)).unwrap()
    };
    let mut session = world.session();
    let relock = ResolvePolicy::Relock {
        update: UpdatePolicy::KeepPins,
        replace_unreadable: false,
    };
    let resolved = session.resolve(&relock, None).unwrap();
    session.save_lock(&resolved.lock, true).unwrap();
    let mode = ResolvedMode::of(session.manifest(), "default").unwrap();
    let synced = session
        .plan(&resolved, &mode, &[Agent::Claude], &options())
        .unwrap();
    drop(session);

    let before = snapshot(world._dir.path());
    let inspecting = read_only(&world);
    assert!(inspecting.is_read_only());
    let inspected = inspecting.resolve(&ResolvePolicy::Inspect, None).unwrap();
    assert_eq!(inspected.lock.packages.len(), 2);
    assert!(inspected
        .entries
        .values()
        .all(|entry| matches!(entry, EntryCheck::Usable { verified: true, .. })));
    let plan = inspecting
        .plan(&inspected, &mode, &[Agent::Claude], &options())
        .unwrap();
    assert_eq!(plan.generation, synced.generation, "the same pure plan");
    // Everything that would write is refused.
    let sync = ResolvePolicy::Sync {
        update: UpdatePolicy::KeepPins,
        repair: false,
    };
    for error in [
        inspecting.resolve(&sync, None).unwrap_err(),
        inspecting.build(&plan).unwrap_err(),
        inspecting.github().map(|_| ()).unwrap_err(),
    ] {
        assert!(
            matches!(
                error,
                agentpack_builders::project::PipelineError::ReadOnly { .. }
            ),
            "{error}"
        );
    }
    drop(inspecting);
    assert_eq!(
        snapshot(world._dir.path()),
        before,
        "a read-only session wrote"
    );

    // A missing cache entry is data: left out of the plan, never fetched.
    let slot = world
        .roots
        .agentpack_home
        .join("cache")
        .join(resolved.lock.packages[0].cache_key.as_str());
    std::fs::remove_file(&slot).unwrap();
    let inspecting = read_only(&world);
    let inspected = inspecting.resolve(&ResolvePolicy::Inspect, None).unwrap();
    let module = resolved.lock.packages[0].module.as_str();
    assert!(
        matches!(&inspected.entries[module], EntryCheck::Missing { reason } if reason.contains("no cache entry")),
        "{:?}",
        inspected.entries
    );
    assert_eq!(inspected.lock.packages.len(), 1);
    assert_eq!(inspected.old_lock.packages.len(), 2);
    inspecting
        .plan(&inspected, &mode, &[Agent::Claude], &options())
        .unwrap();
    assert!(!slot.exists());

    // No store at all reads as empty.
    let fresh = World::new();
    std::fs::copy(world.roots.lock_path(), fresh.roots.lock_path()).unwrap();
    let inspecting = read_only(&fresh);
    let inspected = inspecting.resolve(&ResolvePolicy::Inspect, None).unwrap();
    // Both locked packages are looked at (an empty map would pass the `all` below).
    assert_eq!(inspected.entries.len(), 2, "{:?}", inspected.entries);
    assert!(inspected
        .entries
        .values()
        .all(|entry| matches!(entry, EntryCheck::Missing { .. })));
    assert!(!fresh.roots.agentpack_home.exists());
}
