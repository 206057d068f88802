//! Substituters end to end: the real `agentpack` binary, the fake GitHub on 127.0.0.1 and a real
//! OCI registry (Debian's `docker-registry`). Machine A locks and syncs from GitHub and pushes its
//! store paths; machine B (a fresh `AGENTPACK_HOME`) restores the same lock from the registry
//! alone, GitHub stopped, and builds the same generation (so do `lock` and `env restore`); a tree
//! replaced in the registry under the same tag is refused naming the package, nothing of it is
//! published, and GitHub serves the package instead; a cache that lacks the packages warns once;
//! the same with an htpasswd registry, and with a bearer-token registry (a token endpoint named by
//! `WWW-Authenticate`) filled with docker config credentials, concurrently, and read anonymously.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_builders::oci::{
    identity_tag, ArtifactConfig, ArtifactKind, OciClient, OciTransport,
};
use agentpack_lockfile::Lockfile;
use agentpack_test_support::registry::registry_available;
use agentpack_test_support::{agentpack_bin, Endpoint, FakeGitHub, IsolatedHome, TestRegistry};

const CACHE: &str = "team/cache";
const MANIFEST: &str = "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"github.com/acme/skills/skills/alpha\" = {}\n\"github.com/acme/skills/skills/beta\" = {}\n";

/// One machine: its own home; runs with the given substituters and OCI credentials.
struct Machine {
    home: IsolatedHome,
    env: Vec<(String, String)>,
}

impl Machine {
    fn new(env: &[(&str, &str)]) -> Machine {
        Machine {
            home: IsolatedHome::new(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn run(&self, github: Option<&FakeGitHub>, args: &[&str]) -> Output {
        let mut command = self.home.command(&agentpack_bin(), github);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command.args(args).output().unwrap()
    }

    fn ok(&self, github: Option<&FakeGitHub>, args: &[&str]) -> String {
        let output = self.run(github, args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "agentpack {args:?} failed\nstdout:\n{}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        );
        stderr
    }

    fn generation(&self) -> PathBuf {
        std::fs::canonicalize(self.home.staging_root.join("modes/default")).unwrap()
    }

    fn lock(&self) -> Lockfile {
        Lockfile::load(&self.home.project.join("pack.lock")).unwrap()
    }

    /// A project with the same manifest and lock as `other`'s.
    fn same_project_as(&self, other: &Machine) {
        for file in ["agentpack.toml", "pack.lock"] {
            std::fs::copy(other.home.project.join(file), self.home.project.join(file)).unwrap();
        }
    }
}

/// The fake GitHub with `acme/skills`: skills `alpha` (with an executable `run.sh`) and `beta`
/// (also used by `oci_push`).
pub(crate) fn github_with_skills() -> FakeGitHub {
    let github = FakeGitHub::start();
    let repo = github.repo("acme", "skills");
    for name in ["alpha", "beta"] {
        repo.write(
            &format!("skills/{name}/SKILL.md"),
            format!("---\nname: {name}\ndescription: the {name} skill\n---\n\nDo {name} things.\n"),
        );
    }
    repo.write("skills/alpha/run.sh", "#!/bin/sh\necho alpha\n");
    std::fs::set_permissions(
        repo.dir.join("skills/alpha/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.commit("skills");
    github
}

/// Machine A: lock and sync from GitHub, then push the project's store paths to the cache.
fn machine_a(github: &FakeGitHub, registry: &TestRegistry, env: &[(&str, &str)]) -> Machine {
    let a = Machine::new(env);
    std::fs::write(a.home.project.join("agentpack.toml"), MANIFEST).unwrap();
    a.ok(Some(github), &["lock"]);
    a.ok(Some(github), &["sync"]);
    a.ok(
        Some(github),
        &["store", "push", &registry.repository_url(CACHE)],
    );
    a
}

fn downloads(github: &FakeGitHub) -> usize {
    github.count(Endpoint::Tarball, "acme", "skills")
        + github.count(Endpoint::GitHttp, "acme", "skills")
}

/// Every regular file under `dir` (not following links) whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            found.extend(files_containing(&entry.path(), needle));
        } else if kind.is_file() {
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            if String::from_utf8_lossy(&bytes).contains(needle) {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn machine_b_restores_the_lock_from_the_registry_alone_and_builds_the_same_generation() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let github = github_with_skills();
    let a = machine_a(&github, &registry, &[]);
    let generation_a = a.generation();

    let substituters = format!(
        "oci://127.0.0.1:9/nothing-here, {}",
        registry.repository_url(CACHE)
    );
    let b = Machine::new(&[("AGENTPACK_SUBSTITUTERS", substituters.as_str())]);
    b.same_project_as(&a);
    drop(github);
    let stderr = b.ok(None, &["sync", "-v"]);
    let generation_b = b.generation();
    assert_eq!(
        generation_b.file_name(),
        generation_a.file_name(),
        "the same generation store path\n{stderr}"
    );
    assert_ne!(generation_a, generation_b, "two homes, two stores");
    // -v names the source of each package; the unreachable first substituter warned once.
    assert_eq!(stderr.matches("source: substituter").count(), 2, "{stderr}");
    assert_eq!(
        stderr
            .matches("substituter oci://127.0.0.1:9/nothing-here is unavailable")
            .count(),
        1,
        "{stderr}"
    );
    // The lock is untouched, and a second sync has nothing to fetch.
    assert_eq!(b.lock(), a.lock());
    let again = b.ok(None, &["sync", "-v"]);
    assert!(!again.contains("source: substituter"), "{again}");
    // `lock` on a third machine also takes the locked packages from the substituter.
    let c = Machine::new(&[(
        "AGENTPACK_SUBSTITUTERS",
        registry.repository_url(CACHE).as_str(),
    )]);
    c.same_project_as(&a);
    let stderr = c.ok(None, &["lock", "-v"]);
    assert_eq!(stderr.matches("source: substituter").count(), 2, "{stderr}");
    assert_eq!(c.lock(), a.lock());
    // `env restore` (frozen) on a fourth: the same generation from the registry alone.
    let d = Machine::new(&[(
        "AGENTPACK_SUBSTITUTERS",
        registry.repository_url(CACHE).as_str(),
    )]);
    d.same_project_as(&a);
    let stderr = d.ok(None, &["env", "restore", "-v"]);
    assert_eq!(stderr.matches("source: substituter").count(), 2, "{stderr}");
    assert_eq!(d.generation().file_name(), generation_a.file_name());
    assert_eq!(d.lock(), a.lock());

    // The executable bit came through the registry: staged the same on both machines.
    let modes = |generation: &Path| -> Vec<u32> {
        files_containing(generation, "echo alpha")
            .iter()
            .map(|file| std::fs::metadata(file).unwrap().permissions().mode() & 0o111)
            .collect()
    };
    let staged_a = modes(&generation_a);
    assert!(
        !staged_a.is_empty() && staged_a.iter().all(|mode| *mode != 0),
        "{staged_a:?}"
    );
    assert_eq!(modes(&generation_b), staged_a);
}

#[test]
fn a_tree_replaced_under_the_same_tag_is_refused_naming_the_package_and_github_serves_it() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let github = github_with_skills();
    let a = machine_a(&github, &registry, &[]);
    let generation_a = a.generation();
    let lock = a.lock();
    let alpha = lock.package("github.com/acme/skills/skills/alpha").unwrap();
    let content_hash = alpha.content_hash.clone().unwrap();

    // Someone with push rights replaces alpha's tree under its identity tag.
    let evil = tempfile::tempdir().unwrap();
    let tree = evil.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(
        tree.join("SKILL.md"),
        "---\nname: alpha\ndescription: the alpha skill\n---\n\nEVIL INSTRUCTIONS.\n",
    )
    .unwrap();
    let client = OciClient::new(OciTransport::from_env(&|_| None)).unwrap();
    let repository = registry.repository_url(CACHE).parse().unwrap();
    client
        .push_tree(
            &repository,
            &identity_tag(content_hash.as_str()),
            &tree,
            &ArtifactConfig {
                kind: ArtifactKind::Package,
                module: alpha.module.to_string(),
                commit: Some(alpha.commit.to_string()),
                content_identity: content_hash.to_string(),
                executables: Vec::new(),
                agentpack_version: "0.0.0".to_owned(),
            },
        )
        .unwrap();

    let b = Machine::new(&[(
        "AGENTPACK_SUBSTITUTERS",
        registry.repository_url(CACHE).as_str(),
    )]);
    b.same_project_as(&a);
    github.reset_counters();
    let stderr = b.ok(Some(&github), &["sync", "-v"]);
    assert!(
        stderr.contains("refused github.com/acme/skills/skills/alpha from substituter"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was published from it"), "{stderr}");
    assert_eq!(
        stderr.matches("refused github.com/acme").count(),
        1,
        "{stderr}"
    );
    // beta came from the registry, alpha from GitHub; -v says so for each.
    assert_eq!(stderr.matches("source: substituter").count(), 1, "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("source: GitHub") && line.contains("skills/alpha")),
        "{stderr}"
    );
    assert_eq!(downloads(&github), 1, "GitHub served alpha");
    assert_eq!(b.generation().file_name(), generation_a.file_name());
    // Nothing of the replaced tree reached the store.
    let evil_files = files_containing(&b.home.agentpack_home, "EVIL INSTRUCTIONS");
    assert!(evil_files.is_empty(), "{evil_files:?}");

    // A cache that lacks both packages: one warning (the first miss), then GitHub serves both.
    let empty = registry.repository_url("team/empty");
    let e = Machine::new(&[("AGENTPACK_SUBSTITUTERS", empty.as_str())]);
    e.same_project_as(&a);
    github.reset_counters();
    let stderr = e.ok(Some(&github), &["sync"]);
    assert_eq!(
        stderr
            .matches(&format!(
                "substituter {empty} has no copy of github.com/acme/skills/skills/"
            ))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("agentpack store push {empty}")),
        "{stderr}"
    );
    assert_eq!(downloads(&github), 1, "GitHub served both");
    assert_eq!(e.generation().file_name(), generation_a.file_name());

    // beta's layer blob overwritten in the registry's storage (same tag, same manifest, other
    // bytes): the download fails its digest, the warning names beta, GitHub serves it.
    let beta = lock.package("github.com/acme/skills/skills/beta").unwrap();
    let beta_tag = identity_tag(beta.content_hash.as_ref().unwrap().as_str());
    let manifest: serde_json::Value = serde_json::from_slice(&crate::oci_push::http_get(
        &registry,
        &format!("/v2/{CACHE}/manifests/{beta_tag}"),
        "application/vnd.oci.image.manifest.v1+json",
    ))
    .unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let hex = layer.strip_prefix("sha256:").unwrap();
    let data = registry
        .storage_dir()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let original = std::fs::read(&data).unwrap();
    let mut other = original.clone();
    let last = other.len() - 1;
    other[last] ^= 0xff;
    std::fs::write(&data, &other).unwrap();
    let f = Machine::new(&[(
        "AGENTPACK_SUBSTITUTERS",
        registry.repository_url(CACHE).as_str(),
    )]);
    f.same_project_as(&a);
    github.reset_counters();
    let stderr = f.ok(Some(&github), &["sync", "-v"]);
    assert!(
        stderr.contains("could not serve github.com/acme/skills/skills/beta"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("warning:").count(),
        2,
        "alpha's and beta's: {stderr}"
    );
    assert!(!stderr.contains("source: substituter"), "{stderr}");
    assert_eq!(downloads(&github), 1, "GitHub served both");
    assert_eq!(f.generation().file_name(), generation_a.file_name());
}

#[test]
fn an_htpasswd_registry_serves_with_credentials_and_without_them_falls_through_with_one_warning() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start_with_htpasswd("team", "s3cret");
    let github = github_with_skills();
    let a = machine_a(
        &github,
        &registry,
        &[("AGENTPACK_OCI_TOKEN", "team:s3cret")],
    );
    let url = registry.repository_url(CACHE);

    let b = Machine::new(&[
        ("AGENTPACK_SUBSTITUTERS", url.as_str()),
        ("AGENTPACK_OCI_TOKEN", "team:s3cret"),
    ]);
    b.same_project_as(&a);
    github.set_rest_down(Some(503));
    github.set_git_http_enabled(false);
    github.reset_counters();
    b.ok(Some(&github), &["sync"]);
    assert_eq!(b.generation().file_name(), a.generation().file_name());

    // The config file names the substituter too; without credentials it refuses: one warning,
    // then GitHub (back up) serves both packages.
    github.set_rest_down(None);
    github.set_git_http_enabled(true);
    let c = Machine::new(&[]);
    let config = c.home.home.join(".config/agentpack");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("substituters = [\"{url}\"]\n"),
    )
    .unwrap();
    c.same_project_as(&a);
    let stderr = c.ok(Some(&github), &["sync"]);
    assert_eq!(
        stderr.matches(&format!("substituter {url}")).count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert_eq!(c.generation().file_name(), a.generation().file_name());
    // The credentials were read, never written: no file of any machine holds the password.
    for machine in [&a, &b, &c] {
        let root = machine.home.home.parent().unwrap();
        let written = files_containing(root, "s3cret");
        assert!(written.is_empty(), "{written:?}");
    }
    assert_eq!(
        downloads(&github),
        1,
        "one repository download for both packages"
    );
}

#[test]
fn a_bearer_token_registry_is_filled_with_docker_config_credentials_and_read_anonymously() {
    use agentpack_test_support::registry::TokenAuthProxy;
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let proxy = TokenAuthProxy::start(&registry, "team", "s3cret", true);
    let url = proxy.repository_url(CACHE);
    let github = github_with_skills();

    // Machine A: credentials only in ~/.docker/config.json (`auths`, base64 user:password).
    let a = Machine::new(&[]);
    std::fs::write(a.home.project.join("agentpack.toml"), MANIFEST).unwrap();
    a.ok(Some(&github), &["lock"]);
    a.ok(Some(&github), &["sync"]);
    std::fs::create_dir_all(a.home.home.join(".docker")).unwrap();
    std::fs::write(
        a.home.home.join(".docker/config.json"),
        format!(
            "{{\"auths\":{{\"{}\":{{\"auth\":\"dGVhbTpzM2NyZXQ=\"}}}}}}",
            proxy.registry()
        ),
    )
    .unwrap();
    // Blob calls held 150 ms each: concurrent transfers overlap.
    proxy.set_blob_delay(std::time::Duration::from_millis(150));
    a.ok(None, &["store", "push", &url]);
    let log = proxy.requests();
    assert!(
        log.iter()
            .any(|r| r.path.starts_with("/token") && r.auth == "basic"),
        "the token endpoint of the challenge was asked with the docker config's credentials: {log:#?}"
    );
    assert!(
        log.iter()
            .filter(|r| r.answered.is_none())
            .all(|r| r.auth == "bearer-push"),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|r| r.answered.is_none() && (r.method == "PUT" || r.method == "POST")),
        "{log:#?}"
    );
    assert!(
        proxy.max_in_flight() >= 2,
        "blob transfers run concurrently: {}",
        proxy.max_in_flight()
    );

    // A second push asks (HEAD) and uploads nothing.
    proxy.reset();
    proxy.set_blob_delay(std::time::Duration::ZERO);
    a.ok(None, &["store", "push", &url]);
    let forwarded: Vec<String> = proxy
        .requests()
        .iter()
        .filter(|r| r.answered.is_none())
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(!forwarded.is_empty());
    assert!(
        forwarded
            .iter()
            .all(|r| r.starts_with("HEAD ") || r.starts_with("GET ")),
        "{forwarded:#?}"
    );

    // Machine B: no credentials, the fake GitHub stopped; the registry hands out a pull token.
    let b = Machine::new(&[("AGENTPACK_SUBSTITUTERS", url.as_str())]);
    b.same_project_as(&a);
    drop(github);
    proxy.reset();
    let stderr = b.ok(None, &["sync", "-v"]);
    assert_eq!(stderr.matches("source: substituter").count(), 2, "{stderr}");
    assert_eq!(b.generation().file_name(), a.generation().file_name());
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/token") && r.auth == "none"),
        "{:#?}",
        proxy.requests()
    );
    // Nothing wrote the credentials anywhere but where the user put them.
    let root = a.home.home.parent().unwrap();
    let written: Vec<PathBuf> = files_containing(root, "dGVhbTpzM2NyZXQ=")
        .into_iter()
        .chain(files_containing(root, "s3cret"))
        .filter(|path| !path.ends_with(".docker/config.json"))
        .collect();
    assert!(written.is_empty(), "{written:?}");
}
