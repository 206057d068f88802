//! npm MCP server trees through substituters, end to end: the real `agentpack` binary, an npm
//! registry on 127.0.0.1, real npm and node, and a real OCI registry (Debian's `docker-registry`).
//! Machine A locks a project with an npx server, syncs, starts it and `store push`es: the tree's
//! artifact holds the tarballs its lock records pin. Machine B (a fresh `AGENTPACK_HOME`, the npm
//! registry stopped) syncs and starts the server from the OCI cache alone and unpacks the same
//! tree store path; a tarball replaced in the cache is refused naming the package, and the npm
//! registry serves that one instead.

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_builders::oci::{
    identity_tag, ArtifactConfig, ArtifactKind, OciClient, OciReference, OciTransport,
};
use agentpack_builders::substitute_npm::tarball_file_name;
use agentpack_lockfile::Lockfile;
use agentpack_test_support::{
    agentpack_bin, registry::registry_available, IsolatedHome, NpmPackage, NpmRegistry,
    TestRegistry,
};
use serde_json::{json, Value};

const CACHE: &str = "team/npm-cache";

fn npm_registry() -> NpmRegistry {
    let registry = NpmRegistry::start();
    registry.publish(NpmPackage::new("dep-b", "1.0.0").file(
        "index.js",
        "module.exports = 'dep-b';\n",
        false,
    ));
    registry.publish(
        NpmPackage::new("@demo/mcp", "1.1.0")
            .dependency("dep-b", "^1.0.0")
            .bin_script("demo-mcp", "#!/usr/bin/env node\nconsole.log(JSON.stringify({argv: process.argv.slice(2), b: require('dep-b')}));\n"),
    );
    registry
}

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

    fn run(&self, args: &[&str]) -> Output {
        let mut command = self.home.command(&agentpack_bin(), None);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command.args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> (String, String) {
        let output = self.run(args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "agentpack {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        (stdout, stderr)
    }

    fn lock(&self) -> Lockfile {
        Lockfile::load(&self.home.project.join("pack.lock")).unwrap()
    }

    fn same_project_as(&self, other: &Machine) {
        for file in ["agentpack.toml", "pack.lock"] {
            std::fs::copy(other.home.project.join(file), self.home.project.join(file)).unwrap();
        }
    }

    /// The `--spec` of the staged config that starts `demo` through `mcp-exec`.
    fn staged_spec(&self) -> String {
        let generation =
            std::fs::canonicalize(self.home.staging_root.join("modes/default")).unwrap();
        let mut files = Vec::new();
        json_files(&generation, &mut files);
        for file in files {
            let Ok(value) = serde_json::from_slice::<Value>(&std::fs::read(&file).unwrap()) else {
                continue;
            };
            if let Some(args) = value["mcpServers"]["demo"]["args"].as_array() {
                if let Some(i) = args.iter().position(|a| a == "--spec") {
                    return args[i + 1].as_str().unwrap().to_owned();
                }
            }
        }
        panic!("no staged config starts `demo` through mcp-exec");
    }

    /// Starts the server (node prints its argv and its dependency); returns stderr.
    fn start_server(&self) -> String {
        let spec = self.staged_spec();
        let (stdout, stderr) = self.ok(&["mcp-exec", "--spec", &spec, "--", "--flag"]);
        let value: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(value, json!({"argv": ["--flag"], "b": "dep-b"}), "{stderr}");
        stderr
    }

    /// The name of the npm-tree store path of the lock's one tree.
    fn tree_store_path(&self) -> String {
        let digest = self.lock().mcp_servers[0].tree_digest.clone().unwrap();
        let hex = digest.strip_prefix("sha256-npm-tree-v1:").unwrap();
        let pointer = self.home.agentpack_home.join("cache/npm-trees").join(hex);
        std::fs::canonicalize(pointer)
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            json_files(&entry.path(), out);
        } else if kind.is_file() && entry.file_name().to_string_lossy().ends_with(".json") {
            out.push(entry.path());
        }
    }
}

/// Machine A: a project with one npx server, locked, synced, started once, pushed.
fn machine_a(npm: &NpmRegistry, oci: &TestRegistry) -> Machine {
    let a = Machine::new(&[]);
    std::fs::write(
        a.home.project.join("agentpack.toml"),
        format!(
            "name = \"demo\"\nversion = \"0.0.1\"\n\n[dependencies]\n\n[mcp.servers.demo]\ncommand = \"npx\"\nargs = [\"-y\", \"@demo/mcp@1.1.0\"]\nenv = {{ npm_config_registry = \"{}\" }}\n",
            npm.url()
        ),
    )
    .unwrap();
    a.ok(&["lock"]);
    a.ok(&["sync"]);
    a.start_server();
    let (stdout, _) = a.ok(&["store", "push", &oci.repository_url(CACHE)]);
    assert!(stdout.contains("pushed  @demo/mcp@1.1.0"), "{stdout}");
    a
}

#[test]
fn machine_b_starts_the_server_from_the_oci_cache_alone_and_unpacks_the_same_tree() {
    if !registry_available() {
        return;
    }
    let npm = npm_registry();
    let oci = TestRegistry::start();
    let a = machine_a(&npm, &oci);
    let tree_a = a.tree_store_path();

    // Pushing again uploads nothing and downloads no tarball.
    let downloads = npm.tarball_requests();
    let (stdout, _) = a.ok(&["store", "push", &oci.repository_url(CACHE), "--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let tree = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "npm-tree")
        .unwrap()
        .clone();
    assert_eq!(tree["status"], "present", "{report}");
    assert_eq!(
        tree["tag"],
        identity_tag(a.lock().mcp_servers[0].tree_digest.as_deref().unwrap())
    );
    assert_eq!(npm.tarball_requests(), downloads);
    // `--all` finds the tree by the mcp-exec spec in the store.
    let (stdout, _) = a.ok(&["store", "push", &oci.repository_url("team/all"), "--all"]);
    assert!(stdout.contains("pushed  @demo/mcp@1.1.0"), "{stdout}");

    drop(npm);
    let cache = oci.repository_url(CACHE);
    let b = Machine::new(&[("AGENTPACK_SUBSTITUTERS", cache.as_str())]);
    b.same_project_as(&a);
    b.ok(&["sync"]);
    let stderr = b.start_server();
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(b.tree_store_path(), tree_a, "the same tree store path");
    assert_eq!(b.lock(), a.lock());

    // Without the substituter the stopped npm registry is all there is: the start fails.
    let c = Machine::new(&[]);
    c.same_project_as(&a);
    c.ok(&["sync"]);
    let spec = c.staged_spec();
    let out = c.run(&["mcp-exec", "--spec", &spec, "--", "--flag"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn a_tampered_tarball_in_the_cache_is_refused_naming_the_package_and_the_registry_serves_it() {
    if !registry_available() {
        return;
    }
    let npm = npm_registry();
    let oci = TestRegistry::start();
    let a = machine_a(&npm, &oci);
    let tree_a = a.tree_store_path();
    let lock = a.lock();
    let record = &lock.mcp_servers[0];
    let digest = record.tree_digest.clone().unwrap();

    // Someone with push rights replaces dep-b's tarball under the tree's identity tag.
    let client = OciClient::new(OciTransport::from_env(&|_| None)).unwrap();
    let repository = oci.repository_url(CACHE).parse().unwrap();
    let work = tempfile::tempdir().unwrap();
    let pulled = work.path().join("tarballs");
    let tag = identity_tag(&digest);
    client
        .pull_tree(&repository, &OciReference::Tag(tag.clone()), &pulled)
        .unwrap()
        .unwrap();
    let dep_b = record
        .tree
        .iter()
        .find(|entry| entry.path == "node_modules/dep-b")
        .unwrap();
    let file = pulled.join(tarball_file_name(&dep_b.integrity).unwrap());
    let mut bytes = std::fs::read(&file).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    client
        .push_tree(
            &repository,
            &tag,
            &pulled,
            &ArtifactConfig {
                kind: ArtifactKind::NpmTree,
                module: "@demo/mcp@1.1.0".to_owned(),
                commit: None,
                content_identity: digest.clone(),
                executables: Vec::new(),
                agentpack_version: "0.0.0".to_owned(),
            },
        )
        .unwrap();

    let cache = oci.repository_url(CACHE);
    let b = Machine::new(&[("AGENTPACK_SUBSTITUTERS", cache.as_str())]);
    b.same_project_as(&a);
    b.ok(&["sync"]);
    let downloads = npm.tarball_requests();
    let stderr = b.start_server();
    assert_eq!(
        stderr
            .matches("refused the tarball of dep-b@1.0.0 in the npm tree of @demo/mcp@1.1.0 from substituter")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("downloading it from the npm registry"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
    assert_eq!(
        npm.tarball_requests(),
        downloads + 1,
        "the registry served dep-b only"
    );
    assert_eq!(b.tree_store_path(), tree_a, "the same tree store path");

    // A registry serving other bytes at push time: that tree is not pushed, and the push fails.
    npm.corrupt_tarball("dep-b", "1.0.0");
    let other = oci.repository_url("team/other");
    let out = a.run(&["store", "push", &other]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("failed  @demo/mcp@1.1.0"), "{stdout}");
    assert!(
        stderr.contains("dep-b@1.0.0")
            && stderr.contains("does not match the integrity in pack.lock"),
        "{stderr}"
    );
    let other = other.parse().unwrap();
    assert_eq!(
        client.resolve(&other, &OciReference::Tag(tag)).unwrap(),
        None
    );
}
