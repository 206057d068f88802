//! `agentpack store push` and `agentpack publish` against a real OCI registry (Debian's
//! `docker-registry` on 127.0.0.1): a project locked and synced from the fake GitHub pushes its
//! closure once (a second push uploads nothing), `--all` finds the same store paths, a cold store
//! reports what is missing; the manifest, config blob and layer the registry stores are ours
//! (artifactType, media types, module, commit, content hash, agentpack version, tar modes); a local
//! skill directory is published under its tag and its identity tag with the `content_hash` that
//! `add` of the same directory locks, showing the bytes uploaded on a terminal only.

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

/// `GET http://127.0.0.1:PORT{path}` (HTTP/1.0, so the body ends with the connection): the body.
pub(crate) fn http_get(registry: &TestRegistry, path: &str, accept: &str) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", registry.port())).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {}\r\nAccept: {accept}\r\n\r\n",
        registry.registry()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    response[split + 4..].to_vec()
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
    assert_eq!(config.agentpack_version, env!("CARGO_PKG_VERSION"));
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

    // The manifest as the registry stores it: our artifactType, our config, one tar+zstd layer
    // whose tar headers record the executable bit (0755 for run.sh, 0644 for the rest).
    let manifest: serde_json::Value = serde_json::from_slice(&http_get(
        &registry,
        &format!("/v2/team/cache/manifests/{}", identity_tag(&alpha_hash)),
        "application/vnd.oci.image.manifest.v1+json",
    ))
    .unwrap();
    assert_eq!(
        manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{manifest}"
    );
    assert_eq!(
        manifest["artifactType"],
        "application/vnd.agentpack.package.v1"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.agentpack.config.v1+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+zstd"
    );
    assert_eq!(
        manifest["annotations"]["dev.agentpack.content-identity"],
        alpha_hash.as_str()
    );
    let config_blob: serde_json::Value = serde_json::from_slice(&http_get(
        &registry,
        &format!(
            "/v2/team/cache/blobs/{}",
            manifest["config"]["digest"].as_str().unwrap()
        ),
        "*/*",
    ))
    .unwrap();
    assert_eq!(
        config_blob["module"],
        alpha.module.as_str(),
        "{config_blob}"
    );
    assert_eq!(config_blob["commit"], alpha.commit.as_str());
    assert_eq!(config_blob["content_identity"], alpha_hash.as_str());
    assert_eq!(config_blob["agentpack_version"], env!("CARGO_PKG_VERSION"));
    let layer = http_get(
        &registry,
        &format!(
            "/v2/team/cache/blobs/{}",
            layers[0]["digest"].as_str().unwrap()
        ),
        "*/*",
    );
    let tar = zstd::decode_all(&layer[..]).unwrap();
    let mut archive = tar::Archive::new(&tar[..]);
    let modes: Vec<(String, u32, u64)> = archive
        .entries()
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let header = entry.header();
            (
                entry.path().unwrap().display().to_string(),
                header.mode().unwrap(),
                header.mtime().unwrap(),
            )
        })
        .collect();
    assert!(
        modes.contains(&("run.sh".to_owned(), 0o755, 0)),
        "{modes:?}"
    );
    assert!(
        modes.contains(&("SKILL.md".to_owned(), 0o644, 0)),
        "{modes:?}"
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

#[test]
fn publish_shows_the_bytes_uploaded_on_a_terminal_only() {
    use agentpack_test_support::registry::TokenAuthProxy;
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let proxy = TokenAuthProxy::start(&registry, "team", "s3cret", false);
    // Every blob call held 700 ms: the push outlasts the spinner's first second.
    proxy.set_blob_delay(std::time::Duration::from_millis(700));
    let home = IsolatedHome::new();
    let skill = home.project.join("big-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: big-skill\ndescription: big\n---\nbody\n",
    )
    .unwrap();
    // Bytes zstd cannot shrink much: a few hundred KiB of pseudo-random hex.
    let mut noise = String::new();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < 300_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        noise.push_str(&format!("{state:016x}"));
    }
    std::fs::write(skill.join("data.txt"), noise).unwrap();
    let publish = |repository: &str, on_terminal: bool| -> String {
        let target = format!("{}:1.0.0", proxy.repository_url(repository));
        let mut command = if on_terminal {
            let mut script = home.command(std::path::Path::new("script"), None);
            let line = format!("{} publish ./big-skill {target}", agentpack_bin().display());
            script.args(["-q", "-e", "-c", &line, "/dev/null"]);
            script
        } else {
            let mut command = home.command(&agentpack_bin(), None);
            command.args(["publish", "./big-skill", &target]);
            command
        };
        let output = command
            .env("AGENTPACK_OCI_TOKEN", "team:s3cret")
            .env("TERM", "xterm")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{text}");
        text
    };
    let terminal = publish("skills/big", true);
    assert!(
        terminal.contains("publishing to oci://") && terminal.contains(" KiB uploaded)"),
        "no byte progress on a terminal:\n{terminal}"
    );
    // The whole layer (more than 100 KiB) was counted, not only announced.
    let counted = terminal.split('(').skip(1).any(|frame| {
        frame
            .split_once(" uploaded)")
            .and_then(|(status, _)| status.split_once(" of "))
            .and_then(|(sent, _)| sent.strip_suffix(" KiB"))
            .and_then(|sent| sent.parse::<f64>().ok())
            .is_some_and(|sent| sent > 100.0)
    });
    assert!(counted, "{terminal}");
    // The same upload (another repository, so every blob is sent again) into a pipe: no spinner.
    let pipe = publish("skills/big-again", false);
    assert!(pipe.contains("published "), "{pipe}");
    assert!(
        !pipe.contains("publishing to"),
        "progress in a pipe:\n{pipe}"
    );
}
