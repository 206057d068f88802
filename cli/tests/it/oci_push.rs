//! `agentpack store push` and `agentpack publish` against a real OCI registry (Debian's
//! `docker-registry` on 127.0.0.1): a project locked and synced from the fake GitHub pushes its
//! closure once (a second push uploads nothing), `--all` finds the same store paths, a cold store
//! reports what is missing; a local skill directory is published under its tag and its identity
//! tag with the `content_hash` that `add` of the same directory locks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::process::Output;

use agentpack_builders::oci::{identity_tag, OciClient, OciReference, OciRepository, OciTransport};
use agentpack_lockfile::Lockfile;
use agentpack_test_support::registry::registry_available;
use agentpack_test_support::{agentpack_bin, FakeGitHub, IsolatedHome, TestRegistry};

use crate::oci_substitute::github_with_skills;

const MANIFEST: &str = "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"github.com/acme/skills/skills/alpha\" = {}\n\"github.com/acme/skills/skills/beta\" = {}\n";

fn run(home: &IsolatedHome, github: Option<&FakeGitHub>, args: &[&str]) -> Output {
    home.command(&agentpack_bin(), github)
        .args(args)
        .output()
        .unwrap()
}

fn ok(home: &IsolatedHome, github: Option<&FakeGitHub>, args: &[&str]) -> String {
    let output = run(home, github, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "agentpack {args:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn json(home: &IsolatedHome, github: Option<&FakeGitHub>, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&ok(home, github, &all)).unwrap()
}

fn client() -> OciClient {
    OciClient::new(OciTransport::from_env(&|_| None)).unwrap()
}

#[test]
fn store_push_pushes_the_locked_closure_once() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let github = github_with_skills();
    let a = IsolatedHome::new();
    std::fs::write(a.project.join("agentpack.toml"), MANIFEST).unwrap();
    ok(&a, Some(&github), &["lock"]);
    ok(&a, Some(&github), &["sync"]);
    let lock = Lockfile::load(&a.project.join("pack.lock")).unwrap();
    let cache = registry.repository_url("team/cache");

    let first = json(&a, None, &["store", "push", &cache]);
    assert_eq!(first["schema_version"], 1, "{first}");
    assert_eq!(first["repository"], cache.as_str());
    assert_eq!(first["pushed"], 2, "{first}");
    assert_eq!(first["present"], 0);
    let items = first["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for package in &lock.packages {
        let hash = package.content_hash.as_ref().unwrap().to_string();
        let item = items
            .iter()
            .find(|item| item["module"] == package.module.as_str())
            .unwrap_or_else(|| panic!("{} not pushed: {first}", package.module.as_str()));
        assert_eq!(item["status"], "pushed");
        assert_eq!(item["kind"], "package");
        assert_eq!(item["content_identity"], hash.as_str());
        assert_eq!(item["tag"], identity_tag(&hash).as_str());
        assert_eq!(item["uploaded_blobs"], 2);
    }
    let blobs = registry.stored_blobs();

    // What a substituter pulls back is the locked tree, with its module and executable bit.
    let repository: OciRepository = cache.parse().unwrap();
    let alpha = lock
        .packages
        .iter()
        .find(|p| p.module.as_str().ends_with("alpha"))
        .unwrap();
    let alpha_hash = alpha.content_hash.as_ref().unwrap().to_string();
    let work = tempfile::tempdir().unwrap();
    let pulled = client()
        .pull_tree(
            &repository,
            &OciReference::Tag(identity_tag(&alpha_hash)),
            &work.path().join("alpha"),
        )
        .unwrap()
        .unwrap();
    let config = pulled.config.unwrap();
    assert_eq!(config.module, alpha.module.as_str());
    assert_eq!(config.commit.as_deref(), Some(alpha.commit.as_str()));
    assert_eq!(config.content_identity, alpha_hash);
    assert_eq!(pulled.executables, ["run.sh"]);
    assert_eq!(
        agentpack_store::hash_tree(&work.path().join("alpha"))
            .unwrap()
            .to_string(),
        alpha_hash
    );

    // A second push uploads nothing.
    let text = ok(&a, None, &["store", "push", &cache]);
    assert!(
        text.lines().filter(|l| l.starts_with("present ")).count() == 2,
        "{text}"
    );
    assert!(
        text.contains("0 pushed, 2 already present, 0 missing"),
        "{text}"
    );
    assert_eq!(registry.stored_blobs(), blobs);

    // `--generations`: the current generation too, tagged by its store path name.
    let generation = std::fs::canonicalize(a.staging_root.join("modes/default")).unwrap();
    let name = generation.file_name().unwrap().to_str().unwrap().to_owned();
    let with_generation = json(&a, None, &["store", "push", "--generations", &cache]);
    assert_eq!(
        (
            with_generation["pushed"].as_u64(),
            with_generation["present"].as_u64()
        ),
        (Some(1), Some(2)),
        "{with_generation}"
    );
    let item = with_generation["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "generation")
        .unwrap()
        .clone();
    let tag = identity_tag(&format!("generation:{name}"));
    assert_eq!(item["tag"], tag.as_str());
    let pulled = client()
        .pull_tree(
            &repository,
            &OciReference::Tag(tag),
            &work.path().join("generation"),
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        pulled.config.unwrap().kind,
        agentpack_builders::oci::ArtifactKind::Generation
    );
    let blobs = registry.stored_blobs();

    // `--all`: the same two store paths, already there.
    let all = json(&a, None, &["store", "push", "--all", &cache]);
    assert_eq!(
        (all["pushed"].as_u64(), all["present"].as_u64()),
        (Some(0), Some(2)),
        "{all}"
    );
    assert_eq!(registry.stored_blobs(), blobs, "--all uploaded nothing");

    // A machine that has the lock but never synced: both missing, the command fails.
    let b = IsolatedHome::new();
    for file in ["agentpack.toml", "pack.lock"] {
        std::fs::copy(a.project.join(file), b.project.join(file)).unwrap();
    }
    let output = run(&b, None, &["store", "push", &cache]);
    assert!(!output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.lines().filter(|l| l.starts_with("missing ")).count() == 2
            && stdout.contains("agentpack sync"),
        "{stdout}"
    );
    assert!(stderr.contains("not in the store"), "{stderr}");

    // A bad address is refused before anything else.
    let output = run(&a, None, &["store", "push", "https://example.invalid/x"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("oci://"));
}

#[test]
fn publish_pushes_a_skill_directory_with_the_hash_add_locks() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let home = IsolatedHome::new();
    let skill = home.project.join("my-skill");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: my-skill\ndescription: mine\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/tool.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        skill.join("scripts/tool.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let target = format!("{}:1.0.0", registry.repository_url("skills/my-skill"));

    let report = json(&home, None, &["publish", "./my-skill", &target]);
    let content_hash = report["content_hash"].as_str().unwrap().to_owned();
    let manifest = report["manifest_digest"].as_str().unwrap().to_owned();
    assert_eq!(report["tag"], "1.0.0");
    assert_eq!(report["kind"], "skill");
    assert_eq!(report["identity_tag"], identity_tag(&content_hash).as_str());
    assert_eq!(report["uploaded_blobs"], 2);
    assert_eq!(
        report["executables"],
        serde_json::json!(["scripts/tool.sh"])
    );

    // Under its tag and its identity tag, the same manifest.
    let repository: OciRepository = registry.repository_url("skills/my-skill").parse().unwrap();
    let client = client();
    for tag in ["1.0.0".to_owned(), identity_tag(&content_hash)] {
        assert_eq!(
            client
                .resolve(&repository, &OciReference::Tag(tag))
                .unwrap()
                .as_deref(),
            Some(manifest.as_str())
        );
    }
    let work = tempfile::tempdir().unwrap();
    let pulled = client
        .pull_tree(
            &repository,
            &OciReference::Tag("1.0.0".into()),
            &work.path().join("t"),
        )
        .unwrap()
        .unwrap();
    assert_eq!(pulled.executables, ["scripts/tool.sh"]);

    // Publishing again sends nothing.
    let again = ok(&home, None, &["publish", "./my-skill", &target]);
    assert!(
        again.contains("already published") && again.contains(&manifest),
        "{again}"
    );

    // `add` of the same directory locks the same content hash.
    std::fs::write(
        home.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"my-skill\" = { path = \"my-skill\" }\n",
    )
    .unwrap();
    ok(&home, None, &["lock"]);
    let lock = Lockfile::load(&home.project.join("pack.lock")).unwrap();
    let locked = lock
        .packages
        .iter()
        .find(|p| p.url.starts_with("path:"))
        .unwrap();
    assert_eq!(
        locked.content_hash.as_ref().unwrap().to_string(),
        content_hash
    );

    // What is not a skill or plugin, and a target without a tag, are refused.
    std::fs::create_dir_all(home.project.join("docs")).unwrap();
    std::fs::write(home.project.join("docs/README.md"), "hi").unwrap();
    let output = run(&home, None, &["publish", "docs", &target]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a skill or plugin directory"),
        "{stderr}"
    );
    let output = run(
        &home,
        None,
        &[
            "publish",
            "my-skill",
            &registry.repository_url("skills/my-skill"),
        ],
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("names no tag"));
}
