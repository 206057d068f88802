//! `oci://` packages through resolution and fetching, against a real registry (Debian's
//! `docker-registry` on 127.0.0.1): a plain image with one tar+gzip layer holding a skill
//! directory is locked (manifest digest, content hash, executable bits) and fetched again into a
//! fresh store by digest; a layer of a media type we do not read is refused naming the package and
//! the media type, and nothing is published.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use agentpack_builders::fetch::{fetch_lock, FetchOptions};
use agentpack_builders::github::GitHubConfig;
use agentpack_builders::package_store::PackageStore;
use agentpack_builders::resolve::{resolve, ResolveEnv, UpdatePolicy};
use agentpack_builders::session::GitHubSession;
use agentpack_lockfile::lock::Lockfile;
use agentpack_lockfile::manifest::Manifest;
use agentpack_store::{Store, StoreOptions};
use agentpack_test_support::registry::registry_available;
use agentpack_test_support::TestRegistry;

use crate::oci_registry::{push_raw_image, tar_gz};

struct Machine {
    dir: tempfile::TempDir,
    store: Arc<Store>,
}

fn machine() -> Machine {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("project")).unwrap();
    let store = Arc::new(
        Store::open(
            &dir.path().join("home/cache"),
            StoreOptions {
                flush: false,
                host_id: Some("test".into()),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    Machine { dir, store }
}

impl Machine {
    fn session(&self) -> GitHubSession {
        // GitHub is never asked here: an address nothing listens on.
        let config = GitHubConfig::from_values(
            Some("http://127.0.0.1:9".into()),
            Some("http://127.0.0.1:9".into()),
            None,
            None,
        );
        GitHubSession::new(&self.store, config).unwrap()
    }

    fn lock(&self, text: &str) -> Result<Lockfile, String> {
        let session = self.session();
        let env = ResolveEnv {
            project_root: &self.dir.path().join("project"),
            agentpack_home: &self.dir.path().join("home"),
            fetcher: &session.fetcher,
            store: self.store.as_ref(),
            progress: None,
            keep_unhashed: false,
        };
        let manifest = Manifest::parse(text, Path::new("agentpack.toml")).unwrap();
        resolve(&manifest, None, &UpdatePolicy::KeepPins, &env)
            .map(|outcome| outcome.lock)
            .map_err(|e| {
                // The error and its causes, as the cli prints them (each on its own line).
                let mut text = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(inner) = cause {
                    text.push_str(&format!("\n  caused by: {inner}"));
                    cause = inner.source();
                }
                text
            })
    }
}

/// The image config the raw images of this suite carry.
const IMAGE_CONFIG: (&str, &[u8]) = ("application/vnd.oci.image.config.v1+json", b"{}");

const HEAD: &str = "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n";

#[test]
fn a_plain_tar_gzip_image_is_locked_by_digest_and_fetched_again_verified() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let layer = tar_gz(&[
        (
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: fill PDF forms\n---\n\nFill.\n",
            0o644,
        ),
        ("pdf/tool.sh", "#!/bin/sh\necho pdf\n", 0o755),
    ]);
    push_raw_image(
        &registry,
        "plain/pdf",
        "1.0",
        IMAGE_CONFIG,
        ("application/vnd.oci.image.layer.v1.tar+gzip", &layer),
    );
    let module = registry.repository_url("plain/pdf");
    let a = machine();
    let lock = a
        .lock(&format!("{HEAD}\"{module}\" = {{ tag = \"1.0\" }}\n"))
        .unwrap();
    let entry = lock.package(&module).unwrap();
    assert_eq!(entry.kind, "skill");
    assert!(
        entry.url.starts_with(&format!("{module}:1.0@sha256:")),
        "{}",
        entry.url
    );
    let pin = entry.oci_pin().unwrap();
    assert_eq!(entry.commit.as_str(), &pin.digest["sha256:".len()..][..40]);
    let text = lock.to_toml_string();
    assert_eq!(
        Lockfile::parse(&text, Path::new("pack.lock")).unwrap(),
        lock
    );

    // A fresh store fetches it by digest; the tree is the locked one, the script executable.
    let b = machine();
    let session = b.session();
    let outcome = fetch_lock(
        &lock,
        &b.dir.path().join("project"),
        &b.dir.path().join("home"),
        &session.fetcher,
        b.store.as_ref(),
        FetchOptions::default(),
    )
    .unwrap();
    assert_eq!(outcome.downloaded, vec![module.clone()]);
    let slot = &outcome.slots[&module];
    assert!(slot.join("SKILL.md").is_file() && slot.join("tool.sh").is_file());
    let hash = PackageStore::hash_tree(b.store.as_ref(), slot).unwrap();
    assert_eq!(Some(&hash), entry.content_hash.as_ref());
    let published = std::fs::canonicalize(slot).unwrap();
    assert!(b
        .store
        .source_executables(&b.store.store_path_of(&published).unwrap())
        .contains(&"tool.sh".to_owned()));
}

#[test]
fn a_layer_of_another_media_type_is_refused_naming_the_package_and_the_media_type() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    push_raw_image(
        &registry,
        "odd/thing",
        "1.0",
        IMAGE_CONFIG,
        ("application/vnd.example.thing.v1", b"not a tar"),
    );
    let module = registry.repository_url("odd/thing");
    let a = machine();
    let error = a
        .lock(&format!("{HEAD}\"{module}\" = \"1.0\"\n"))
        .unwrap_err();
    assert!(error.contains(&format!("cannot fetch {module}")), "{error}");
    assert!(
        error.contains("application/vnd.example.thing.v1"),
        "{error}"
    );
    // Each cause is printed once: the package's line does not repeat the OCI client's cause.
    assert_eq!(
        error.matches("application/vnd.example.thing.v1").count(),
        1,
        "{error}"
    );
    assert!(a.store.slots().unwrap().is_empty(), "nothing was published");
}
