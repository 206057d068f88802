//! Property tests: any valid lock written and read back is the same lock, and writing is a fixed
//! point (`write(parse(write(x))) == write(x)`).

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::path::Path;

use agentpack_lockfile::{
    keys, CacheKey, CommitSha, ContentHash, LockConfig, LockMeta, LockedPackage, Lockfile,
    McpRecord, McpStatus, ModuleId, TreeEntry,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    // Any characters, including quotes, backslashes, control characters and non-ASCII.
    prop_oneof![
        "[a-z0-9@/._-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(16).collect()),
    ]
}

fn module() -> impl Strategy<Value = ModuleId> {
    prop_oneof![
        (
            "[a-z0-9-]{1,8}",
            "[a-z0-9][a-z0-9._-]{0,7}",
            vec("[A-Za-z0-9_.-]{0,2}[A-Za-z0-9_-]", 0..3)
        )
            .prop_map(|(owner, repo, path)| ModuleId::github(
                &owner,
                &repo,
                &path.join("/")
            )
            .unwrap()),
        "[a-z0-9][a-z0-9_-]{0,10}".prop_map(|name| ModuleId::parse(&name).unwrap()),
    ]
}

fn package() -> impl Strategy<Value = LockedPackage> {
    (
        module(),
        any::<bool>(),
        text(),
        any::<[u8; 20]>(),
        any::<[u8; 32]>(),
        option::of(any::<[u8; 32]>()),
        option::of(text()),
        text(),
    )
        .prop_map(|(module, direct, kind, commit, key, hash, name, url)| {
            let commit = CommitSha::parse(&hex::encode(commit)).unwrap();
            let (url, owner, repo, path, cache_key) = match module.as_github() {
                Some(g) => (
                    LockedPackage::github_url(g.owner, g.repo, &commit, g.path),
                    g.owner.to_owned(),
                    g.repo.to_owned(),
                    g.path.to_owned(),
                    keys::github_cache_key(g.owner, g.repo, g.path, &commit),
                ),
                None => (
                    format!("path:{url}"),
                    String::new(),
                    String::new(),
                    String::new(),
                    CacheKey::from_digest(key),
                ),
            };
            LockedPackage {
                module,
                direct,
                kind,
                url,
                owner,
                repo,
                path,
                commit,
                cache_key,
                content_hash: hash.map(ContentHash::from_digest),
                name,
            }
        })
}

fn tree_entry() -> impl Strategy<Value = TreeEntry> {
    (
        text(),
        text(),
        text(),
        vec(text(), 0..3),
        vec(text(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(path, version, integrity, os, cpu, optional)| TreeEntry {
            path,
            version,
            integrity,
            os,
            cpu,
            optional,
        })
}

fn mcp_record() -> impl Strategy<Value = McpRecord> {
    (
        (
            text(),
            text(),
            text(),
            prop_oneof![
                Just(McpStatus::Pinned),
                Just(McpStatus::Unpinned),
                Just(McpStatus::Unpinnable)
            ],
            any::<[u8; 32]>(),
        ),
        (
            option::of(text()),
            option::of(text()),
            option::of(text()),
            option::of(text()),
            option::of(text()),
            option::of(text()),
        ),
        (
            option::of(text()),
            any::<bool>(),
            option::of(text()),
            option::of(text()),
            option::of(text()),
        ),
        vec(tree_entry(), 0..3),
    )
        .prop_map(|((name, source, launcher, status, def), a, b, tree)| {
            let mut r = McpRecord::new(
                &name,
                &source,
                &launcher,
                status,
                &format!("sha256:{}", hex::encode(def)),
            );
            (
                r.requested,
                r.package,
                r.version,
                r.integrity,
                r.registry,
                r.host,
            ) = a;
            (r.command, r.allow_unpinned, r.reason, r.bin, r.tree_digest) = b;
            r.tree = tree;
            r
        })
}

fn lockfile() -> impl Strategy<Value = Lockfile> {
    (
        text(),
        text(),
        vec(text(), 0..3),
        vec(package(), 0..5),
        vec(mcp_record(), 0..4),
    )
        .prop_map(|(name, version, disabled_plugins, packages, servers)| {
            let mut lock = Lockfile {
                meta: LockMeta { name, version },
                config: LockConfig { disabled_plugins },
                packages: Vec::new(),
                mcp_servers: Vec::new(),
            };
            for p in packages {
                if lock.package(p.module.as_str()).is_none() {
                    lock.packages.push(p);
                }
            }
            for s in servers {
                if lock.mcp_server(&s.name).is_none() {
                    lock.mcp_servers.push(s);
                }
            }
            lock
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn write_then_parse_is_identity(mut lock in lockfile()) {
        let text = lock.to_toml_string();
        let parsed = Lockfile::parse(&text, Path::new("pack.lock")).unwrap();
        lock.sort();
        prop_assert_eq!(&parsed, &lock);
        prop_assert_eq!(parsed.to_toml_string(), text);
        prop_assert_eq!(parsed.lockfile_version(), lock.lockfile_version());
    }
}
