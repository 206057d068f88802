//! The docs' Integrity page through the binary: every malformed `content_hash` and an inconsistent
//! entry stop every command with the documented message and nothing is rewritten; a store file changed
//! in place is found by `store verify` and restored by `--repair`; no secret enters the store.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;
use std::process::Output;

use agentpack_test_support::IsolatedHome;

fn run(home: &IsolatedHome, args: &[&str]) -> Output {
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    home.command(&bin, None).args(args).output().unwrap()
}

fn ok(home: &IsolatedHome, args: &[&str]) -> String {
    let output = run(home, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{args:?}: {text}");
    text
}

const GOOD_HASH: &str =
    "sha256-tree-v1:9041ba9000000000000000000000000000000000000000000000000000000000";

fn lock_with(content_hash: &str, commit: &str, cache_key: &str) -> String {
    format!(
        "lockfile_version = 3\n\n[meta]\nname = \"p\"\nversion = \"0.0.1\"\n\n[[packages]]\nmodule = \"github.com/acme/skills/demo\"\ndirect = true\nkind = \"skill\"\nurl = \"https://github.com/acme/skills/tree/{commit}/demo\"\nowner = \"acme\"\nrepo = \"skills\"\npath = \"demo\"\ncommit = \"{commit}\"\ncache_key = \"{cache_key}\"\ncontent_hash = \"{content_hash}\"\n"
    )
}

/// The cache_key of github.com/acme/skills/demo at `commit` (ADDENDUM's formula).
fn cache_key(commit: &str) -> String {
    use sha2::{Digest as _, Sha256};
    hex::encode(Sha256::digest(
        format!("github:acme/skills\0demo\0{commit}").as_bytes(),
    ))
}

#[test]
fn malformed_content_hashes_and_inconsistent_entries_are_refused_unchanged() {
    let home = IsolatedHome::new();
    // An empty [dependencies]: the lock is authoritative, as for a hand-written lock.
    std::fs::write(
        home.project.join("agentpack.toml"),
        "name = \"p\"\nversion = \"0.0.1\"\n\n[dependencies]\n",
    )
    .unwrap();
    let commit = "8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d";
    let key = cache_key(commit);
    let bad_hashes = [
        "md5-tree-v1:9041ba9000000000000000000000000000000000000000000000000000000000",
        "9041ba9000000000000000000000000000000000000000000000000000000000",
        "sha256-tree-v1:9041ba90",
        "sha256-tree-v1:9041BA9000000000000000000000000000000000000000000000000000000000",
        "",
    ];
    for bad in bad_hashes {
        let lock = lock_with(bad, commit, &key);
        std::fs::write(home.project.join("pack.lock"), &lock).unwrap();
        for args in [&["sync"][..], &["lock"][..], &["sync", "--verify-only"][..]] {
            let output = run(&home, args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{args:?} accepted {bad:?}");
            assert!(output.stdout.is_empty());
            assert!(
                stderr.contains("invalid content_hash in pack.lock: github.com/acme/skills/demo"),
                "{stderr}"
            );
            assert!(stderr.contains(&format!("found     \"{bad}\"")), "{stderr}");
            assert!(
                stderr.contains("expected  sha256-tree-v1:<64 lowercase hex digits>"),
                "{stderr}"
            );
            assert!(stderr.contains("lockfile  "), "{stderr}");
            assert_eq!(
                std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
                lock,
                "{args:?} rewrote the lock"
            );
        }
    }
    // A hand-edited commit no longer matches its cache_key.
    let lock = lock_with(GOOD_HASH, "1111111111111111111111111111111111111111", &key);
    std::fs::write(home.project.join("pack.lock"), &lock).unwrap();
    for args in [&["sync"][..], &["lock"][..]] {
        let output = run(&home, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains("inconsistent pack.lock entry: github.com/acme/skills/demo"),
            "{stderr}"
        );
        assert!(
            stderr.contains("(the cache_key of that commit)"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(home.project.join("pack.lock")).unwrap(),
            lock
        );
    }
    assert!(
        !home.staging_root.join("modes/default").exists(),
        "nothing was staged"
    );
}

#[test]
fn store_verify_finds_and_repairs_a_file_changed_in_place() {
    let home = IsolatedHome::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    ok(&home, &["init"]);
    ok(
        &home,
        &["add", examples.join("review-plugin").to_str().unwrap()],
    );
    ok(&home, &["store", "verify"]);
    let info = ok(&home, &["store", "info", "--json"]);
    assert!(info.contains("\"dedup_ratio\""), "{info}");

    // A second project shares the blob; then an editor appends to the first one's staged file.
    let staged = home
        .staging_root
        .join("modes/default/plugins/agentpack-bundle/commands/review.md");
    let real = std::fs::canonicalize(&staged).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut text = std::fs::read_to_string(&real).unwrap();
    text.push_str("appended\n");
    std::fs::write(&real, text).unwrap();

    let output = run(&home, &["store", "verify"]);
    assert!(!output.status.success(), "verify reports the damage");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("damaged"), "{said}");
    let output = run(&home, &["store", "verify", "--json"]);
    assert!(
        !output.status.success() && output.stdout.is_empty(),
        "a refusal is not JSON"
    );

    ok(&home, &["store", "verify", "--repair"]);
    ok(&home, &["sync"]);
    ok(&home, &["store", "verify"]);
    ok(&home, &["sync", "--verify-only"]);
}

#[test]
fn no_secret_enters_the_store() {
    let home = IsolatedHome::new();
    let sentinel = "sk-SENTINEL-7f3a9c";
    std::fs::write(
        home.project.join("agentpack.toml"),
        format!(
            "name = \"p\"\nversion = \"0.0.1\"\n\n[dependencies]\n\n[mcp.servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval\"]\nenv = {{ API_KEY = \"{sentinel}\" }}\n\n[mcp.servers.remote]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = {{ Authorization = \"Bearer {sentinel}\" }}\n"
        ),
    )
    .unwrap();
    ok(&home, &["sync"]);
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    assert!(generation
        .join("plugins/agentpack-bundle/.mcp.json")
        .is_file());
    let mut stack = vec![home.agentpack_home.clone()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                files += 1;
                let bytes = std::fs::read(entry.path()).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(sentinel),
                    "the secret is in {}",
                    entry.path().display()
                );
            }
        }
    }
    assert!(files > 10, "the store was searched ({files} files)");
}
