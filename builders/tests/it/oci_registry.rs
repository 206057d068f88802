//! The OCI transport against a real registry (Debian's `docker-registry` on 127.0.0.1): push and
//! pull round trips, executable bits, a second push that uploads nothing, htpasswd auth from
//! `AGENTPACK_OCI_TOKEN` and from a docker `config.json`, bearer tokens from the realm of a
//! `WWW-Authenticate` challenge, foreign media types refused by name, and plain image layers (tar,
//! tar+gzip, tar+zstd) holding a skill accepted.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use agentpack_builders::oci::artifact::{sha256_digest, LAYER_MEDIA_TYPE};
use agentpack_builders::oci::{
    identity_tag, ArtifactConfig, ArtifactKind, OciClient, OciError, OciReference, OciRepository,
    OciTransport,
};
use agentpack_test_support::registry::{base64_standard, registry_available, TestRegistry};

fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    move |name| map.get(name).cloned()
}

fn client(pairs: &[(&str, String)]) -> OciClient {
    let mut transport = OciTransport::from_env(&env(pairs));
    transport.retries = 0;
    OciClient::new(transport).unwrap()
}

fn skill_tree(root: &Path) {
    std::fs::create_dir_all(root.join("scripts/deep")).unwrap();
    std::fs::write(
        root.join("SKILL.md"),
        "---\nname: pdf\ndescription: PDFs\n---\nbody\n",
    )
    .unwrap();
    std::fs::write(root.join("scripts/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(root.join("scripts/deep/data.txt"), "data").unwrap();
    std::os::unix::fs::symlink("scripts/run.sh", root.join("run")).unwrap();
}

fn config_of(root: &Path, executables: &[&str]) -> ArtifactConfig {
    let hash = agentpack_store::hash_tree(root).unwrap();
    ArtifactConfig {
        kind: ArtifactKind::Package,
        module: "github.com/acme/skills/pdf".into(),
        commit: Some("a".repeat(40)),
        content_identity: hash.to_string(),
        executables: executables.iter().map(|s| (*s).to_owned()).collect(),
        agentpack_version: "0.0.0-test".into(),
    }
}

fn repo(registry: &TestRegistry, name: &str) -> OciRepository {
    registry.repository_url(name).parse().unwrap()
}

#[test]
fn push_then_pull_round_trips_and_a_second_push_uploads_nothing() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    skill_tree(&tree);
    let config = config_of(&tree, &["scripts/run.sh"]);
    let tag = identity_tag(&config.content_identity);
    let repository = repo(&registry, "team/cache");
    let client = client(&[]);

    assert_eq!(
        client
            .resolve(&repository, &OciReference::Tag(tag.clone()))
            .unwrap(),
        None,
        "nothing is there before the push"
    );
    let first = client.push_tree(&repository, &tag, &tree, &config).unwrap();
    assert_eq!(first.uploaded_blobs, 2, "{first:?}");
    assert_eq!(first.manifests_pushed, 1);
    assert!(first.uploaded_bytes > 0);
    // The client counted those bytes as it sent them (what a progress display reads).
    let counted = client.transfers().snapshot();
    assert_eq!(
        (
            counted.uploaded_bytes,
            counted.upload_total_bytes,
            counted.artifacts_done
        ),
        (first.uploaded_bytes, first.uploaded_bytes, 1)
    );
    let blobs_after_first = registry.stored_blobs();

    let resolved = client
        .resolve(&repository, &OciReference::Tag(tag.clone()))
        .unwrap();
    assert_eq!(resolved.as_deref(), Some(first.manifest_digest.as_str()));

    let second = client.push_tree(&repository, &tag, &tree, &config).unwrap();
    assert_eq!(second.manifest_digest, first.manifest_digest);
    assert_eq!(
        (
            second.uploaded_blobs,
            second.skipped_blobs,
            second.manifests_pushed,
            second.uploaded_bytes
        ),
        (0, 2, 0, 0),
        "{second:?}"
    );
    assert!(second.already_present());
    assert_eq!(registry.stored_blobs(), blobs_after_first);
    assert_eq!(
        client.transfers().snapshot().uploaded_bytes,
        first.uploaded_bytes,
        "nothing more was sent"
    );

    // Pull by tag and by digest: the same tree, the executable recorded.
    for reference in [
        OciReference::Tag(tag.clone()),
        OciReference::Digest(first.manifest_digest.clone()),
    ] {
        let dest = work
            .path()
            .join(format!("pulled-{}", reference.as_str().replace(':', "-")));
        let pulled = client
            .pull_tree(&repository, &reference, &dest)
            .unwrap()
            .expect("the artifact is there");
        assert_eq!(pulled.manifest_digest, first.manifest_digest);
        assert_eq!(pulled.layer_media_type, LAYER_MEDIA_TYPE);
        assert_eq!(pulled.config.as_ref(), Some(&config));
        assert_eq!(pulled.executables, ["scripts/run.sh"]);
        assert_eq!(
            agentpack_store::hash_tree(&dest).unwrap().to_string(),
            config.content_identity
        );
        assert_eq!(
            std::fs::read_link(dest.join("run")).unwrap(),
            Path::new("scripts/run.sh")
        );
        let mode = std::fs::metadata(dest.join("scripts/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644, "the extraction rules write 0644");
    }

    // One client shared by threads (a rayon fetch does this): every pull completes.
    let shared = std::sync::Arc::new(client);
    let handles: Vec<_> = (0..4)
        .map(|index| {
            let shared = std::sync::Arc::clone(&shared);
            let repository = repository.clone();
            let tag = tag.clone();
            let dest = work.path().join(format!("threaded-{index}"));
            std::thread::spawn(move || {
                shared
                    .pull_tree(&repository, &OciReference::Tag(tag), &dest)
                    .unwrap()
                    .unwrap()
                    .manifest_digest
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), first.manifest_digest);
    }
    let client = std::sync::Arc::into_inner(shared).unwrap();

    // Missing tags and repositories are `None`, not errors.
    let missing = OciReference::Tag("not-there".into());
    assert_eq!(client.resolve(&repository, &missing).unwrap(), None);
    assert!(client
        .pull_tree(
            &repo(&registry, "no/such"),
            &missing,
            &work.path().join("none")
        )
        .unwrap()
        .is_none());
    assert!(!work.path().join("none").exists());

    // A pull never writes over something.
    let error = client
        .pull_tree(&repository, &OciReference::Tag(tag.clone()), &tree)
        .unwrap_err();
    assert!(
        matches!(error, OciError::DestinationExists { .. }),
        "{error}"
    );

    // The same tree pushed from another directory (other mtimes) gives the same manifest.
    let again = work.path().join("again");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    skill_tree(&again);
    let third = client
        .push_tree(&repository, "other-tag", &again, &config)
        .unwrap();
    assert_eq!(third.manifest_digest, first.manifest_digest);
    assert_eq!((third.uploaded_blobs, third.manifests_pushed), (0, 1));
}

#[test]
fn htpasswd_registries_need_credentials_from_the_token_or_the_docker_config() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start_with_htpasswd("ci-bot", "s3cret-pw");
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    skill_tree(&tree);
    let config = config_of(&tree, &[]);
    let repository = repo(&registry, "private/skills");
    let tag = OciReference::Tag("1.0.0".into());

    // Anonymous: refused, with what to set.
    let anonymous = client(&[]);
    let error = anonymous
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, OciError::Unauthorized { .. }), "{message}");
    assert!(
        message.contains("requires credentials") && message.contains("AGENTPACK_OCI_TOKEN"),
        "{message}"
    );
    assert!(message.contains(&registry.registry()), "{message}");
    let message = anonymous
        .resolve(&repository, &tag)
        .unwrap_err()
        .to_string();
    assert!(message.contains("requires credentials"), "{message}");

    // A docker config that leaves the registry to a credential helper: the refusal says the
    // helper is not run, and what to export instead.
    let helper_config = work.path().join("helper");
    std::fs::create_dir_all(&helper_config).unwrap();
    std::fs::write(
        helper_config.join("config.json"),
        format!(
            r#"{{"auths":{{"{}":{{}}}},"credsStore":"desktop"}}"#,
            registry.registry()
        ),
    )
    .unwrap();
    let message = client(&[("DOCKER_CONFIG", helper_config.display().to_string())])
        .resolve(&repository, &tag)
        .unwrap_err()
        .to_string();
    assert!(
        message
            .contains("credential helper docker-credential-desktop, which agentpack does not run")
            && message.contains("export AGENTPACK_OCI_TOKEN"),
        "{message}"
    );

    // Wrong credentials: refused, the password never shown.
    let wrong = client(&[("AGENTPACK_OCI_TOKEN", "ci-bot:wrong-pw-123".into())]);
    let message = wrong
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("AGENTPACK_OCI_TOKEN") && message.contains("not accepted"),
        "{message}"
    );
    assert!(!message.contains("wrong-pw-123"), "{message}");

    // AGENTPACK_OCI_TOKEN=user:password pushes and pulls.
    let with_token = client(&[("AGENTPACK_OCI_TOKEN", "ci-bot:s3cret-pw".into())]);
    let pushed = with_token
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap();
    assert_eq!(pushed.uploaded_blobs, 2);
    let pulled = with_token
        .pull_tree(&repository, &tag, &work.path().join("by-token"))
        .unwrap()
        .unwrap();
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);

    // A docker config.json `auths` entry (base64 user:password) works too.
    let docker = work.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64_standard(b"ci-bot:s3cret-pw");
    let mut file = std::fs::File::create(docker.join("config.json")).unwrap();
    write!(
        file,
        r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
        registry.registry()
    )
    .unwrap();
    let with_config = client(&[("DOCKER_CONFIG", docker.display().to_string())]);
    assert!(with_config.transport().warnings().is_empty());
    let dest = work.path().join("by-config");
    let pulled = with_config
        .pull_tree(&repository, &tag, &dest)
        .unwrap()
        .unwrap();
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);
    assert!(dest.join("SKILL.md").is_file());
    // HOME/.docker/config.json is read when DOCKER_CONFIG is unset.
    let home = work.path().join("home");
    std::fs::create_dir_all(home.join(".docker")).unwrap();
    std::fs::copy(docker.join("config.json"), home.join(".docker/config.json")).unwrap();
    let with_home = client(&[("HOME", home.display().to_string())]);
    assert_eq!(
        with_home.resolve(&repository, &tag).unwrap().as_deref(),
        Some(pushed.manifest_digest.as_str())
    );
}

/// Pushes a hand-made image (config + one layer) with the `oci-client` crate directly (also used by
/// `oci_package`).
pub(crate) fn push_raw_image(
    registry: &TestRegistry,
    repository: &str,
    tag: &str,
    config: (&str, &[u8]),
    layer: (&str, &[u8]),
) {
    use oci_client::client::{ClientConfig, ClientProtocol};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference =
        oci_client::Reference::with_tag(registry.registry(), repository.to_owned(), tag.to_owned());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": config.0, "digest": sha256_digest(config.1), "size": config.1.len()},
        "layers": [{"mediaType": layer.0, "digest": sha256_digest(layer.1), "size": layer.1.len()}],
    });
    runtime.block_on(async {
        let auth = oci_client::secrets::RegistryAuth::Anonymous;
        client
            .auth(&reference, &auth, oci_client::RegistryOperation::Push)
            .await
            .unwrap();
        client
            .push_blob(&reference, config.1.to_vec(), &sha256_digest(config.1))
            .await
            .unwrap();
        client
            .push_blob(&reference, layer.1.to_vec(), &sha256_digest(layer.1))
            .await
            .unwrap();
        client
            .push_manifest_raw(
                &reference,
                serde_json::to_vec(&manifest).unwrap(),
                http::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
            )
            .await
            .unwrap();
    });
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// A tar+gzip layer of `(path, content, mode)` files.
pub(crate) fn tar_gz(entries: &[(&str, &str, u32)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content, mode) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(*mode);
        header.set_cksum();
        builder
            .append_data(&mut header, name, content.as_bytes())
            .unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&tar).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn plain_images_with_one_tar_layer_are_read_and_foreign_media_types_refused() {
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let work = tempfile::tempdir().unwrap();
    let client = client(&[]);
    let image_config = ("application/vnd.oci.image.config.v1+json", &b"{}"[..]);

    // A plain tar+gzip layer holding `pdf/` (one top-level directory) is the skill.
    let layer = tar_gz(&[
        (
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: x\n---\n",
            0o644,
        ),
        ("pdf/tool.sh", "#!/bin/sh\n", 0o755),
    ]);
    push_raw_image(
        &registry,
        "plain/pdf",
        "1.0",
        image_config,
        ("application/vnd.oci.image.layer.v1.tar+gzip", &layer),
    );
    let dest = work.path().join("pdf");
    let pulled = client
        .pull_tree(
            &repo(&registry, "plain/pdf"),
            &OciReference::Tag("1.0".into()),
            &dest,
        )
        .unwrap()
        .unwrap();
    assert_eq!(pulled.config, None);
    assert_eq!(
        pulled.layer_media_type,
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    assert_eq!(pulled.executables, ["tool.sh"]);
    assert!(dest.join("SKILL.md").is_file());
    assert!(
        !dest.join("pdf").exists(),
        "the single top-level directory is the package"
    );

    // A plain tar layer with the skill at its root, and a tar+zstd one, are read too.
    let skill = [
        ("SKILL.md", "---\nname: pdf\ndescription: x\n---\n", 0o644),
        ("bin/run", "#!/bin/sh\n", 0o755),
    ];
    let tar = gunzip(&tar_gz(&skill));
    let tar_zstd = zstd::encode_all(&tar[..], 3).unwrap();
    for (name, media_type, bytes) in [
        ("plain/tar", "application/vnd.oci.image.layer.v1.tar", &tar),
        (
            "plain/zstd",
            "application/vnd.oci.image.layer.v1.tar+zstd",
            &tar_zstd,
        ),
    ] {
        push_raw_image(&registry, name, "1", image_config, (media_type, bytes));
        let dest = work.path().join(name.replace('/', "-"));
        let pulled = client
            .pull_tree(
                &repo(&registry, name),
                &OciReference::Tag("1".into()),
                &dest,
            )
            .unwrap()
            .unwrap();
        assert_eq!(pulled.config, None);
        assert_eq!(pulled.layer_media_type, media_type);
        assert_eq!(pulled.executables, ["bin/run"], "{name}");
        assert!(dest.join("SKILL.md").is_file(), "{name}");
    }

    // A foreign layer media type is refused, named; nothing is written.
    push_raw_image(
        &registry,
        "charts/web",
        "0.1.0",
        ("application/vnd.cncf.helm.config.v1+json", b"{}"),
        (
            "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
            &layer,
        ),
    );
    let dest = work.path().join("chart");
    let error = client
        .pull_tree(
            &repo(&registry, "charts/web"),
            &OciReference::Tag("0.1.0".into()),
            &dest,
        )
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, OciError::UnsupportedMediaType { .. }),
        "{message}"
    );
    assert!(
        message.contains("application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
        "{message}"
    );
    assert!(message.contains("/charts/web:0.1.0"), "{message}");
    assert!(!dest.exists());

    // A tar layer without a skill or plugin directory is refused.
    let not_a_package = tar_gz(&[("README.md", "hello", 0o644)]);
    push_raw_image(
        &registry,
        "plain/readme",
        "1",
        image_config,
        (
            "application/vnd.oci.image.layer.v1.tar+gzip",
            &not_a_package,
        ),
    );
    let dest = work.path().join("readme");
    let message = client
        .pull_tree(
            &repo(&registry, "plain/readme"),
            &OciReference::Tag("1".into()),
            &dest,
        )
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("no skill or plugin directory"),
        "{message}"
    );
    assert!(!dest.exists());
    let leftovers: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".oci-pull-"))
        .collect();
    assert!(leftovers.is_empty(), "work directories are removed");

    // A layer with a path escaping the tree is refused by the extraction rules.
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    header.as_gnu_mut().unwrap().name[..9].copy_from_slice(b"../SKILL.");
    header.set_cksum();
    builder.append(&header, &b"x"[..]).unwrap();
    let evil = builder.into_inner().unwrap();
    push_raw_image(
        &registry,
        "plain/evil",
        "1",
        image_config,
        ("application/vnd.oci.image.layer.v1.tar", &evil),
    );
    let message = client
        .pull_tree(
            &repo(&registry, "plain/evil"),
            &OciReference::Tag("1".into()),
            &work.path().join("evil"),
        )
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("cannot unpack the layer") && message.contains(".."),
        "{message}"
    );
    assert!(!work.path().join("SKILL.").exists());
}

#[test]
fn an_unreachable_registry_is_named_after_the_retries() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut transport = OciTransport::from_env(&env(&[]));
    transport.retries = 2;
    transport.backoff = std::time::Duration::from_millis(10);
    let client = OciClient::new(transport).unwrap();
    let repository: OciRepository = format!("oci://127.0.0.1:{port}/a").parse().unwrap();
    let started = std::time::Instant::now();
    let error = client
        .resolve(&repository, &OciReference::Tag("x".into()))
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, OciError::Unreachable { .. }), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    // Two retries waited 10 ms and 20 ms.
    assert!(started.elapsed() >= std::time::Duration::from_millis(30));
}

#[test]
fn server_errors_are_retried_with_backoff_then_named() {
    use std::io::{BufRead as _, BufReader};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            if request_line.starts_with("GET /v2/a/manifests/x ") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
            );
        }
    });
    let mut transport = OciTransport::from_env(&env(&[]));
    transport.retries = 2;
    transport.backoff = std::time::Duration::from_millis(10);
    let client = OciClient::new(transport).unwrap();
    let repository: OciRepository = format!("oci://127.0.0.1:{port}/a").parse().unwrap();
    let message = client
        .resolve(&repository, &OciReference::Tag("x".into()))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("503") && message.contains(&format!("127.0.0.1:{port}")),
        "{message}"
    );
    // The first attempt and two retries, each ending in a GET of the manifest.
    assert_eq!(requests.load(Ordering::SeqCst), 3);
}

#[test]
fn bearer_token_registries_are_asked_for_a_token_at_the_realm_of_their_challenge() {
    use agentpack_test_support::registry::TokenAuthProxy;
    if !registry_available() {
        return;
    }
    let registry = TestRegistry::start();
    let proxy = TokenAuthProxy::start(&registry, "ci-bot", "s3cret-pw", true);
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    skill_tree(&tree);
    let config = config_of(&tree, &["scripts/run.sh"]);
    let repository: OciRepository = proxy.repository_url("team/cache").parse().unwrap();
    let tag = OciReference::Tag("1.0.0".into());

    // Anonymous: a pull-only token, so the push is refused saying what to set.
    let message = client(&[])
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("requires credentials") && message.contains("AGENTPACK_OCI_TOKEN"),
        "{message}"
    );
    // Wrong credentials: the token endpoint refuses them; the password is never shown.
    let message = client(&[("AGENTPACK_OCI_TOKEN", "ci-bot:wrong-pw-123".into())])
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap_err()
        .to_string();
    assert!(message.contains("not accepted"), "{message}");
    assert!(!message.contains("wrong-pw-123"), "{message}");

    // user:password: the token endpoint of the challenge is asked with them, the registry then
    // sees only the bearer token.
    proxy.reset();
    let pushed = client(&[("AGENTPACK_OCI_TOKEN", "ci-bot:s3cret-pw".into())])
        .push_tree(&repository, "1.0.0", &tree, &config)
        .unwrap();
    assert_eq!(pushed.uploaded_blobs, 2);
    let log = proxy.requests();
    assert!(
        log.iter()
            .any(|r| r.path.starts_with("/token") && r.auth == "basic" && r.answered == Some(200)),
        "{log:#?}"
    );
    let forwarded: Vec<_> = log.iter().filter(|r| r.answered.is_none()).collect();
    assert!(!forwarded.is_empty(), "{log:#?}");
    assert!(
        forwarded.iter().all(|r| r.auth == "bearer-push"),
        "every forwarded call carries the token, never the password: {log:#?}"
    );

    // Anonymous pull: the realm hands out a pull token without credentials.
    proxy.reset();
    let dest = work.path().join("pulled");
    let pulled = client(&[])
        .pull_tree(&repository, &tag, &dest)
        .unwrap()
        .unwrap();
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);
    assert_eq!(pulled.executables, ["scripts/run.sh"]);
    let log = proxy.requests();
    assert!(
        log.iter()
            .any(|r| r.path.starts_with("/token") && r.auth == "none" && r.answered == Some(200)),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .filter(|r| r.answered.is_none())
            .all(|r| r.auth == "bearer-pull"),
        "{log:#?}"
    );
    // A bare AGENTPACK_OCI_TOKEN is sent as the bearer token itself.
    proxy.reset();
    let with_token = client(&[("AGENTPACK_OCI_TOKEN", "push-token-7f3a".into())]);
    assert_eq!(
        with_token.resolve(&repository, &tag).unwrap().as_deref(),
        Some(pushed.manifest_digest.as_str())
    );
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.answered.is_none() && r.auth == "bearer-push"),
        "{:#?}",
        proxy.requests()
    );
}
