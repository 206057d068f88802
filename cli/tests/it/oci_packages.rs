//! `oci://` packages end to end: the real `agentpack` binary and a real OCI registry (Debian's
//! `docker-registry` on 127.0.0.1). A skill directory is published under a tag; `add` pins the tag,
//! `lock` records the manifest digest and the content hash; `sync` keeps that digest when the tag
//! moves in the registry; `update` follows it; a fresh home restores the lock by digest; a digest
//! pin is used as written; an unknown tag is an error naming the package; a registry that is not
//! loopback is reached over HTTPS unless `AGENTPACK_OCI_INSECURE` lists it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_lockfile::Lockfile;
use agentpack_test_support::registry::registry_available;
use agentpack_test_support::{agentpack_bin, IsolatedHome, TestRegistry};

fn run(home: &IsolatedHome, args: &[&str]) -> Output {
    home.command(&agentpack_bin(), None)
        .args(args)
        .output()
        .unwrap()
}

fn ok(home: &IsolatedHome, args: &[&str]) -> String {
    let output = run(home, args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "agentpack {args:?} failed\nstdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

fn generation(home: &IsolatedHome) -> PathBuf {
    std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap()
}

/// Whether some regular file under `dir` holds `needle`.
fn holds(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            holds(&entry.path(), needle)
        } else {
            kind.is_file()
                && String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap()).contains(needle)
        }
    })
}

/// A skill directory whose body says `body`.
fn skill_dir(root: &Path, body: &str) -> PathBuf {
    let dir = root.join(format!("pdf-{}", body.replace(' ', "-")));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: pdf\ndescription: fill PDF forms\n---\n\n{body}\n"),
    )
    .unwrap();
    dir
}

fn publish(publisher: &IsolatedHome, dir: &Path, target: &str) {
    ok(publisher, &["publish", dir.to_str().unwrap(), target]);
}

fn locked_url(home: &IsolatedHome, module: &str) -> String {
    let lock = Lockfile::load(&home.project.join("pack.lock")).unwrap();
    lock.package(module).unwrap().url.clone()
}

#[test]
fn publish_add_lock_sync_and_update_after_the_tag_moves() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let work = tempfile::tempdir().unwrap();
    let publisher = IsolatedHome::new();
    let module = registry.repository_url("acme/skills/pdf");
    publish(
        &publisher,
        &skill_dir(work.path(), "first body"),
        &format!("{module}:stable"),
    );

    let home = IsolatedHome::new();
    ok(&home, &["init", "--name", "demo"]);
    ok(&home, &["add", &format!("{module}:stable")]);
    let manifest = std::fs::read_to_string(home.project.join("agentpack.toml")).unwrap();
    assert!(
        manifest.contains(&format!("\"{module}\" = {{ tag = \"stable\" }}")),
        "{manifest}"
    );
    let first = locked_url(&home, &module);
    assert!(
        first.starts_with(&format!("{module}:stable@sha256:")),
        "{first}"
    );
    let lock = Lockfile::load(&home.project.join("pack.lock")).unwrap();
    let entry = lock.package(&module).unwrap();
    assert!(entry.content_hash.is_some());
    assert_eq!(entry.kind, "skill");
    assert!(holds(&generation(&home), "first body"));

    // The tag moves in the registry: sync keeps the locked digest, update follows the tag.
    publish(
        &publisher,
        &skill_dir(work.path(), "second body"),
        &format!("{module}:stable"),
    );
    ok(&home, &["sync"]);
    assert_eq!(locked_url(&home, &module), first);
    assert!(holds(&generation(&home), "first body"));
    ok(&home, &["update"]);
    let second = locked_url(&home, &module);
    assert_ne!(second, first);
    assert!(
        second.starts_with(&format!("{module}:stable@sha256:")),
        "{second}"
    );
    assert!(holds(&generation(&home), "second body"));
    assert!(!holds(&generation(&home), "first body"));

    // A fresh home restores the lock by digest.
    let fresh = IsolatedHome::new();
    for file in ["agentpack.toml", "pack.lock"] {
        std::fs::copy(home.project.join(file), fresh.project.join(file)).unwrap();
    }
    ok(&fresh, &["sync"]);
    assert_eq!(
        generation(&fresh).file_name(),
        generation(&home).file_name()
    );

    // A digest pin is used as written, whatever the tag says.
    let digest = first.rsplit_once('@').unwrap().1.to_owned();
    std::fs::write(
        home.project.join("agentpack.toml"),
        manifest.replace(
            "{ tag = \"stable\" }",
            &format!("{{ digest = \"{digest}\" }}"),
        ),
    )
    .unwrap();
    ok(&home, &["lock"]);
    assert_eq!(locked_url(&home, &module), format!("{module}@{digest}"));
    ok(&home, &["sync"]);
    assert!(holds(&generation(&home), "first body"));
}

#[test]
fn an_unknown_tag_is_an_error_naming_the_package() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let home = IsolatedHome::new();
    ok(&home, &["init", "--name", "demo"]);
    let module = registry.repository_url("acme/skills/none");
    let output = run(&home, &["add", &format!("{module}:9.9.9")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&module) && stderr.contains("9.9.9"),
        "{stderr}"
    );
    // Nothing was written.
    let manifest = std::fs::read_to_string(home.project.join("agentpack.toml")).unwrap();
    assert!(!manifest.contains("oci://"), "{manifest}");
}

#[test]
fn the_download_limit_of_the_environment_applies_to_an_oci_package() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let work = tempfile::tempdir().unwrap();
    let publisher = IsolatedHome::new();
    let module = registry.repository_url("acme/skills/pdf");
    publish(
        &publisher,
        &skill_dir(work.path(), "fill the form"),
        &format!("{module}:1.0.0"),
    );
    let home = IsolatedHome::new();
    ok(&home, &["init", "--name", "demo"]);
    let output = home
        .command(&agentpack_bin(), None)
        .env("AGENTPACK_MAX_DOWNLOAD_SIZE", "16")
        .args(["add", &format!("{module}:1.0.0")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("AGENTPACK_MAX_DOWNLOAD_SIZE") && stderr.contains(&module),
        "{stderr}"
    );
    let manifest = std::fs::read_to_string(home.project.join("agentpack.toml")).unwrap();
    assert!(!manifest.contains("oci://"), "{manifest}");
}

/// A listener on 127.0.0.2 (loopback, but not a name agentpack treats as local) that records the
/// first bytes of every connection and hangs up.
fn first_bytes_listener() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    use std::io::Read as _;
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut head = [0u8; 4];
            if stream.read_exact(&mut head).is_ok() {
                recorded.lock().unwrap().push(head.to_vec());
            }
        }
    });
    (port, seen)
}

#[test]
fn registries_are_reached_over_https_unless_loopback_or_listed_in_agentpack_oci_insecure() {
    let (port, seen) = first_bytes_listener();
    let home = IsolatedHome::new();
    ok(&home, &["init", "--name", "demo"]);
    let module = format!("oci://127.0.0.2:{port}/acme/skills/pdf");
    let output = run(&home, &["add", &format!("{module}:1.0.0")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&module), "{stderr}");
    let first = seen.lock().unwrap().clone();
    assert!(!first.is_empty(), "{stderr}");
    assert!(
        first.iter().all(|head| head[0] == 0x16 && head[1] == 0x03),
        "a TLS handshake, not plain HTTP: {first:?}"
    );

    seen.lock().unwrap().clear();
    let output = home
        .command(&agentpack_bin(), None)
        .env(
            "AGENTPACK_OCI_INSECURE",
            format!("other.lan, 127.0.0.2:{port}"),
        )
        .args(["add", &format!("{module}:1.0.0")])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let first = seen.lock().unwrap().clone();
    assert!(
        !first.is_empty() && first.iter().all(|head| head == b"GET " || head == b"HEAD"),
        "plain HTTP to a listed host: {first:?}"
    );
}
