//! pack.lock reading, validation and byte-stable writing against hand-written fixtures in the
//! docs' shape, plus every malformed case of the docs' Integrity page.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::path::Path;

use agentpack_lockfile::{
    keys, CommitSha, ContentHash, IntegrityError, LockError, Lockfile, McpStatus,
};

const V2: &str = include_str!("../fixtures/v2.lock");
const V3: &str = include_str!("../fixtures/v3.lock");
const V4: &str = include_str!("../fixtures/v4.lock");

const DEMO_COMMIT: &str = "8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d";

fn parse(text: &str) -> Result<Lockfile, LockError> {
    Lockfile::parse(text, Path::new("/work/project/pack.lock"))
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn fixtures_load_and_write_back_byte_identical() {
    for (text, version) in [(V2, 2), (V3, 3), (V4, 4)] {
        let lock = parse(text).unwrap();
        assert_eq!(lock.lockfile_version(), version);
        assert_eq!(
            lock.to_toml_string(),
            text,
            "fixture v{version} did not round-trip"
        );
    }
}

#[test]
fn fixture_contents() {
    let v2 = parse(V2).unwrap();
    assert_eq!(v2.packages.len(), 3);
    assert_eq!(v2.unverified_packages().count(), 3);
    assert!(!v2.package("github.com/acme/shared-rules").unwrap().direct);

    let v3 = parse(V3).unwrap();
    assert_eq!(v3.config.disabled_plugins, ["hookify"]);
    let local = v3.package("local-rules").unwrap();
    assert!(!local.is_github());
    assert_eq!(
        local.cache_key,
        keys::path_cache_key(
            Path::new("/work/local-rules"),
            "0123456789abcdef0123456789abcdef01234567"
        )
    );
    let fs = v3.mcp_server("filesystem").unwrap();
    assert_eq!(fs.status, McpStatus::Unpinned);
    assert!(fs.allow_unpinned);

    let v4 = parse(V4).unwrap();
    let pw = v4.mcp_server("playwright").unwrap();
    assert_eq!(pw.tree.len(), 3);
    assert_eq!(pw.tree[1].os, ["darwin"]);
    assert!(pw.tree[1].optional);
    assert_eq!(
        v4.mcp_server("retrieval").unwrap().status,
        McpStatus::Unpinnable
    );
}

#[test]
fn version_is_derived_from_content() {
    let mut lock = parse(V2).unwrap();
    assert_eq!(lock.lockfile_version(), 2);
    lock.packages[0].content_hash = Some(ContentHash::from_digest([1; 32]));
    assert_eq!(lock.lockfile_version(), 3);
    lock.packages[0].content_hash = None;
    let v4 = parse(V4).unwrap();
    lock.mcp_servers.push(v4.mcp_servers[1].clone());
    assert_eq!(
        lock.lockfile_version(),
        3,
        "an MCP record alone makes version 3"
    );
    lock.mcp_servers.push(v4.mcp_servers[0].clone());
    assert_eq!(lock.lockfile_version(), 4, "a locked tree makes version 4");
    assert!(lock.to_toml_string().starts_with("lockfile_version = 4\n"));
    assert_eq!(
        Lockfile::new("x", "0.0.1").to_toml_string(),
        "lockfile_version = 2\n\n[meta]\nname = \"x\"\nversion = \"0.0.1\"\n"
    );
}

#[test]
fn writer_sorts_packages_servers_and_tree() {
    let mut lock = parse(V4).unwrap();
    lock.mcp_servers.reverse();
    lock.mcp_servers[1].tree.reverse();
    let mut more = parse(V2).unwrap();
    more.packages.reverse();
    lock.packages.extend(
        more.packages
            .into_iter()
            .filter(|p| !p.module.as_str().contains("canvas")),
    );
    lock.packages.reverse();
    let text = lock.to_toml_string();
    let back = parse(&text).unwrap();
    let modules: Vec<&str> = back.packages.iter().map(|p| p.module.as_str()).collect();
    let mut sorted = modules.clone();
    sorted.sort();
    assert_eq!(modules, sorted);
    assert_eq!(back.mcp_servers[0].name, "playwright");
    assert_eq!(
        back.mcp_servers[0].tree[0].path,
        "node_modules/@playwright/mcp"
    );
    lock.sort();
    assert_eq!(back, lock);
}

/// The docs' lock example with placeholders filled in and its aligned `=` signs: it loads, and
/// writing it gives the canonical layout, which round-trips.
#[test]
fn docs_example_normalizes_and_round_trips() {
    let commit = DEMO_COMMIT;
    let key = keys::github_cache_key(
        "anthropics",
        "skills",
        "skills/canvas-design",
        &CommitSha::parse(commit).unwrap(),
    );
    let hash = "e2917cc0".repeat(8);
    let def = "a8".repeat(32);
    let docs = format!(
        r#"lockfile_version = 3

[meta]
name = "my-project"
version = "0.0.1"

[[packages]]
module       = "github.com/anthropics/skills/skills/canvas-design"
direct       = true
kind         = "skill"
url          = "https://github.com/anthropics/skills/tree/{commit}/skills/canvas-design"
owner        = "anthropics"
repo         = "skills"
path         = "skills/canvas-design"
commit       = "{commit}"
cache_key    = "{key}"
content_hash = "sha256-tree-v1:{hash}"

[[mcp_servers]]
name       = "playwright"
source     = "plugin"
launcher   = "npm"
status     = "pinned"
definition = "sha256:{def}"
requested  = "@playwright/mcp@latest"
package    = "@playwright/mcp"
version    = "0.0.83"
integrity  = "sha512-…"
registry   = "https://registry.npmjs.org"
"#
    );
    let lock = parse(&docs).unwrap();
    let canonical = lock.to_toml_string();
    insta::assert_snapshot!("docs_example_canonical", canonical);
    // Normalizing the docs' alignment by hand gives the same bytes.
    let normalized: String = docs
        .lines()
        .map(|l| match l.split_once(" = ") {
            Some((k, v)) => format!("{} = {v}\n", k.trim_end()),
            None => format!("{l}\n"),
        })
        .collect();
    assert_eq!(canonical, normalized);
    assert_eq!(parse(&canonical).unwrap(), lock);
    assert_eq!(parse(&canonical).unwrap().to_toml_string(), canonical);
}

#[test]
fn which_errors_lock_may_replace() {
    assert!(parse("lockfile_version = = 3\n")
        .unwrap_err()
        .is_replaceable_by_lock());
    assert!(parse("[[skills]]\n").unwrap_err().is_replaceable_by_lock());
    let unknown = V2.replacen("kind = ", "checksum = \"x\"\nkind = ", 1);
    assert!(parse(&unknown).unwrap_err().is_replaceable_by_lock());
    let newer = V2.replacen("lockfile_version = 2", "lockfile_version = 5", 1);
    assert!(!parse(&newer).unwrap_err().is_replaceable_by_lock());
    let bad_hash = V3.replacen(
        "content_hash = \"sha256-tree-v1:",
        "content_hash = \"sha256-",
        1,
    );
    assert!(!parse(&bad_hash).unwrap_err().is_replaceable_by_lock());
}

#[test]
fn old_key_spelling() {
    let kebab = V2.replacen("lockfile_version", "lockfile-version", 1);
    let lock = parse(&kebab).unwrap();
    assert_eq!(
        lock.to_toml_string(),
        V2,
        "written back with the current spelling"
    );
    let both_same = format!("lockfile-version = 2\n{V2}");
    parse(&both_same).unwrap();
    let both_differ = format!("lockfile-version = 3\n{V2}");
    insta::assert_snapshot!("version_keys_disagree", err(&both_differ));
}

#[test]
fn structural_errors() {
    let cases = [
        (
            "unsupported_version_5",
            V2.replacen("lockfile_version = 2", "lockfile_version = 5", 1),
        ),
        (
            "unsupported_version_1",
            V2.replacen("lockfile_version = 2", "lockfile_version = 1", 1),
        ),
        (
            "version_not_integer",
            V2.replacen("lockfile_version = 2", "lockfile_version = \"3\"", 1),
        ),
        (
            "missing_version",
            V2.replacen("lockfile_version = 2\n", "", 1),
        ),
        (
            "old_skills_layout",
            "lockfile_version = 1\n\n[[skills]]\nname = \"x\"\n".to_owned(),
        ),
        (
            "old_plugins_layout",
            "[[plugins]]\nname = \"x\"\n".to_owned(),
        ),
        ("unknown_top_level", format!("{V2}\n[extra]\nx = 1\n")),
        (
            "unknown_package_field",
            V2.replacen(
                "kind = \"plugin\"",
                "kind = \"plugin\"\nchecksum = \"x\"",
                1,
            ),
        ),
        (
            "unknown_meta_field",
            V2.replacen(
                "version = \"0.5.0\"",
                "version = \"0.5.0\"\nauthor = \"me\"",
                1,
            ),
        ),
        (
            "unknown_config_field",
            V3.replacen("disabled_plugins", "enabled_plugins", 1),
        ),
        ("unknown_mcp_field", V3.replacen("reason = ", "note = ", 1)),
        ("unknown_tree_field", V4.replacen("os = [", "libc = [", 1)),
        (
            "missing_cache_key",
            V2.replacen("cache_key = ", "# cache_key = ", 1),
        ),
        (
            "bad_commit",
            V2.replacen(
                &format!("commit = \"{DEMO_COMMIT}\""),
                "commit = \"8fc7add\"",
                1,
            ),
        ),
        (
            "bad_cache_key",
            V2.replacen("cache_key = \"", "cache_key = \"X", 1),
        ),
        (
            "bad_status",
            V3.replacen("status = \"unpinned\"", "status = \"locked\"", 1),
        ),
        (
            "bad_definition",
            V3.replacen("definition = \"sha256:", "definition = \"sha1:", 1),
        ),
        (
            "bad_module",
            V2.replacen(
                "module = \"github.com/acme/shared-rules\"",
                "module = \"gitlab.com/acme/shared-rules\"",
                1,
            ),
        ),
        (
            "duplicate_package",
            format!(
                "{V2}{}",
                &V2[V2.find("\n[[packages]]").unwrap()
                    ..V2.find("\n[[packages]]\nmodule = \"github.com/acme/shared")
                        .unwrap()]
            ),
        ),
        ("not_toml", "lockfile_version = = 3\n".to_owned()),
    ];
    let mut out = String::new();
    for (name, text) in cases {
        let message = err(&text);
        out.push_str(&format!("## {name}\n{message}\n\n"));
    }
    insta::assert_snapshot!("structural_errors", out);
}

fn with_content_hash(value: &str) -> String {
    V3.replacen(
        &format!("content_hash = \"sha256-tree-v1:{}\"", "e2917cc0".repeat(8)),
        &format!("content_hash = {value}"),
        1,
    )
}

#[test]
fn invalid_content_hash_cases_from_the_docs() {
    let hex = "0".repeat(64);
    let cases = [
        ("unknown_prefix", format!("\"sha256-{hex}\"")),
        ("other_algorithm", format!("\"sha512-tree-v1:{hex}\"")),
        ("missing_prefix", format!("\"{hex}\"")),
        ("short_digest", format!("\"sha256-tree-v1:{}\"", &hex[..63])),
        (
            "uppercase_digest",
            format!("\"sha256-tree-v1:{}\"", "ABCDEF0123".repeat(6) + "ABCD"),
        ),
        ("empty_string", "\"\"".to_owned()),
    ];
    let mut out = String::new();
    for (name, value) in cases {
        let e = parse(&with_content_hash(&value)).unwrap_err();
        let LockError::Integrity(IntegrityError::InvalidContentHash { module, .. }) = &e else {
            panic!("{name}: {e:?}");
        };
        assert_eq!(module, "github.com/anthropics/skills/skills/canvas-design");
        out.push_str(&format!("## {name}\n{e}\n\n"));
    }
    insta::assert_snapshot!("invalid_content_hash", out);
}

#[test]
fn docs_invalid_content_hash_message_word_for_word() {
    let text = with_content_hash(&format!("\"sha256-{}\"", "0".repeat(64))).replace(
        "github.com/anthropics/skills/skills/canvas-design",
        "github.com/acme/skills/demo",
    );
    let message = err(&text);
    assert_eq!(
        message,
        "invalid content_hash in pack.lock: github.com/acme/skills/demo
  found     \"sha256-0000000000000000000000000000000000000000000000000000000000000000\"
  expected  sha256-tree-v1:<64 lowercase hex digits>
  lockfile  /work/project/pack.lock
  fix       restore pack.lock from version control, or upgrade agentpack if a newer version wrote it"
    );
}

#[test]
fn inconsistent_commit_vs_cache_key() {
    // A hand-edited commit: the cache_key still belongs to the old one.
    let edited = V3.replacen(
        &format!("commit = \"{DEMO_COMMIT}\""),
        "commit = \"2222222222222222222222222222222222222222\"",
        1,
    );
    let e = parse(&edited).unwrap_err();
    let LockError::Integrity(IntegrityError::Inconsistent {
        module, expected, ..
    }) = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(module, "github.com/anthropics/skills/skills/canvas-design");
    assert_eq!(
        expected,
        &keys::github_cache_key(
            "anthropics",
            "skills",
            "skills/canvas-design",
            &CommitSha::parse("2222222222222222222222222222222222222222").unwrap()
        )
    );
    insta::assert_snapshot!("inconsistent_entry", e.to_string());
    let message = e.to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(
        lines[0],
        "inconsistent pack.lock entry: github.com/anthropics/skills/skills/canvas-design"
    );
    assert_eq!(
        lines[1],
        "  commit     2222222222222222222222222222222222222222"
    );
    assert_eq!(lines[2], "  cache_key  858a916f…");
    assert!(
        lines[3].starts_with("  expected   ")
            && lines[3].ends_with("…   (the cache_key of that commit)")
    );
    assert_eq!(lines[4], "  fix        restore pack.lock from version control; move a pin with `agentpack update` or `agentpack lock --update`");

    // Without a content hash the entry is not checked (v2 locks load as they are).
    let v2_edited = V2.replacen(
        &format!("commit = \"{DEMO_COMMIT}\""),
        "commit = \"2222222222222222222222222222222222222222\"",
        1,
    );
    parse(&v2_edited).unwrap();
    // Path entries are never checked against the GitHub formula.
    let local_edited = V3.replacen(
        "commit = \"0123456789abcdef0123456789abcdef01234567\"",
        "commit = \"0123456789abcdef0123456789abcdef00000000\"",
        1,
    );
    parse(&local_edited).unwrap();
}

#[test]
fn save_is_atomic_and_skips_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pack.lock");
    let lock = parse(V4).unwrap();
    assert!(lock.save(&path).unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), V4);
    assert!(!lock.save(&path).unwrap());
    assert_eq!(Lockfile::load(&path).unwrap(), lock);
    assert!(Lockfile::load_if_exists(&dir.path().join("none"))
        .unwrap()
        .is_none());
    let e = Lockfile::load(&dir.path().join("none"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot read ") && e.contains("none"), "{e}");
}

#[test]
fn strings_with_special_characters_round_trip() {
    let mut lock = parse(V3).unwrap();
    lock.meta.name = "quote\" back\\slash\ttab\nnewline\u{1}\u{7f} é 🦀".to_owned();
    lock.mcp_servers[0].reason = Some("line1\r\nline2\u{c}\u{8}".to_owned());
    let text = lock.to_toml_string();
    let back = parse(&text).unwrap();
    assert_eq!(back, lock);
    assert_eq!(back.to_toml_string(), text);
    assert!(
        text.contains(r#"name = "quote\" back\\slash\ttab\nnewline\u0001\u007F é 🦀""#),
        "{text}"
    );
}

#[test]
fn require_the_fixtures_to_be_consistent() {
    let v3 = parse(V3).unwrap();
    for p in &v3.packages {
        p.check_consistent().unwrap();
    }
    assert!(v3
        .package("github.com/anthropics/skills/skills/canvas-design")
        .unwrap()
        .is_github());
}
