//! The docs' Integrity page through the binary: every malformed `content_hash` and an inconsistent
//! entry stop every command with the documented message and nothing is rewritten; a store file changed
//! in place is found by `store verify` and restored by `--repair`; no secret enters the store.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;
use std::process::Output;

use agentpack_test_support::IsolatedHome;

fn run(home: &IsolatedHome, args: &[&str]) -> Output {
    home.agentpack(args).output().unwrap()
}

/// Runs `agentpack args`, asserts success and returns stdout and stderr.
fn ok(home: &IsolatedHome, args: &[&str]) -> String {
    home.ok(args).text()
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
    let text = ok(&home, &["store", "info"]);
    assert!(text.contains("link mode    auto"), "{text}");
    assert!(
        !text.contains('{') && !text.contains("Some(") && !text.contains("Kind"),
        "plain words, not debug output: {text}"
    );

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
            "name = \"p\"\nversion = \"0.0.1\"\n\n[dependencies]\n\n[mcp.servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval\"]\nenv = {{ API_KEY = \"{sentinel}\", DATABASE_URL = 'postgres://app:{sentinel}-env@${{DB_HOST}}/app' }}\n\n[mcp.servers.remote]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = {{ Authorization = \"Bearer {sentinel}\" }}\n\n[mcp.servers.templated]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = {{ Authorization = 'Bearer {sentinel}_TPL_${{TOK}}' }}\n"
        ),
    )
    .unwrap();
    ok(&home, &["sync"]);
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    let mcp =
        std::fs::read_to_string(generation.join("plugins/agentpack-bundle/.mcp.json")).unwrap();
    assert!(
        mcp.contains("${AGENTPACK_MCP_RETRIEVAL_DATABASE_URL}")
            && mcp.contains("${AGENTPACK_MCP_TEMPLATED_HEADER_AUTHORIZATION}"),
        "{mcp}"
    );
    let files = assert_not_under(&home.agentpack_home, sentinel);
    assert!(files > 10, "the store was searched ({files} files)");
}

/// Panics when a regular file under `root` holds `needle`; returns how many files were read.
fn assert_not_under(root: &Path, needle: &str) -> usize {
    let mut stack = vec![root.to_path_buf()];
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
                    !String::from_utf8_lossy(&bytes).contains(needle),
                    "the secret is in {}",
                    entry.path().display()
                );
            }
        }
    }
    files
}

fn write_servers(home: &IsolatedHome, servers: &str) {
    std::fs::write(
        home.project.join("agentpack.toml"),
        format!("name = \"p\"\nversion = \"0.0.1\"\n\n[dependencies]\n\n{servers}"),
    )
    .unwrap();
}

/// The selected generation and its staged Claude Code and OpenCode MCP configs.
fn staged(home: &IsolatedHome) -> (std::path::PathBuf, String, String) {
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    let read = |path: &str| std::fs::read_to_string(generation.join(path)).unwrap();
    let claude = read("plugins/agentpack-bundle/.mcp.json");
    let opencode = read("opencode/opencode.json");
    (generation, claude, opencode)
}

#[test]
fn a_changed_mcp_value_selects_a_generation_that_stages_it() {
    let home = IsolatedHome::new();
    let server = |token: &str, authorization: &str| {
        format!("[mcp.servers.svc]\ncommand = \"node\"\nargs = [\"s.js\"]\nenv = {{ TOKEN = '{token}' }}\n\n[mcp.servers.web]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = {{ Authorization = '{authorization}' }}\n")
    };
    write_servers(&home, &server("${MY_TOKEN}", "Bearer ${TOK}"));
    ok(&home, &["sync"]);
    let (first, claude, opencode) = staged(&home);
    assert!(claude.contains(r#""TOKEN": "${MY_TOKEN}""#), "{claude}");
    assert!(
        claude.contains(r#""Authorization": "Bearer ${TOK}""#),
        "{claude}"
    );
    assert!(
        opencode.contains(r#""TOKEN": "{env:MY_TOKEN}""#),
        "{opencode}"
    );

    // A reference becomes a literal secret: staged as the launcher's variable, in a new generation.
    write_servers(&home, &server("sk-live-123", "Bearer ${TOK}"));
    ok(&home, &["sync"]);
    let (second, claude, opencode) = staged(&home);
    assert_ne!(
        first, second,
        "the staged config changed, so must the generation"
    );
    assert!(
        claude.contains(r#""TOKEN": "${AGENTPACK_MCP_SVC_TOKEN}""#),
        "{claude}"
    );
    assert!(
        opencode.contains(r#""TOKEN": "{env:AGENTPACK_MCP_SVC_TOKEN}""#),
        "{opencode}"
    );

    // A store-safe template's text changes.
    write_servers(&home, &server("sk-live-123", "Token ${TOK}"));
    ok(&home, &["sync"]);
    let (third, claude, _) = staged(&home);
    assert_ne!(second, third);
    assert!(
        claude.contains(r#""Authorization": "Token ${TOK}""#),
        "{claude}"
    );

    // A secret template: the staged config names the launcher's variable, whatever its text.
    write_servers(&home, &server("sk-live-123", "Bearer A_${TOK}"));
    ok(&home, &["sync"]);
    let (fourth, claude, _) = staged(&home);
    assert_ne!(third, fourth);
    assert!(
        claude.contains(r#""Authorization": "${AGENTPACK_MCP_WEB_HEADER_AUTHORIZATION}""#),
        "{claude}"
    );
    assert!(!claude.contains("A_"), "{claude}");

    // The same inputs select the same generation again.
    write_servers(&home, &server("${MY_TOKEN}", "Bearer ${TOK}"));
    ok(&home, &["sync"]);
    assert_eq!(staged(&home).0, first);
}

/// A stand-in agent that records the MCP variables it was given and Codex's home `config.toml`.
const STANDIN: &str = r#"#!/bin/sh
out="$STANDIN_RECORD/$(basename "$0").txt"
{
  env | grep '^AGENTPACK_MCP_' | sort
  if [ -n "$CODEX_HOME" ]; then cat "$CODEX_HOME/config.toml"; fi
} > "$out"
"#;

#[test]
fn a_secret_template_is_expanded_from_the_environment_at_each_launch() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = IsolatedHome::new();
    let root = home.project.parent().unwrap().to_path_buf();
    let bin = root.join("bin");
    let record = root.join("record");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&record).unwrap();
    for name in ["claude", "codex"] {
        std::fs::write(bin.join(name), STANDIN).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(home.home.join(".codex")).unwrap();
    std::fs::write(home.home.join(".codex/config.toml"), "model = \"gpt-5\"\n").unwrap();
    write_servers(
        &home,
        "[mcp.servers.db]\ncommand = \"node\"\nargs = [\"s.js\"]\nenv = { DATABASE_URL = 'postgres://app:pw-SENTINEL@${DB_HOST}/app' }\n\n[mcp.servers.api]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = { Authorization = 'Bearer SENTINEL_TPL_${TOK}' }\n",
    );
    let launch = |agent: &str, host: &str| -> String {
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = home
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .env("PATH", path)
            .env("STANDIN_RECORD", &record)
            .env("DB_HOST", host)
            .env("TOK", "t0k")
            .arg(agent)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{agent}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::read_to_string(record.join(format!("{agent}.txt"))).unwrap()
    };
    let seen = launch("claude", "db1.internal");
    assert!(
        seen.contains("AGENTPACK_MCP_DB_DATABASE_URL=postgres://app:pw-SENTINEL@db1.internal/app"),
        "{seen}"
    );
    assert!(
        seen.contains("AGENTPACK_MCP_API_HEADER_AUTHORIZATION=Bearer SENTINEL_TPL_t0k"),
        "{seen}"
    );
    // The second launch takes the fast path: the template is expanded again, not frozen.
    let seen = launch("claude", "db2.internal");
    assert!(
        seen.contains("AGENTPACK_MCP_DB_DATABASE_URL=postgres://app:pw-SENTINEL@db2.internal/app"),
        "{seen}"
    );
    // A launch stages only its own agent: Claude Code's generation, before the template changes.
    let before = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    let seen = launch("codex", "db3.internal");
    assert!(
        seen.contains(r#"DATABASE_URL = "postgres://app:pw-SENTINEL@db3.internal/app""#),
        "{seen}"
    );
    assert!(
        seen.contains(r#"Authorization = "Bearer SENTINEL_TPL_t0k""#),
        "{seen}"
    );

    // A changed secret template keeps the staged config (it names the same variable), and the
    // next launch gives the agent the new text.
    write_servers(
        &home,
        "[mcp.servers.db]\ncommand = \"node\"\nargs = [\"s.js\"]\nenv = { DATABASE_URL = 'postgres://app:pw-SENTINEL@${DB_HOST}/app' }\n\n[mcp.servers.api]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = { Authorization = 'Bearer OTHER_SENTINEL_${TOK}' }\n",
    );
    let seen = launch("claude", "db4.internal");
    assert!(
        seen.contains("AGENTPACK_MCP_API_HEADER_AUTHORIZATION=Bearer OTHER_SENTINEL_t0k"),
        "{seen}"
    );
    assert_eq!(
        std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap(),
        before
    );

    // The launch record (0600, outside the store) keeps the template, not a launch's expansion.
    let projects = home.agentpack_home.join("projects");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let recorded =
        std::fs::read_to_string(project.path().join("launch/default-claude.json")).unwrap();
    assert!(
        recorded.contains("pw-SENTINEL@${DB_HOST}/app") && !recorded.contains(".internal"),
        "{recorded}"
    );

    let claude = std::fs::read_to_string(
        home.staging_root
            .join("modes/default/plugins/agentpack-bundle/.mcp.json"),
    )
    .unwrap();
    assert!(
        claude.contains(r#""DATABASE_URL": "${AGENTPACK_MCP_DB_DATABASE_URL}""#),
        "{claude}"
    );
    assert_not_under(&home.agentpack_home.join("cache"), "SENTINEL");
}

/// Codex cannot rename a variable or expand a template: a reference to another variable and a
/// store-safe template reach it through the launcher, expanded into its home layer at launch.
#[test]
fn codex_gets_renamed_references_and_templates_from_the_launcher() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = IsolatedHome::new();
    let root = home.project.parent().unwrap().to_path_buf();
    let bin = root.join("bin");
    let record = root.join("record");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&record).unwrap();
    std::fs::write(bin.join("codex"), STANDIN).unwrap();
    std::fs::set_permissions(bin.join("codex"), std::fs::Permissions::from_mode(0o755)).unwrap();
    write_servers(
        &home,
        "[mcp.servers.s]\ntype = \"http\"\nurl = \"https://mcp.example.invalid/mcp\"\nheaders = { X-Pair = '${USER_A}:${USER_B}' }\n\n[mcp.servers.t]\ncommand = \"node\"\nargs = [\"s.js\"]\nenv = { TOK = '${TOK}', OTHER = '${MY_TOKEN}' }\n",
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = home
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("PATH", path)
        .env("STANDIN_RECORD", &record)
        .env("MY_TOKEN", "renamed-value")
        .env("USER_A", "a")
        .env("USER_B", "b")
        .arg("codex")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("left out"), "{stderr}");
    let seen = std::fs::read_to_string(record.join("codex.txt")).unwrap();
    assert!(seen.contains(r#"OTHER = "renamed-value""#), "{seen}");
    assert!(seen.contains(r#"X-Pair = "a:b""#), "{seen}");
    assert!(seen.contains(r#"env_vars = ["TOK"]"#), "{seen}");
}
