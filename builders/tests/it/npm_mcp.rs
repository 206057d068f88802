//! MCP server pins and locked npm trees against a registry served on 127.0.0.1, with real
//! `npm install --package-lock-only` and real `node`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_builders::mcp_lock::{
    self, publish_exec_specs, record, McpLockError, McpLockOptions,
};
use agentpack_builders::npm::tree::tree_digest;
use agentpack_builders::npm::tree_store::{tree_pointer, NPM_TREES_DIR};
use agentpack_builders::npm::{prepare_exec, McpExecError, TreeStoreError};
use agentpack_harness::render::mcp::McpSource;
use agentpack_harness::{McpServer, MergedServer};
use agentpack_lockfile::{Lockfile, McpStatus};
use agentpack_store::{gc, GcOptions, PlannedFile, Source, Store, StoreOptions, StorePathName};
use agentpack_test_support::npm_registry::unreachable_registry_url;
use agentpack_test_support::{NpmPackage, NpmRegistry};
use serde_json::json;

const SERVER: &str = "@demo/mcp";

struct Fixture {
    registry: NpmRegistry,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn marker(&self) -> PathBuf {
        self.dir.path().join("postinstall-ran")
    }

    fn store(&self) -> Store {
        Store::open(&self.dir.path().join("home/cache"), StoreOptions::default()).unwrap()
    }
}

/// `@demo/mcp` 1.0.0 and 1.1.0 (latest) depending on `dep-b` and `dep-c`; `dep-c` has a
/// postinstall that would create a marker file.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let registry = NpmRegistry::start();
    let marker = dir.path().join("postinstall-ran");
    registry.publish(NpmPackage::new("dep-b", "1.0.0").file(
        "index.js",
        "module.exports = 'dep-b here';\n",
        false,
    ));
    registry.publish(
        NpmPackage::new("dep-c", "2.0.0")
            .field(
                "scripts",
                json!({"postinstall": format!("node -e \"require('fs').writeFileSync('{}', 'ran')\"", marker.display())}),
            )
            .file("index.js", "module.exports = 'dep-c';\n", false),
    );
    for version in ["1.0.0", "1.1.0"] {
        registry.publish(
            NpmPackage::new(SERVER, version)
                .dependency("dep-b", "^1.0.0")
                .dependency("dep-c", "^2.0.0")
                .field("bin", json!({"demo-mcp": "cli.js"}))
                .file(
                    "cli.js",
                    &format!(
                        "#!/usr/bin/env node\nconst b = require('dep-b');\nconsole.log(JSON.stringify({{version: '{version}', argv: process.argv.slice(2), b}}));\n"
                    ),
                    true,
                ),
        );
    }
    Fixture { registry, dir }
}

fn npx_server(name: &str, spec: &str, registry: &str) -> MergedServer {
    let mut server = McpServer {
        command: Some("npx".into()),
        args: vec!["-y".into(), spec.into(), "--headless".into()],
        ..McpServer::default()
    };
    server
        .env
        .insert("npm_config_registry".into(), registry.into());
    server
        .env
        .insert("API_TOKEN".into(), "sk-secret-value".into());
    MergedServer {
        name: name.into(),
        server,
        source: McpSource::Manifest,
    }
}

fn options() -> McpLockOptions {
    McpLockOptions {
        npm: Some(PathBuf::from("npm")),
        ..McpLockOptions::default()
    }
}

fn lock_with(servers: &[MergedServer], old: &Lockfile, options: &McpLockOptions) -> Lockfile {
    let outcome = record(servers, old, options).unwrap();
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    let mut lock = old.clone();
    lock.mcp_servers = outcome.records;
    lock
}

fn spec_path(store: &Store, lock: &Lockfile, servers: &[MergedServer]) -> PathBuf {
    let specs = publish_exec_specs(store, lock, servers).unwrap();
    specs.paths[&servers[0].name].clone()
}

fn run_node(script: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new("node")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn latest_is_pinned_and_the_tree_is_locked_with_integrities() {
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let r = &lock.mcp_servers[0];
    assert_eq!(r.status, McpStatus::Pinned);
    assert_eq!(r.launcher, "npm");
    assert_eq!(r.source, "manifest");
    assert_eq!(r.requested.as_deref(), Some("@demo/mcp@latest"));
    assert_eq!(r.version.as_deref(), Some("1.1.0"));
    assert_eq!(
        r.integrity.as_deref(),
        Some(f.registry.integrity(SERVER, "1.1.0").as_str())
    );
    assert_eq!(r.registry.as_deref(), Some(f.registry.url().as_str()));
    assert_eq!(r.bin.as_deref(), Some("cli.js"));
    let paths: Vec<&str> = r.tree.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "node_modules/@demo/mcp",
            "node_modules/dep-b",
            "node_modules/dep-c"
        ]
    );
    for entry in &r.tree {
        let name = entry.path.trim_start_matches("node_modules/");
        assert_eq!(entry.integrity, f.registry.integrity(name, &entry.version));
    }
    assert_eq!(
        r.tree_digest.as_deref(),
        Some(tree_digest(&r.tree).as_str())
    );
    assert_eq!(lock.lockfile_version(), 4);
    let text = lock.to_toml_string();
    assert!(!text.contains("sk-secret-value"), "{text}");
    assert!(!text.contains("API_TOKEN"), "{text}");
    assert_eq!(
        Lockfile::parse(&text, Path::new("pack.lock")).unwrap(),
        lock
    );
    assert!(!f.marker().exists(), "npm ran a package script");
}

#[test]
fn mcp_exec_starts_from_the_store_reuses_it_and_never_runs_scripts() {
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let store = f.store();
    let spec = spec_path(&store, &lock, &servers);
    assert!(spec.starts_with(store.store_dir()), "{}", spec.display());
    let spec_text = std::fs::read_to_string(&spec).unwrap();
    assert!(!spec_text.contains("sk-secret-value"));

    let first = prepare_exec(&store, &spec).unwrap();
    assert!(first.ready.downloaded);
    assert!(first.script.starts_with(store.store_dir()));
    assert_eq!(f.registry.tarball_requests(), 3);
    let out = run_node(&first.script, &["--headless", "x y"]);
    assert_eq!(out["version"], "1.1.0");
    assert_eq!(out["argv"], json!(["--headless", "x y"]));
    assert_eq!(out["b"], "dep-b here");
    assert!(!f.marker().exists(), "a postinstall script ran");
    assert!(first
        .ready
        .tree
        .path()
        .join("node_modules/dep-c/index.js")
        .is_file());

    let second = prepare_exec(&store, &spec).unwrap();
    assert!(!second.ready.downloaded);
    assert_eq!(second.ready.tree.name(), first.ready.tree.name());
    assert_eq!(
        f.registry.tarball_requests(),
        3,
        "a later start downloads nothing"
    );
}

#[test]
fn a_corrupted_tarball_is_refused_before_anything_is_written() {
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@1.0.0", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let store = f.store();
    let spec = spec_path(&store, &lock, &servers);
    f.registry.corrupt_tarball("dep-b", "1.0.0");
    let err = prepare_exec(&store, &spec).unwrap_err();
    assert!(
        matches!(err, McpExecError::Tree(TreeStoreError::Integrity { ref package, .. }) if package == "dep-b"),
        "{err}"
    );
    assert!(
        err.to_string().contains("does not match the integrity"),
        "{err}"
    );
    assert!(!store.cache_dir().join(NPM_TREES_DIR).exists());
    let published: Vec<String> = std::fs::read_dir(store.store_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("npm-tree"))
        .collect();
    assert!(published.is_empty(), "{published:?}");

    f.registry.restore_tarball("dep-b", "1.0.0");
    let ready = prepare_exec(&store, &spec).unwrap();
    assert_eq!(run_node(&ready.script, &[])["version"], "1.0.0");
}

#[test]
fn an_unreachable_registry_fails_or_records_unpinned_when_allowed() {
    let servers = [npx_server(
        "demo",
        "@demo/mcp@latest",
        &unreachable_registry_url(),
    )];
    let err = record(&servers, &Lockfile::default(), &options()).unwrap_err();
    assert!(matches!(err, McpLockError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("--allow-unpinned-mcp"), "{err}");

    let allowed = McpLockOptions {
        allow_unpinned: true,
        ..options()
    };
    let out = record(&servers, &Lockfile::default(), &allowed).unwrap();
    let r = &out.records[0];
    assert_eq!(r.status, McpStatus::Unpinned);
    assert!(r.allow_unpinned);
    assert!(r.version.is_none() && r.tree.is_empty());

    let tolerant = McpLockOptions {
        tolerate_unreachable: true,
        ..options()
    };
    let out = record(&servers, &Lockfile::default(), &tolerant).unwrap();
    assert!(out.records.is_empty());
    assert!(out.warnings[0].contains("`demo`"), "{:?}", out.warnings);
}

#[test]
fn lock_keeps_the_version_update_moves_it_and_a_changed_integrity_fails() {
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let locked = lock_with(&servers, &Lockfile::default(), &options());
    f.registry.publish(
        NpmPackage::new(SERVER, "1.2.0")
            .dependency("dep-b", "^1.0.0")
            .field("bin", "cli.js".into())
            .file("cli.js", "console.log('{}')\n", false),
    );
    let before = f.registry.requests().len();
    let kept = lock_with(&servers, &locked, &options());
    assert_eq!(kept, locked, "a plain lock keeps the recorded version");
    assert_eq!(f.registry.requests().len(), before, "and asks no registry");

    let update = McpLockOptions {
        update: true,
        ..options()
    };
    let moved = lock_with(&servers, &locked, &update);
    assert_eq!(moved.mcp_servers[0].version.as_deref(), Some("1.2.0"));
    assert_eq!(moved.mcp_servers[0].tree.len(), 2);

    f.registry
        .set_integrity(SERVER, "1.2.0", "sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==");
    let err = record(&servers, &moved, &update).unwrap_err();
    assert!(
        matches!(err, McpLockError::IntegrityChanged { .. }),
        "{err}"
    );
}

#[test]
fn an_edited_definition_is_stale_and_ranges_stay_unpinned() {
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let mut edited = servers[0].clone();
    edited.server.args.push("--more".into());
    assert!(mcp_lock::current_record(&lock, &servers[0]).is_some());
    assert!(mcp_lock::current_record(&lock, &edited).is_none());
    let warning = mcp_lock::unlocked_warning(&lock, std::slice::from_ref(&edited)).unwrap();
    assert!(warning.contains("demo"), "{warning}");

    let ranged = [npx_server("r", "@demo/mcp@^1.0", &f.registry.url())];
    let out = record(&ranged, &Lockfile::default(), &options()).unwrap();
    assert_eq!(out.records[0].status, McpStatus::Unpinned);
    let bunx = MergedServer {
        server: McpServer {
            command: Some("bunx".into()),
            ..servers[0].server.clone()
        },
        ..servers[0].clone()
    };
    let out = record(
        std::slice::from_ref(&bunx),
        &Lockfile::default(),
        &options(),
    )
    .unwrap();
    assert_eq!(out.records[0].status, McpStatus::Pinned);
    assert!(
        out.records[0].tree.is_empty(),
        "bunx is pinned at the top level only"
    );
    let lock = Lockfile {
        mcp_servers: out.records,
        ..Lockfile::default()
    };
    let launches = mcp_lock::launches_for(
        &lock,
        std::slice::from_ref(&bunx),
        Path::new("/bin/agentpack"),
        &Default::default(),
    );
    assert_eq!(
        launches["demo"].args,
        vec!["-y", "@demo/mcp@1.1.0", "--headless"]
    );
}

#[test]
fn two_projects_share_one_tree_and_gc_keeps_it_while_referenced() {
    let f = fixture();
    let a = [npx_server("alpha", "@demo/mcp@1.1.0", &f.registry.url())];
    let b = [npx_server("beta", "@demo/mcp@latest", &f.registry.url())];
    let lock_a = lock_with(&a, &Lockfile::default(), &options());
    let lock_b = lock_with(&b, &Lockfile::default(), &options());
    assert_eq!(
        lock_a.mcp_servers[0].tree_digest,
        lock_b.mcp_servers[0].tree_digest
    );
    let tree_name = {
        let store = f.store();
        let first = prepare_exec(&store, &spec_path(&store, &lock_a, &a)).unwrap();
        let second = prepare_exec(&store, &spec_path(&store, &lock_b, &b)).unwrap();
        assert!(first.ready.downloaded && !second.ready.downloaded);
        assert_eq!(first.ready.tree.path(), second.ready.tree.path());
        assert_eq!(f.registry.tarball_requests(), 3);
        first.ready.tree.name().clone()
    };
    let digest = lock_a.mcp_servers[0].tree_digest.clone().unwrap();
    let pointer = tree_pointer(&f.store(), &digest);

    // A running server's lease (mcp-exec takes one for its pid) keeps the tree.
    let store = f.store();
    let lease = store
        .acquire_lease(
            &[store.get(&tree_name).unwrap()],
            agentpack_store::LeaseOptions::default(),
        )
        .unwrap();
    drop(store);
    let store = f.store();
    gc(&store, GcOptions::default()).unwrap();
    assert!(store.get(&tree_name).is_some());
    store.release_lease(&lease).unwrap();
    drop(store);

    // Nothing refers to it any more (the cache pointer only finds it): GC removes it.
    assert!(pointer.exists(), "the pointer alone is not a root");
    let store = f.store();
    let report = gc(&store, GcOptions::default()).unwrap();
    assert!(store.get(&tree_name).is_none(), "{report:?}");
    drop(store);

    // A start unpacks it again; a generation that stages the server references the spec, which
    // references the tree.
    let store = f.store();
    let again = prepare_exec(&store, &spec_path(&store, &lock_a, &a)).unwrap();
    assert!(again.ready.downloaded);
    assert_eq!(again.ready.tree.name(), &tree_name);
    let specs = publish_exec_specs(&store, &lock_a, &a).unwrap();
    let generation = store
        .publish_files(
            &StorePathName::from_inputs(b"generation", "generation-default"),
            &[PlannedFile::new("x", Source::Bytes(b"x".to_vec()), false)],
            &specs.references,
        )
        .unwrap();
    store
        .add_generation_root("project/default", &generation)
        .unwrap();
    drop(store);

    // Without the cache pointer, the generation alone keeps the tree.
    std::fs::remove_file(&pointer).unwrap();
    let store = f.store();
    let report = gc(&store, GcOptions::default()).unwrap();
    assert!(store.get(&tree_name).is_some(), "{report:?}");
}

#[test]
fn staged_configs_carry_the_exact_version_or_mcp_exec() {
    use agentpack_builders::generation::{build_generation, GenerationInputs};
    use agentpack_harness::ModeFilter;

    let f = fixture();
    let npx = npx_server("tree", "@demo/mcp@latest", &f.registry.url());
    let mut bunx = npx_server("top", "@demo/mcp@latest", &f.registry.url());
    bunx.server.command = Some("bunx".into());
    let servers = [npx.clone(), bunx.clone()];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let store = f.store();
    let exe = Path::new("/opt/agentpack/bin/agentpack");
    let prepared = mcp_lock::prepare_launches(&store, &lock, &servers, exe).unwrap();
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert_eq!(prepared.references.len(), 1);

    let inputs = GenerationInputs {
        mode_name: "default".into(),
        mode_dir: "default".into(),
        mode: ModeFilter::default(),
        mode_selectors: Vec::new(),
        packages: Vec::new(),
        overlay: None,
        mcp_servers: servers
            .iter()
            .map(|s| (s.name.clone(), s.server.clone()))
            .collect(),
        mcp_launch: prepared.launches.clone(),
        keep_attribution: false,
        yolo: false,
        agentpack_exe: exe.to_path_buf(),
        plugin_data_root: f.dir.path().join("plugin-data"),
        extra_references: prepared.references.clone(),
        listings: Default::default(),
    };
    let generation = build_generation(&store, &inputs).unwrap();
    // The generation keeps the exec spec (and through it the npm tree) alive for GC.
    let meta = store.meta(&generation.path).unwrap();
    assert!(
        meta.references
            .iter()
            .any(|r| r == prepared.references[0].name().as_str()),
        "{:?}",
        meta.references
    );
    let mut staged = String::new();
    for entry in walkdir::WalkDir::new(generation.path.path()) {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && (name.ends_with("mcp.json") || name == ".mcp.json") {
            staged.push_str(&std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    assert!(!staged.is_empty(), "no staged MCP config found");
    assert!(staged.contains("@demo/mcp@1.1.0"), "{staged}");
    assert!(!staged.contains("@demo/mcp@latest"), "{staged}");
    assert!(staged.contains("mcp-exec"), "{staged}");
    assert!(staged.contains("/opt/agentpack/bin/agentpack"), "{staged}");
}

#[test]
fn a_tree_damaged_in_the_cache_is_unpacked_again_from_checked_tarballs() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let store = f.store();
    let spec = spec_path(&store, &lock, &servers);
    let first = prepare_exec(&store, &spec).unwrap();
    let file = first.ready.tree.path().join("node_modules/dep-b/index.js");
    let dir = file.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::fs::write(
        &file,
        "module.exports = 'edited in the cache, longer than before';\n",
    )
    .unwrap();
    drop(store);

    let store = f.store();
    let again = prepare_exec(&store, &spec).unwrap();
    assert!(again.ready.downloaded, "the damaged tree was not noticed");
    assert_eq!(f.registry.tarball_requests(), 6);
    assert_eq!(run_node(&again.script, &[])["b"], "dep-b here");
}

#[test]
fn unpacking_refuses_parent_paths_and_never_writes_links() {
    use agentpack_builders::npm::tree_store::unpack_tarball;
    use agentpack_test_support::RawTar;
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("node_modules/x");

    let escaping = RawTar::new()
        .file("package/ok.js", "1")
        .file("package/../../escaped.js", "2")
        .finish_gz();
    let err = unpack_tarball(&escaping, &dest).unwrap_err();
    assert!(err.contains("leaves the package"), "{err}");
    assert!(!dir.path().join("escaped.js").exists());
    assert!(!dir.path().join("node_modules/escaped.js").exists());

    let links = RawTar::new()
        .file_mode("package/bin.js", "x", 0o755)
        .symlink("package/out", "/etc")
        .hardlink("package/hard", "/etc/passwd")
        .file("other-root/index.js", "y")
        .finish_gz();
    unpack_tarball(&links, &dest).unwrap();
    assert!(dest.join("bin.js").is_file());
    assert!(
        dest.join("index.js").is_file(),
        "any first component is dropped"
    );
    assert!(std::fs::symlink_metadata(dest.join("out")).is_err());
    assert!(std::fs::symlink_metadata(dest.join("hard")).is_err());
}

/// The order a user goes through: sync publishes the spec before any start, `mcp-exec` unpacks
/// the tree later, `gc` runs, and the next start works with the registry down. The spec path
/// (and so the generation) is the same before and after the first start.
#[test]
fn a_generation_synced_before_the_first_start_keeps_the_tree_it_downloads() {
    use agentpack_builders::npm::tree_store::tree_root_name;
    use agentpack_builders::npm::ExecSpec;

    let f = fixture();
    let servers = [npx_server("demo", "@demo/mcp@latest", &f.registry.url())];
    let lock = lock_with(&servers, &Lockfile::default(), &options());
    let spec = ExecSpec::from_record(&lock.mcp_servers[0]).unwrap();
    let (spec_file, spec_name) = {
        // Sync: nothing is downloaded yet.
        let store = f.store();
        let specs = publish_exec_specs(&store, &lock, &servers).unwrap();
        assert!(store.get(&tree_root_name(&spec)).is_none());
        let generation = store
            .publish_files(
                &StorePathName::from_inputs(b"generation", "generation-default"),
                &[PlannedFile::new("x", Source::Bytes(b"x".to_vec()), false)],
                &specs.references,
            )
            .unwrap();
        store
            .add_generation_root("project/default", &generation)
            .unwrap();
        (
            specs.paths["demo"].clone(),
            specs.references[0].name().clone(),
        )
    };
    let tree_name = {
        // The first start.
        let store = f.store();
        let first = prepare_exec(&store, &spec_file).unwrap();
        assert!(first.ready.downloaded);
        first.ready.tree.name().clone()
    };
    {
        // A sync after the start publishes the same spec path.
        let store = f.store();
        let specs = publish_exec_specs(&store, &lock, &servers).unwrap();
        assert_eq!(specs.references[0].name(), &spec_name);
    }
    let store = f.store();
    let report = gc(&store, GcOptions::default()).unwrap();
    assert!(store.get(&tree_name).is_some(), "{report:?}");
    drop(store);

    let requests = f.registry.tarball_requests();
    drop(f.registry);
    let store = Store::open(&f.dir.path().join("home/cache"), StoreOptions::default()).unwrap();
    let again = prepare_exec(&store, &spec_file).unwrap();
    assert!(!again.ready.downloaded, "downloaded again after gc");
    assert_eq!(run_node(&again.script, &[])["b"], "dep-b here");
    assert_eq!(requests, 3);
}
