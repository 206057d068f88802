use super::*;

fn oci_entry(url: &str, digest: &str) -> LockedPackage {
    LockedPackage {
        module: ModuleId::parse("oci://127.0.0.1:5000/acme/skills/pdf").unwrap(),
        direct: true,
        kind: "skill".into(),
        url: url.to_owned(),
        owner: String::new(),
        repo: String::new(),
        path: String::new(),
        commit: LockedPackage::oci_commit(digest).unwrap(),
        cache_key: oci_cache_key("127.0.0.1:5000", "acme/skills/pdf", digest),
        content_hash: Some(
            ContentHash::parse(&format!("sha256-tree-v1:{}", "b".repeat(64))).unwrap(),
        ),
        name: Some("pdf".into()),
    }
}

#[test]
fn oci_entries_round_trip_and_agree_with_themselves() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let url = LockedPackage::oci_url("127.0.0.1:5000", "acme/skills/pdf", Some("1.2.0"), &digest);
    assert_eq!(
        url,
        format!("oci://127.0.0.1:5000/acme/skills/pdf:1.2.0@{digest}")
    );
    let entry = oci_entry(&url, &digest);
    let pin = entry.oci_pin().unwrap();
    assert_eq!(pin.tag.as_deref(), Some("1.2.0"));
    assert_eq!(pin.digest, digest);
    assert_eq!(entry.commit.as_str(), "a".repeat(40));
    let mut lock = Lockfile::new("demo", "0.1.0");
    lock.packages.push(entry.clone());
    let text = lock.to_toml_string();
    assert_eq!(
        Lockfile::parse(&text, Path::new("pack.lock")).unwrap(),
        lock
    );

    // A digest pin has no tag.
    let plain = oci_entry(
        &LockedPackage::oci_url("127.0.0.1:5000", "acme/skills/pdf", None, &digest),
        &digest,
    );
    assert_eq!(plain.oci_pin().unwrap().tag, None);

    // Another digest's cache key, a url of another module, a missing content hash: refused.
    let mut moved = entry.clone();
    moved.cache_key = oci_cache_key(
        "127.0.0.1:5000",
        "acme/skills/pdf",
        &format!("sha256:{}", "c".repeat(64)),
    );
    assert!(matches!(
        moved.check_consistent(),
        Err(IntegrityError::Inconsistent { .. })
    ));
    for (url, needle) in [
        (
            format!("oci://127.0.0.1:5000/acme/other:1@{digest}"),
            "not oci://",
        ),
        (
            "oci://127.0.0.1:5000/acme/skills/pdf:1.2.0".to_owned(),
            "not oci://",
        ),
    ] {
        let mut lock = Lockfile::new("demo", "0.1.0");
        lock.packages.push(oci_entry(&url, &digest));
        let error = Lockfile::parse(&lock.to_toml_string(), Path::new("pack.lock"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(needle), "{error}");
    }
    let mut unhashed = Lockfile::new("demo", "0.1.0");
    let mut entry = entry;
    entry.content_hash = None;
    unhashed.packages.push(entry);
    let error = Lockfile::parse(&unhashed.to_toml_string(), Path::new("pack.lock"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("always locked with its content hash"),
        "{error}"
    );
}

#[test]
fn basic_string_escapes() {
    assert_eq!(toml_basic_string("plain"), "\"plain\"");
    assert_eq!(toml_basic_string("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(toml_basic_string("\t\n\r\u{8}\u{c}"), r#""\t\n\r\b\f""#);
    assert_eq!(
        toml_basic_string("\u{0}\u{1f}\u{7f}"),
        r#""\u0000\u001F\u007F""#
    );
    assert_eq!(toml_basic_string("é\u{85}🦀"), "\"é\u{85}🦀\"");
}

#[test]
fn github_url_shape() {
    let c = CommitSha::parse("8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d").unwrap();
    assert_eq!(
        LockedPackage::github_url("acme", "x", &c, "/a/b/"),
        "https://github.com/acme/x/tree/8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d/a/b"
    );
    assert_eq!(
        LockedPackage::github_url("acme", "x", &c, ""),
        "https://github.com/acme/x/tree/8fc7add0e2b00906426adfb1ab9bf0f0bb40de2d"
    );
}

#[test]
fn status_round_trips() {
    for s in [
        McpStatus::Pinned,
        McpStatus::Unpinned,
        McpStatus::Unpinnable,
    ] {
        assert_eq!(McpStatus::parse(s.as_str()), Some(s));
    }
    assert_eq!(McpStatus::parse("Pinned"), None);
}

#[test]
fn a_lock_recording_the_same_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOCK_FILE);
    let spaced = "lockfile-version = 2\n\n\n[meta]\nname    = \"demo\"\nversion = \"0.1.0\"\n";
    std::fs::write(&path, spaced).unwrap();
    let lock = Lockfile::new("demo", "0.1.0");
    assert!(!lock.save_unless_unchanged(&path).unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), spaced);
    let renamed = Lockfile::new("demo-2", "0.1.0");
    assert!(renamed.save_unless_unchanged(&path).unwrap());
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .starts_with("lockfile_version = 2\n"));
}

#[test]
fn a_second_mcp_record_of_one_name_is_refused_at_its_index() {
    let record = format!("[[mcp_servers]]\nname = \"pw\"\nsource = \"manifest\"\nlauncher = \"npm\"\nstatus = \"pinned\"\ndefinition = \"sha256:{}\"\n", "0".repeat(64));
    let text = format!(
        "lockfile_version = 3\n\n[meta]\nname = \"demo\"\nversion = \"0.1.0\"\n\n{record}\n{record}"
    );
    let err = Lockfile::parse(&text, Path::new("pack.lock")).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "invalid pack.lock at `mcp_servers[1]`: a second record for server \"pw\"\n"
        ),
        "{err}"
    );
}
