//! Codex's keychain login bridged into `$AGENTPACK_HOME/shared/codex/auth.json`, through a
//! stand-in `security` program that answers from files (keyed by `-s` and `-a`), exits 44 when an
//! entry is missing, like macOS's, and records every call.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use crate::launch_common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentpack_harness::launch::home_layer::{self, codex_keychain, HomeLayerRequest, PreparedHome};
use agentpack_harness::Agent;
use launch_common::{world, World};

const FAKE_SECURITY: &str = r#"#!/bin/sh
dir=$(dirname "$0")
printf '%s\n' "$*" >> "$dir/argv.log"
if [ -f "$dir/fail" ]; then
  echo "security: SecKeychainSearchCopyNext: User interaction is not allowed." >&2
  exit 36
fi
service=
account=
while [ $# -gt 0 ]; do
  case "$1" in
    -s) service=$2; shift 2 ;;
    -a) account=$2; shift 2 ;;
    *) shift ;;
  esac
done
entry="$dir/entries/$service/$account"
if [ -f "$entry" ]; then
  cat "$entry"
  printf '\n'
  exit 0
fi
echo "security: SecKeychainSearchCopyNext: The specified item could not be found in the keychain." >&2
exit 44
"#;

/// The stand-in keychain: a `security` script and the entries it answers with.
struct FakeKeychain {
    dir: PathBuf,
    cli: home_layer::SecurityCli,
}

impl FakeKeychain {
    fn new(w: &World) -> Self {
        let dir = w.root.join("keychain");
        std::fs::create_dir_all(dir.join("entries/Codex Auth")).unwrap();
        let program = dir.join("security");
        // Written by a child process: a write handle to an executable held by this (threaded)
        // test process could leak into another test's fork and make exec fail with ETXTBSY.
        let mut child = Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(&program)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(FAKE_SECURITY.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        Self {
            dir,
            cli: home_layer::SecurityCli { program },
        }
    }

    fn set(&self, account: &str, secret: &str) {
        std::fs::write(self.dir.join("entries/Codex Auth").join(account), secret).unwrap();
    }

    fn remove(&self, account: &str) {
        std::fs::remove_file(self.dir.join("entries/Codex Auth").join(account)).unwrap();
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("argv.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn clear_calls(&self) {
        let _ = std::fs::remove_file(self.dir.join("argv.log"));
    }

    fn fail(&self) {
        std::fs::write(self.dir.join("fail"), "").unwrap();
    }
}

fn key(w: &World) -> String {
    codex_keychain::store_key(&w.home.join(".codex"))
}

fn shared_auth(w: &World) -> PathBuf {
    w.agentpack_home.join("shared/codex/auth.json")
}

fn prepare(w: &World, keychain: Option<&home_layer::SecurityCli>) -> PreparedHome {
    let user = w.user_env();
    let request = HomeLayerRequest {
        agent: Agent::Codex,
        generation: &w.generation,
        project_root: &w.project,
        project_hash: "0123456789abcdef",
        mode_dir: "default",
        agentpack_home: &w.agentpack_home,
        staging_root_override: Some(&w.staging_root),
        state_dir: &w.state_dir,
        user: &user,
        secrets: &w.secrets[&Agent::Codex],
        keep_attribution: false,
        yolo: false,
        workspace: &w.project,
        keychain,
    };
    home_layer::prepare(&request).unwrap()
}

fn world_without_auth_file() -> World {
    let w = world(Path::new("/usr/local/bin/agentpack"));
    std::fs::remove_file(w.home.join(".codex/auth.json")).unwrap();
    w
}

fn legacy_auth(refresh: &str) -> String {
    format!(
        r#"{{"OPENAI_API_KEY":null,"tokens":{{"id_token":"h.p.s","access_token":"AT-{refresh}","refresh_token":"RT-{refresh}","account_id":null}},"last_refresh":"{refresh}"}}"#
    )
}

/// Stores a v2 login at `revision`: an API key and tokens, refreshed at `refresh`.
fn set_v2(keychain: &FakeKeychain, key: &str, revision: &str, refresh: &str) {
    keychain.set(&format!("{key}|v2|active"), revision);
    let entry = |suffix: &str| format!("{key}|v2|{revision}|{suffix}");
    keychain.set(
        &entry("manifest"),
        &serde_json::json!({
            "auth_mode": "chatgpt",
            "has_openai_api_key": true,
            "has_tokens": true,
            "has_account_id": true,
            "last_refresh": refresh,
        })
        .to_string(),
    );
    keychain.set(&entry("OPENAI_API_KEY"), "sk-SECRET-KEY");
    keychain.set(&entry("tokens.id_token"), "SECRET.ID.TOKEN");
    keychain.set(&entry("tokens.access_token"), "SECRET-ACCESS");
    keychain.set(&entry("tokens.refresh_token"), "SECRET-REFRESH");
    keychain.set(&entry("tokens.account_id"), "acct-1");
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn legacy_keychain_login_becomes_the_shared_auth_file_the_staged_home_links_to() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    let text = legacy_auth("2025-01-02T03:04:05.123456Z");
    keychain.set(&key(&w), &text);

    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    let shared = shared_auth(&w);
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), text);
    assert_eq!(mode_of(&shared), 0o600);
    let home = prepared.root.unwrap();
    assert_eq!(std::fs::read_link(home.join("auth.json")).unwrap(), shared);
    assert_eq!(
        std::fs::read_to_string(home.join("auth.json")).unwrap(),
        text
    );
    // The v2 layout is asked for first, then the legacy entry, each by service and account.
    assert_eq!(
        keychain.calls(),
        vec![
            format!(
                "find-generic-password -s Codex Auth -a {}|v2|active -w",
                key(&w)
            ),
            format!("find-generic-password -s Codex Auth -a {} -w", key(&w)),
        ]
    );
    // Nothing lands in the real ~/.codex.
    assert!(!w.home.join(".codex/auth.json").exists());
}

#[test]
fn v2_keychain_login_is_assembled_into_codex_s_auth_json() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    set_v2(
        &keychain,
        &key(&w),
        "1735787045000000000",
        "2025-01-02T03:04:05Z",
    );

    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    let shared = shared_auth(&w);
    assert_eq!(mode_of(&shared), 0o600);
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&shared).unwrap()).unwrap();
    assert_eq!(
        parsed,
        serde_json::json!({
            "auth_mode": "chatgpt",
            "OPENAI_API_KEY": "sk-SECRET-KEY",
            "tokens": {
                "id_token": "SECRET.ID.TOKEN",
                "access_token": "SECRET-ACCESS",
                "refresh_token": "SECRET-REFRESH",
                "account_id": "acct-1",
            },
            "last_refresh": "2025-01-02T03:04:05Z",
        })
    );
    assert_eq!(
        std::fs::read_link(prepared.root.unwrap().join("auth.json")).unwrap(),
        shared
    );
}

#[test]
fn a_real_auth_file_means_the_keychain_is_never_asked() {
    let w = world(Path::new("/usr/local/bin/agentpack"));
    let keychain = FakeKeychain::new(&w);
    keychain.set(&key(&w), &legacy_auth("2025-01-02T03:04:05Z"));

    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert_eq!(keychain.calls(), Vec::<String>::new());
    assert!(!shared_auth(&w).exists());
    assert_eq!(
        std::fs::read_link(prepared.root.unwrap().join("auth.json")).unwrap(),
        w.home.join(".codex/auth.json")
    );
}

#[test]
fn a_newer_keychain_login_replaces_the_shared_file_and_an_older_one_does_not() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    let key = key(&w);
    let shared = shared_auth(&w);

    // A login in native Codex after the shared file was written wins.
    keychain.set(&key, &legacy_auth("2025-01-01T00:00:00Z"));
    prepare(&w, Some(&keychain.cli));
    assert_eq!(
        std::fs::read_to_string(&shared).unwrap(),
        legacy_auth("2025-01-01T00:00:00Z")
    );
    keychain.set(&key, &legacy_auth("2025-03-01T00:00:00.5Z"));
    prepare(&w, Some(&keychain.cli));
    assert_eq!(
        std::fs::read_to_string(&shared).unwrap(),
        legacy_auth("2025-03-01T00:00:00.5Z")
    );

    // Codex refreshed the shared file since: an older keychain entry leaves it alone.
    let refreshed = legacy_auth("2025-06-01T12:00:00+02:00");
    std::fs::write(&shared, &refreshed).unwrap();
    prepare(&w, Some(&keychain.cli));
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), refreshed);

    // Same for v2, whose secrets are not even read when they would not be written.
    keychain.remove(&key);
    set_v2(&keychain, &key, "42", "2025-05-01T00:00:00Z");
    keychain.clear_calls();
    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), refreshed);
    assert_eq!(
        keychain.calls(),
        vec![
            format!("find-generic-password -s Codex Auth -a {key}|v2|active -w"),
            format!("find-generic-password -s Codex Auth -a {key}|v2|42|manifest -w"),
        ]
    );
    set_v2(&keychain, &key, "43", "2025-07-01T00:00:00Z");
    prepare(&w, Some(&keychain.cli));
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&shared).unwrap()).unwrap();
    assert_eq!(parsed["last_refresh"], "2025-07-01T00:00:00Z");
    assert_eq!(parsed["tokens"]["refresh_token"], "SECRET-REFRESH");
    assert_eq!(mode_of(&shared), 0o600);
}

#[test]
fn no_keychain_login_writes_nothing_and_says_nothing() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert!(!shared_auth(&w).exists());
    assert_eq!(keychain.calls().len(), 2, "{:?}", keychain.calls());
    // Without a keychain (not macOS) nothing is asked either.
    keychain.clear_calls();
    let prepared = prepare(&w, None);
    assert!(prepared.warnings.is_empty());
    assert_eq!(keychain.calls(), Vec::<String>::new());
    assert_eq!(
        std::fs::read_link(prepared.root.unwrap().join("auth.json")).unwrap(),
        shared_auth(&w)
    );
}

#[test]
fn a_broken_keychain_login_is_a_warning_naming_the_entry_without_its_secrets() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    let key = key(&w);
    set_v2(&keychain, &key, "42", "2025-05-01T00:00:00Z");
    let missing = format!("{key}|v2|42|tokens.refresh_token");
    keychain.remove(&missing);

    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(!shared_auth(&w).exists());
    assert_eq!(prepared.warnings.len(), 1, "{:?}", prepared.warnings);
    let warning = &prepared.warnings[0];
    assert!(warning.contains(&missing), "{warning}");
    assert!(warning.contains("Codex Auth"), "{warning}");
    assert!(warning.contains("agentpack codex login"), "{warning}");
    assert!(!warning.contains("SECRET"), "{warning}");
    // The layer is complete all the same.
    assert_eq!(
        std::fs::read_link(prepared.root.unwrap().join("auth.json")).unwrap(),
        shared_auth(&w)
    );
}

#[test]
fn a_keychain_that_cannot_be_read_warns_only_when_there_is_no_usable_shared_login() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    keychain.fail();
    let prepared = prepare(&w, Some(&keychain.cli));
    assert_eq!(prepared.warnings.len(), 1, "{:?}", prepared.warnings);
    let warning = &prepared.warnings[0];
    assert!(
        warning.contains("User interaction is not allowed"),
        "{warning}"
    );
    assert!(warning.contains(&key(&w)), "{warning}");

    // After `agentpack codex login` wrote the shared file, Codex works from it: no warning.
    std::fs::write(shared_auth(&w), legacy_auth("2025-01-01T00:00:00Z")).unwrap();
    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert_eq!(
        std::fs::read_to_string(shared_auth(&w)).unwrap(),
        legacy_auth("2025-01-01T00:00:00Z")
    );

    // A `security` that is not there is a warning too, never a failed launch.
    std::fs::remove_file(shared_auth(&w)).unwrap();
    let missing = home_layer::SecurityCli {
        program: w.root.join("no-such-security"),
    };
    let prepared = prepare(&w, Some(&missing));
    assert_eq!(prepared.warnings.len(), 1, "{:?}", prepared.warnings);
    assert!(
        prepared.warnings[0].contains("no-such-security"),
        "{:?}",
        prepared.warnings
    );
}

#[test]
fn an_unusable_shared_file_is_replaced_unless_codex_is_writing_it_right_now() {
    let w = world_without_auth_file();
    let keychain = FakeKeychain::new(&w);
    let text = legacy_auth("2025-01-01T00:00:00Z");
    keychain.set(&key(&w), &text);
    let shared = shared_auth(&w);
    std::fs::create_dir_all(shared.parent().unwrap()).unwrap();

    // Truncated a moment ago: Codex is writing it; the keychain is not even asked.
    std::fs::write(&shared, "").unwrap();
    let prepared = prepare(&w, Some(&keychain.cli));
    assert!(prepared.warnings.is_empty(), "{:?}", prepared.warnings);
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), "");
    assert_eq!(keychain.calls(), Vec::<String>::new());

    // Left truncated (Codex died mid-write): the keychain login restores it.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&shared)
        .unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    drop(file);
    prepare(&w, Some(&keychain.cli));
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), text);
}
